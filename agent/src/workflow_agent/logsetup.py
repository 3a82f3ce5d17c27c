"""Logging: stderr (text or JSON lines) or syslog; secrets masked in every line.

Messages carry text the service sent (error bodies, step names): control and other
non-printable characters are escaped (`\x1b`, `\n`), so a hostile or broken server can neither
drive an operator's terminal nor forge log lines.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time

from workflow_agent.redaction import Redactor

SYSLOG_SOCKETS = ("/dev/log", "/var/run/syslog")  # Linux, macOS


def printable(text: str) -> str:
    """`text` with every non-printable character escaped as Python would write it."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _context(record: logging.LogRecord) -> dict[str, str]:
    out = {}
    for key in ("job", "run"):
        value = getattr(record, key, None)
        if value:
            out[key] = printable(str(value))
    return out


def _traceback(text: str) -> str:
    return "\n".join(printable(line) for line in text.split("\n"))


class TextFormatter(logging.Formatter):
    def __init__(self, redactor: Redactor, with_time: bool = True) -> None:
        super().__init__()
        self.redactor = redactor
        self.with_time = with_time

    def format(self, record: logging.LogRecord) -> str:
        ctx = " ".join(f"{k}={v}" for k, v in _context(record).items())
        parts = [record.levelname.lower(), record.threadName or ""]
        if self.with_time:
            parts.insert(0, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created)))
        head = " ".join(p for p in parts if p)
        # Redact before escaping: a secret with a newline or tab must still match.
        line = printable(self.redactor(f"{head}{' ' + ctx if ctx else ''}: {record.getMessage()}"))
        if record.exc_info:
            line += "\n" + _traceback(self.redactor(self.formatException(record.exc_info)))
        return line


class JsonFormatter(logging.Formatter):
    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created)),
            "level": record.levelname.lower(),
            "thread": record.threadName,
            "logger": record.name,
            **_context(record),
            "msg": printable(self.redactor(record.getMessage())),
        }
        if record.exc_info:
            doc["exc"] = _traceback(self.redactor(self.formatException(record.exc_info)))
        return json.dumps(doc)


def setup(*, level: str, fmt: str, use_syslog: bool, redactor: Redactor) -> list[str]:
    """Configure the root logger. Returns warnings to log once logging works."""
    warnings: list[str] = []
    handler: logging.Handler | None = None
    if use_syslog:
        address = next((p for p in SYSLOG_SOCKETS if os.path.exists(p)), None)
        if address is None:
            warnings.append("syslog: true but no syslog socket found; logging to stderr")
        else:
            try:
                # Imported here only: it costs an agent that logs to stderr 0.5 MB.
                from logging.handlers import SysLogHandler

                handler = SysLogHandler(address=address)
                handler.ident = f"workflow-agent[{os.getpid()}]: "
            except OSError as exc:
                warnings.append(f"syslog: cannot connect to {address}: {exc}; logging to stderr")
                handler = None
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
        with_time = True
    else:
        with_time = False  # syslog stamps its own time
    handler.setFormatter(
        JsonFormatter(redactor) if fmt == "json" else TextFormatter(redactor, with_time)
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # httpx logs every request with its URL at INFO; the agent logs what matters itself.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
    return warnings
