"""The line splitter and the /bin/sh step wrapper, run by the host's real /bin/sh."""

from __future__ import annotations

import os
import signal
import subprocess

from workflow_agent.targets import _stepwrap
from workflow_agent.targets._lines import MAX_LINE_BYTES, LineSplitter


def split(*chunks: bytes) -> list[str]:
    lines: list[str] = []
    s = LineSplitter(lines.append)
    for c in chunks:
        s.feed(c)
    s.flush()
    return lines


def test_lines_across_chunks_crlf_and_invalid_utf8():
    assert split(b"ab", b"c\r\nd\n\n", b"\xffe") == ["abc", "d", "", "\ufffde"]


def test_an_endless_line_is_cut_without_splitting_a_character():
    data = b"a" * (MAX_LINE_BYTES - 1) + "é".encode() + b"tail\n"
    lines = split(data[:1000], data[1000:])
    assert lines == ["a" * (MAX_LINE_BYTES - 1), "étail"]


def run_wrapper(
    script: str,
    env: dict | None = None,
    kill_after_first_line: bool = False,
    cwd: str | None = None,
    **kw,
):
    marker = _stepwrap.new_marker()
    argv = _stepwrap.wrapper_argv(script, marker, env_from_stdin=env is not None, **kw)
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={"PATH": os.defpath},
        start_new_session=True,
        cwd=cwd,
    )
    if env is not None:
        proc.stdin.write(_stepwrap.env_lines(env, marker))
    proc.stdin.close()
    lines: list[str] = []
    stream = _stepwrap.StepStream(marker, lines.append)
    if kill_after_first_line:
        stream.feed(proc.stdout.readline())
        stream.feed(proc.stdout.readline())
        os.killpg(proc.pid, signal.SIGTERM)
    stream.feed(proc.stdout.read())
    stream.flush()
    proc.wait()
    return stream, lines, proc


def test_wrapper_reports_pid_exit_code_and_merged_output():
    stream, lines, proc = run_wrapper("echo out; echo err >&2; printf unterminated; exit 7")
    assert lines == ["out", "err", "unterminated"]
    assert stream.pid == proc.pid and stream.rc == 7


def test_wrapper_does_not_hand_its_stdin_to_the_step():
    stream, lines, _ = run_wrapper("cat; echo after", env={"A": "1"})
    assert lines == ["after"] and stream.rc == 0


def test_env_from_stdin_keeps_every_byte_of_odd_values():
    odd = 'quote\' "dq" $HOME `x` \\c back\\slash\n\nlast\n'
    env = {"ODD": odd, "EMPTY": "", "UNI": "ünï", "1BAD": "skipped", "BAD-NAME": "skipped"}
    stream, lines, _ = run_wrapper(
        'printf "%s|" "$ODD"; echo; echo "[$EMPTY] $UNI"; env | grep -c BAD || true', env=env
    )
    assert lines == [*odd.split("\n")[:-1], "|", "[] ünï", "0"]
    assert stream.rc == 0


def test_term_to_the_group_ends_the_step_and_the_wrapper_still_reports():
    stream, lines, _ = run_wrapper(
        # "started" once the sleep runs: a TERM that beats its fork would leave it (60 s) behind.
        "trap 'echo cleaning up; exit 5' TERM; sleep 60 & echo started; wait",
        kill_after_first_line=True,
    )
    assert lines == ["started", "cleaning up"]  # no "Terminated" notice from the wrapper
    assert stream.rc == 5


def test_marker_lookalikes_in_step_output_are_plain_output():
    stream, lines, _ = run_wrapper("echo '::workflow-agent-0000000000000000:: rc 0'; exit 1")
    assert lines == ["::workflow-agent-0000000000000000:: rc 0"]
    assert stream.rc == 1


BASH, MISSING_SHELL = "bash", "no-such-shell-wfa"  # the JobDefinition's `shell`


def test_the_step_runs_with_the_job_shell_in_its_working_directory(tmp_path):
    (tmp_path / "src").mkdir()
    script = 'echo "${BASH_VERSION:+bash}"; pwd; [[ -d . ]] && echo double-brackets'
    stream, lines, _ = run_wrapper(script, cwd=str(tmp_path), shell=BASH, workdir="src")
    assert lines == ["bash", str(tmp_path / "src"), "double-brackets"] and stream.rc == 0
    stream, lines, _ = run_wrapper("pwd", cwd=str(tmp_path), workdir=str(tmp_path / "src"))
    assert lines == [str(tmp_path / "src")]  # an absolute working directory


def test_a_missing_shell_or_directory_fails_the_step_with_the_shells_words(tmp_path):
    stream, lines, _ = run_wrapper("echo never", cwd=str(tmp_path), workdir="nope")
    assert stream.rc not in (0, None) and "nope" in " ".join(lines) and "never" not in lines
    stream, lines, _ = run_wrapper("echo never", shell=MISSING_SHELL)
    assert stream.rc == 127 and "no-such-shell-wfa" in " ".join(lines)
