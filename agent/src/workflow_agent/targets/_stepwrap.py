"""The /bin/sh step wrapper the docker and kubernetes targets exec into the job container.

Only /bin/sh may be assumed in a job image, so everything here is POSIX sh run with `sh -c`:

    <marker> pid <n>     first line: the wrapper's pid. `docker exec` and CRI exec (runc) make
                         the exec'd process a session and process-group leader, so <n> is also
                         the step's process group: a second exec `kill -s TERM -- -<n>` reaches
                         the step and everything it started (that did not start its own session).
    ...step output...    stdout and stderr merged, so their order is kept.
    <marker> rc <code>   last: the step's exit code, possibly glued to an unterminated last line.

The step runs as `<shell> -c <script>` (the JobDefinition's `shell`, default /bin/sh) in its
working directory (relative to the exec's): a `cd` that fails or a shell that is not there ends
the step with the shell's own message in its output and a non-zero exit code.

Before the step, `runtime_prelude` gives it the job runtime (docs/protocol.md, "Job runtime"):
the NAME=value lines earlier steps appended to the file `$PULUMI_ENV` names, and, where the OIDC
token is a file, PULUMI_OIDC_TOKEN read from it (so the token is never in the container's config
or a pod spec). A line of that file that is not NAME=value fails the step with exit code 2 and
one line saying which line (not what it holds: it may be a secret).

The marker holds a random nonce per step, so step output cannot be taken for it by accident.
With `env_from_stdin`, the wrapper first reads `export` lines from stdin up to the marker; the
kubernetes target uses this so secrets never sit in the pod spec.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from workflow_agent.targets._lines import LineSplitter

_READ_ENV = (
    # One variable per line, from env_lines(); the marker line ends the block.
    'while IFS= read -r __wfa_l; do [ "$__wfa_l" = "$2" ] && break; eval "$__wfa_l"; done; '
    "unset __wfa_l; "
)
# POSIX sh. Values are taken as written after the first "=", less one pair of matching outer
# quotes (as dotenv files are read) [ASSUMED]; blank lines and # comments are skipped.
_LOAD_PULUMI_ENV = (
    'if [ -s "${PULUMI_ENV:-}" ]; then '
    'echo "[workflow-agent] Loading PULUMI_ENV from $PULUMI_ENV"; __wfa_n=0; '
    'while IFS= read -r __wfa_l || [ -n "$__wfa_l" ]; do __wfa_n=$((__wfa_n + 1)); '
    'case $__wfa_l in ""|"#"*) continue ;; esac; '
    "__wfa_k=${__wfa_l%%=*}; case $__wfa_l in *=*) ;; *) __wfa_k= ;; esac; "
    'case $__wfa_k in ""|[0-9]*|*[!A-Za-z0-9_]*) '
    'echo "[workflow-agent] error: $PULUMI_ENV line $__wfa_n is not NAME=value (the line is not '
    'shown: it may hold a secret)"; exit 2 ;; esac; '
    "__wfa_v=${__wfa_l#*=}; "
    "case $__wfa_v in \\\"*\\\"|\\'*\\') __wfa_v=${__wfa_v#?}; __wfa_v=${__wfa_v%?} ;; esac; "
    'export "$__wfa_k=$__wfa_v"; '
    'done < "$PULUMI_ENV"; unset __wfa_n __wfa_l __wfa_k __wfa_v; fi; '
)


def runtime_prelude(oidc_file: str = "") -> str:
    """sh run before each step: PULUMI_ENV's variables, and PULUMI_OIDC_TOKEN from `oidc_file`."""
    text = _LOAD_PULUMI_ENV
    if oidc_file:
        text += (
            f"if [ -r {oidc_file} ]; then PULUMI_OIDC_TOKEN=$(cat {oidc_file}); "
            "export PULUMI_OIDC_TOKEN; fi; "
        )
    return text


_RUN = (
    # `trap : TERM`: the wrapper outlives a TERM to the group and reports how the step ended
    # (a handler, unlike an ignored signal, is reset for the step). A dying exec whose output
    # is still held by the step's children stalls the engine's other execs for seconds.
    # fd 3 is the exec's output; the wrapper's own fds 1 and 2 go to /dev/null, because dash
    # prints notices such as "Terminated" there, and they are not step output. The subshell
    # keeps the step's redirections out of the wrapper (dash prints the notice while a simple
    # command's redirections are in effect); it execs the step's shell, so no extra process.
    'trap : TERM; exec 3>&1 >/dev/null 2>&1 </dev/null; printf "%s pid %s\\n" "$2" "$$" >&3; '
    '(@PRELUDE@ cd -- "$4" && exec "$3" -c "$1") >&3 2>&3 3>&-; printf "%s rc %s\\n" "$2" "$?" >&3'
)
KILL_SCRIPT = (
    # $1 signal, $2 process group. Exit 0 when the group existed.
    'kill -s "$1" -- "-$2" 2>/dev/null'
)
ALIVE_SCRIPT = 'kill -s 0 -- "-$1" 2>/dev/null'


def new_marker() -> str:
    return f"::workflow-agent-{secrets.token_hex(8)}::"


def wrapper_argv(
    script: str,
    marker: str,
    *,
    env_from_stdin: bool = False,
    shell: str = "/bin/sh",
    workdir: str = "",
    prelude: str = "",
) -> list[str]:
    body = (_READ_ENV if env_from_stdin else "") + _RUN.replace("@PRELUDE@", prelude)
    return ["/bin/sh", "-c", body, "workflow-step", script, marker, shell, workdir or "."]


def kill_argv(pgid: int, sig: str) -> list[str]:
    return ["/bin/sh", "-c", KILL_SCRIPT, "workflow-kill", sig, str(pgid)]


def alive_argv(pgid: int) -> list[str]:
    return ["/bin/sh", "-c", ALIVE_SCRIPT, "workflow-alive", str(pgid)]


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def env_lines(env: dict[str, str], marker: str) -> bytes:
    """The stdin block for `env_from_stdin`: one line per variable, then the marker.

    Values may hold newlines, quotes and backslashes: each value travels as a printf %b format
    argument on one line (backslashes doubled, newlines as \\n), and an `x` appended and stripped
    again keeps trailing newlines that $(...) would eat.
    """
    out = []
    for name, value in env.items():
        if not name or not all(c.isalnum() or c == "_" for c in name) or name[0].isdigit():
            continue  # not a shell variable name; docker and kubernetes would refuse it too
        encoded = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        out.append(
            f'__wfa_v=$(printf "%bx" {_sh_quote(encoded)}); export {name}="${{__wfa_v%x}}"; '
            "unset __wfa_v"
        )
    out.append(marker)
    return ("\n".join(out) + "\n").encode()


class StepStream:
    """Parses the wrapper's output: lines go to on_line, the markers set `pid` and `rc`."""

    def __init__(self, marker: str, on_line: Callable[[str], None]) -> None:
        self._marker = marker
        self._on_line = on_line
        self._lines = LineSplitter(self._line)
        self.pid: int | None = None
        self.rc: int | None = None

    def feed(self, data: bytes) -> None:
        self._lines.feed(data)

    def flush(self) -> None:
        self._lines.flush()

    def _line(self, text: str) -> None:
        at = text.find(self._marker)
        if at < 0:
            self._on_line(text)
            return
        if at > 0:  # the step's last line had no newline
            self._on_line(text[:at])
        fields = text[at + len(self._marker) :].split()
        if len(fields) == 2 and fields[1].lstrip("-").isdigit():
            if fields[0] == "pid":
                self.pid = int(fields[1])
            elif fields[0] == "rc":
                self.rc = int(fields[1])
