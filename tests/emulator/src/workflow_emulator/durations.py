"""Go duration strings ("1h0m0s", "90s", "2.5m") <-> seconds."""

import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse(text: str) -> float:
    """Seconds in a Go duration string; ValueError with the offending text otherwise."""
    s = text.strip()
    if s in ("0", "-0", "+0"):
        return 0.0
    sign = -1.0 if s.startswith("-") else 1.0
    body = s.lstrip("+-")
    pos, total = 0, 0.0
    while pos < len(body):
        m = _PART.match(body, pos)
        if not m:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not body or pos != len(body):
        raise ValueError(f"not a duration: {text!r} (expected e.g. 90s, 10m, 1h30m)")
    return sign * total


def to_go(seconds: float) -> str:
    """Go's Duration.String for whole-millisecond values: 3600 -> '1h0m0s', 1.5 -> '1.5s'."""
    ms = round(seconds * 1000)
    sign = "-" if ms < 0 else ""
    ms = abs(ms)
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{sign}{ms}ms"
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s = f"{rem / 1000:.3f}".rstrip("0").rstrip(".")
    if h:
        return f"{sign}{h}h{m}m{s}s"
    if m:
        return f"{sign}{m}m{s}s"
    return f"{sign}{s}s"
