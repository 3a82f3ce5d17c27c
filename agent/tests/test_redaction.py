"""redaction: secret values never reach a shipped log line or the agent's own log."""

import io
import json
import logging

import pytest
from workflow_agent.logsetup import JsonFormatter, TextFormatter
from workflow_agent.redaction import MASK, Redactor


@pytest.fixture(autouse=True)
def restore_logging():
    """logsetup.setup configures the root logger; give the next test the one it had."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_every_occurrence_is_masked():
    r = Redactor(["s3cr3t"])
    assert r("a s3cr3t and s3cr3ts3cr3t") == f"a {MASK} and {MASK}{MASK}"


def test_longest_secret_wins():
    r = Redactor(["abcd", "abcdefgh"])
    assert r("xabcdefghx abcd") == f"x{MASK}x {MASK}"


def test_multi_line_secrets_are_masked_line_by_line():
    r = Redactor(["-----BEGIN KEY-----\nMIIEvQIBADANBg\n-----END KEY-----"])
    assert r("MIIEvQIBADANBg") == MASK


def test_short_values_are_not_treated_as_secrets():
    r = Redactor(["abc", "", "   ", None])
    assert r("abc def") == "abc def"


def test_add_and_remove_are_counted():
    r = Redactor()
    r.add(["job-secret"])
    r.add(["job-secret"])  # a second job with the same value
    r.remove(["job-secret"])
    assert r("job-secret") == MASK
    r.remove(["job-secret"])
    assert r("job-secret") == "job-secret"


def _record(msg, *args, exc=None, **extra):
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, msg, args, exc)
    for k, v in extra.items():
        setattr(record, k, v)
    return record


def test_text_log_lines_are_masked_and_carry_ids():
    r = Redactor(["pul-TOKEN123"])
    try:
        raise ValueError("bad pul-TOKEN123")
    except ValueError:
        import sys

        exc = sys.exc_info()
    line = TextFormatter(r).format(_record("auth %s", "pul-TOKEN123", exc=exc, job="j1", run="r1"))
    assert "pul-TOKEN123" not in line
    assert " job=j1 run=r1: auth [secret]" in line.splitlines()[0]
    assert "ValueError: bad [secret]" in line


def test_json_log_lines_are_masked():
    r = Redactor(["pul-TOKEN123"])
    doc = json.loads(JsonFormatter(r).format(_record("t=%s", "pul-TOKEN123", job="j")))
    assert doc["msg"] == f"t={MASK}" and doc["job"] == "j" and doc["level"] == "error"


SERVER_TEXT = "\x1b[2J\x1b[31mred\x00alert\x07 step\nforged: line\u2028\x7f"


def test_text_log_lines_escape_what_a_terminal_would_obey():
    """Server text (error bodies, step names) in a log line: one printable line."""
    r = Redactor(["multi\nline-secret"])
    line = TextFormatter(r).format(_record("poll failed: %s %s", SERVER_TEXT, "multi\nline-secret"))
    assert line.isprintable() and "\n" not in line
    assert line.endswith(
        "poll failed: \\x1b[2J\\x1b[31mred\\x00alert\\x07 step\\nforged: line\\u2028\\x7f "
        f"{MASK}"  # redacted before escaping: the secret's newline still matches
    )


def test_text_log_tracebacks_keep_their_lines_but_escape_each():
    try:
        raise ValueError(SERVER_TEXT)
    except ValueError:
        import sys

        exc = sys.exc_info()
    text = TextFormatter(Redactor()).format(_record("boom", exc=exc))
    lines = text.split("\n")
    assert lines[1] == "Traceback (most recent call last):"
    assert all(line.isprintable() for line in lines)
    assert "ValueError: \\x1b[2J" in text


def test_json_log_lines_stay_json_and_printable():
    doc = json.loads(JsonFormatter(Redactor()).format(_record("name %s", SERVER_TEXT, job="j\x1b")))
    assert doc["msg"].startswith("name \\x1b[2J\\x1b[31mred\\x00alert")
    assert doc["msg"].isprintable() and doc["job"] == "j\\x1b"


def test_logsetup_routes_to_stderr(monkeypatch):
    from workflow_agent import logsetup

    buf = io.StringIO()
    monkeypatch.setattr("sys.stderr", buf)
    warnings = logsetup.setup(
        level="warning", fmt="json", use_syslog=False, redactor=Redactor(["pul-X1234"])
    )
    logging.getLogger("workflow_agent.t").info("hidden")
    logging.getLogger("workflow_agent.t").warning("tok pul-X1234")
    assert warnings == []
    lines = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert [d["msg"] for d in lines] == [f"tok {MASK}"]


def test_syslog_gets_masked_lines(monkeypatch, tmp_path):
    """A real unix datagram socket stands in for the syslog daemon."""
    import socket

    from workflow_agent import logsetup

    path = tmp_path / "log.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(path))
    server.settimeout(30)
    monkeypatch.setattr(logsetup, "SYSLOG_SOCKETS", (str(path),))
    try:
        warnings = logsetup.setup(
            level="info", fmt="text", use_syslog=True, redactor=Redactor(["pul-SYS123"])
        )
        logging.getLogger("workflow_agent.t").info("hello pul-SYS123")
        data = server.recv(4096).decode()
    finally:
        server.close()
    assert warnings == []
    assert data.startswith("<14>workflow-agent[")  # facility user, priority info
    assert data.rstrip("\x00").endswith(f": info MainThread: hello {MASK}")


def test_syslog_without_a_socket_falls_back_to_stderr(monkeypatch, tmp_path):
    from workflow_agent import logsetup

    monkeypatch.setattr(logsetup, "SYSLOG_SOCKETS", (str(tmp_path / "none"),))
    warnings = logsetup.setup(level="info", fmt="text", use_syslog=True, redactor=Redactor())
    handler = logging.getLogger().handlers[0]
    assert warnings == ["syslog: true but no syslog socket found; logging to stderr"]
    assert isinstance(handler, logging.StreamHandler)
