"""Field types of the config model: each is its Python type plus the one validator that reads
a file value or an environment string into it, with a one-line reason when it cannot.

A field's type is declared once, in the model, with one of these (`Annotated` validators).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

from workflow_agent import durations
from workflow_agent._config.errors import fail, show, type_name

DURATION_EXAMPLES = "(examples: 30s, 1m, 1h30m)"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# --- value coercion shared by file values and env-var strings -----------------------------


def parse_bool(value: Any) -> bool:
    """Go's strconv.ParseBool, plus real YAML booleans."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value in ("1", "t", "T", "TRUE", "true", "True"):
            return True
        if value in ("0", "f", "F", "FALSE", "false", "False"):
            return False
    raise fail(f"{show(value)} is not a boolean (use true or false)")


def parse_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]+", value):
        return int(value)
    raise fail(f"{show(value)} is not a whole number")


def parse_duration(value: Any, *, bare_seconds: bool = False) -> timedelta:
    """A Go duration; with `bare_seconds`, also a whole number of seconds (upstream's older
    docs spell token_expiration "the expiration in seconds")."""
    if isinstance(value, timedelta):
        return value
    whole = isinstance(value, int) and not isinstance(value, bool)
    if bare_seconds and (
        whole or (isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value))
    ):
        return timedelta(seconds=int(value))
    if isinstance(value, int) and not isinstance(value, bool):
        if value == 0:
            return timedelta(0)
        raise fail(f"{value} is not a duration: add a unit {DURATION_EXAMPLES}")
    if isinstance(value, str):
        try:
            return durations.parse(value)
        except ValueError:
            pass
    raise fail(f"{show(value)} is not a duration {DURATION_EXAMPLES}")


def parse_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise fail(f"expected a string, got {type_name(value)}")


def choice(value: Any, choices: tuple[str, ...], what: str) -> str:
    if isinstance(value, str) and value in choices:
        return value
    hint = ""
    if isinstance(value, str):
        import difflib  # error paths only

        close = difflib.get_close_matches(value, choices, n=1)
        hint = f'; did you mean "{close[0]}"?' if close else ""
    raise fail(f"{show(value)} is not {what} (valid: {', '.join(choices)}){hint}")


# --- field types ------------------------------------------------------------------------------


def _duration(*, positive: bool = False, optional: bool = False, bare_seconds: bool = False):
    def check(v: Any) -> timedelta | None:
        if v == "" and optional:
            return None  # the reference's "" means "not set"
        td = parse_duration(v, bare_seconds=bare_seconds)
        if td < timedelta(0):
            raise fail(f"{show(v)} is negative; use a positive duration")
        if td == timedelta(0) and positive:
            raise fail(f"{show(v)} must be longer than 0s {DURATION_EXAMPLES}")
        return td

    return BeforeValidator(check)


Duration = Annotated[timedelta, _duration()]  # 0s allowed
PositiveDuration = Annotated[timedelta, _duration(positive=True)]
# Unset (None, or "" in a file) or positive.
OptionalDuration = Annotated[timedelta | None, _duration(positive=True, optional=True)]
# token_expiration: upstream's older docs give it as a bare number of seconds.
Expiration = Annotated[timedelta | None, _duration(positive=True, optional=True, bare_seconds=True)]

Flag = Annotated[bool, BeforeValidator(parse_bool)]
Text = Annotated[str, BeforeValidator(parse_str)]


def _id(v: Any) -> str:
    # Unquoted numeric IDs arrive from YAML as ints.
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return parse_str(v)


Id = Annotated[str, BeforeValidator(_id)]


def Count(low: int, high: int):  # noqa: N802 - a type
    """A whole number in low..high."""

    def check(v: Any) -> int:
        n = parse_int(v)
        if not low <= n <= high:
            raise fail(f"{n} is out of range ({low}..{high})")
        return n

    return Annotated[int, BeforeValidator(check)]


def OneOf(choices: tuple[str, ...], what: str):  # noqa: N802 - a type
    """One of `choices` (a near miss gets a "did you mean")."""
    return Annotated[Literal[choices], BeforeValidator(lambda v: choice(v, choices, what))]


def _env_names(v: Any) -> list[str]:
    if not isinstance(v, list):
        raise fail(f"expected a list of environment variable names, got {type_name(v)}")
    for item in v:
        if not isinstance(item, str) or not _ENV_NAME.fullmatch(item):
            raise fail(f"{show(item)} is not an environment variable name")
    return list(v)


EnvNames = Annotated[list[str], BeforeValidator(_env_names)]


def _ids(v: Any) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise fail(f"expected a list of ids, got {show(v)}")
    return v


Ids = Annotated[list[str], BeforeValidator(_ids)]


def _url(v: Any) -> str:
    url = parse_str(v).strip().rstrip("/")
    if not re.fullmatch(r"https?://[^/\s?#]+(/\S*)?", url):
        raise fail(f"{show(v)} is not an http(s) URL (example: https://api.pulumi.com)")
    return url


Url = Annotated[str, BeforeValidator(_url)]
