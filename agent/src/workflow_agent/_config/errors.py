"""`ConfigError` and the helpers that keep every config message on one line, secret-free."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic_core import PydanticCustomError

_SECRET_PATTERN = re.compile(r"pul-[A-Za-z0-9_-]+")


class ConfigError(Exception):
    """A configuration problem; str() is one line and never contains a secret."""

    def __init__(self, source: str, key: str | None, reason: str) -> None:
        self.source = source
        self.key = key
        self.reason = _one_line(reason)
        where = _printable(source, limit=None)  # a path is never shortened: it says where to look
        text = f"{where}: {_printable(key)}: {self.reason}" if key else f"{where}: {self.reason}"
        super().__init__(text)


def _one_line(text: str) -> str:
    # Belt and braces: a pool token must never reach a log line, even via a YAML parser message.
    return _SECRET_PATTERN.sub("pul-***", " ".join(str(text).split()))


def _printable(text: str, limit: int | None = 80) -> str:
    """Names (keys, paths) as given, or JSON-quoted when they would break the one-line form.

    Keys longer than `limit` are shortened; file paths (limit=None) never are.
    """
    if text.isprintable() and text.strip() == text and text:
        return text if limit is None or len(text) <= limit else show(text)
    return json.dumps(text, ensure_ascii=False) if limit is None else show(text)


def show(value: Any) -> str:
    """A short, quoted rendering of a user's (non-secret) value for an error message."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def fail(reason: str, key: str | None = None) -> PydanticCustomError:
    """A validation error whose text is `reason` (ConfigError's), optionally for another key."""
    ctx = {"reason": reason} if key is None else {"key": key, "reason": reason}
    return PydanticCustomError("config", "{reason}", ctx)
