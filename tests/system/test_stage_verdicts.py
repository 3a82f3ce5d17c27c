"""The stage runner (scripts/stage.sh + scripts/verdict.py) on real pytest runs: a stage fails
when a suite it requires collects nothing or skips every case, even though pytest exits 0, and
lists the skips that remain with their reasons."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PASSING = "def test_one():\n    assert 1 + 1 == 2\n\ndef test_two():\n    assert 'a' < 'b'\n"
# What a cluster that does not answer does to every cluster case.
ALL_SKIPPED = textwrap.dedent(
    """
    import pytest

    @pytest.fixture
    def cluster():
        pytest.skip("cluster of /tmp/kubeconfig is not up: timed out")

    def test_one(cluster):
        pass

    def test_two(cluster):
        pass
    """
)
EMPTIED = "# every test of this suite was removed\n"
REQUIRE = ["--require", "run.xml::alpha", "--require", "run.xml::beta/test_b.py"]


def pytest_run(tmp_path) -> str:
    report = tmp_path / "state/junit/run.xml"
    return f"cd {tmp_path} && {sys.executable} -m pytest -q --junitxml={report} alpha beta"


def stage(tmp_path, files: dict[str, str], require=REQUIRE, command=None):
    """Run stage.sh on a pytest run over `files` (two suites, alpha/ and beta/); return
    (exit code, terminal output, $STATE/summary)."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    state = tmp_path / "state"
    command = command or pytest_run(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "VERBOSE", "PYTEST_ADDOPTS")}
    env["WORKFLOW_AGENT_STATE"] = str(state)
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts/stage.sh"), "demo", *require, "--", command],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    summary = (state / "summary").read_text() if (state / "summary").exists() else ""
    return proc.returncode, proc.stdout + proc.stderr, summary


def test_both_suites_ran_is_a_pass(tmp_path):
    rc, out, summary = stage(tmp_path, {"alpha/test_a.py": PASSING, "beta/test_b.py": PASSING})
    assert rc == 0, out
    assert summary.startswith("demo      PASS in ") and "4 passed" in summary, summary
    assert summary.count("\n") == 1, summary  # nothing to list: no failed suite, no skip


@pytest.mark.parametrize(
    ("beta", "why"),
    [(EMPTIED, "collected nothing"), (ALL_SKIPPED, "all 2 cases skipped")],
    ids=["emptied", "all-skipped"],
)
def test_a_required_suite_that_ran_nothing_fails_the_stage(tmp_path, beta, why):
    rc, out, summary = stage(tmp_path, {"alpha/test_a.py": PASSING, "beta/test_b.py": beta})
    # pytest itself is content: alpha passed, so it exits 0.
    log = (tmp_path / "state/logs/demo.log").read_text()
    assert "2 passed" in log, log
    assert rc == 1, out
    lines = summary.splitlines()
    assert lines[0].startswith("demo      FAIL in "), summary
    assert f"  suite run.xml::beta/test_b.py: FAIL: {why}" in lines, summary
    assert "  suite run.xml::alpha: ok: 2 passed" not in summary  # the summary keeps failures


def test_skips_that_remain_are_listed_with_their_reasons(tmp_path):
    partly = (
        PASSING
        + "\nimport pytest\n\n@pytest.mark.skip(reason='needs a GPU')\ndef test_gpu():\n    pass\n"
    )
    rc, out, summary = stage(tmp_path, {"alpha/test_a.py": PASSING, "beta/test_b.py": partly})
    assert rc == 0, out
    assert summary.splitlines()[0].startswith("demo      PASS in "), summary
    assert "  skipped 1 in beta.test_b (test_gpu): needs a GPU" in summary.splitlines(), summary


def test_failed_cases_are_named_with_their_message(tmp_path):
    failing = PASSING + "\ndef test_bad():\n    assert 'disk' == 'full'\n"
    rc, out, summary = stage(tmp_path, {"alpha/test_a.py": PASSING, "beta/test_b.py": failing})
    assert rc == 1, out
    lines = summary.splitlines()
    assert "  suite run.xml::beta/test_b.py: FAIL: 2 passed, 1 failed" in lines, summary
    failed = [x for x in lines if x.startswith("  failed ")]
    assert len(failed) == 1, summary
    expected = "  failed beta.test_b::test_bad: AssertionError: assert 'disk' == 'full'"
    assert failed[0].startswith(expected), summary


def test_a_report_of_an_earlier_run_does_not_count(tmp_path):
    rc, _, _ = stage(tmp_path, {"alpha/test_a.py": PASSING, "beta/test_b.py": PASSING})
    assert rc == 0
    rc, out, summary = stage(tmp_path, {}, command="true")  # this run writes no report
    assert rc == 1, out
    assert "  suite run.xml::alpha: FAIL: no report run.xml" in summary.splitlines(), summary


def test_a_failing_command_fails_whatever_its_suites_say(tmp_path):
    rc, out, summary = stage(
        tmp_path,
        {"alpha/test_a.py": PASSING, "beta/test_b.py": PASSING},
        command=pytest_run(tmp_path) + "; exit 3",
    )
    assert rc == 3, out
    assert summary.startswith("demo      FAIL in "), summary


def test_record_turns_a_runner_without_reports_into_one_case(tmp_path):
    script = ROOT / "scripts/verdict.py"
    report = tmp_path / "junit/molecule-kind.xml"
    for command, expected in (("true", "1 passed, 0 failed"), ("false", "0 passed, 1 failed")):
        rc = subprocess.call(
            [sys.executable, script, "record", report, "molecule kind", "--", "bash", "-c", command]
        )
        assert rc == (0 if command == "true" else 1)
        total = subprocess.run(
            [sys.executable, ROOT / "scripts/junit_total.py", tmp_path / "junit"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert total == f"tests: {expected}, 0 skipped\n"


@pytest.mark.parametrize("spec", ["/etc/passwd", "../x.xml", "::alpha"])
def test_a_bad_suite_is_named_and_exits_2(tmp_path, spec):
    proc = subprocess.run(
        [sys.executable, ROOT / "scripts/verdict.py", "check", tmp_path, spec],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert (
        proc.stderr
        == f"verdict.py: bad suite {spec!r}: REPORT must be a file under the JUnit directory\n"
    )
