"""Go duration strings (`time.ParseDuration` / `Duration.String()`), as the reference uses them.

Python's timedelta has microsecond resolution, so `parse` truncates sub-microsecond parts
toward zero; `parse_ns` and `format_ns` keep Go's nanosecond precision.
"""

from __future__ import annotations

from datetime import timedelta

__all__ = ["format", "format_ns", "parse", "parse_ns"]

_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_MAX = (1 << 63) - 1  # Go's Duration is an int64 of nanoseconds


def _digits(s: str, i: int) -> int:
    while i < len(s) and "0" <= s[i] <= "9":
        i += 1
    return i


def _leading_fraction(digits: str) -> tuple[int, float]:
    """Go's leadingFraction: digits past int64 precision are consumed but ignored."""
    x, scale = 0, 1.0
    for c in digits:
        if x > _MAX // 10:
            break
        y = x * 10 + int(c)
        if y > 1 << 63:
            break
        x, scale = y, scale * 10
    return x, scale


def parse_ns(text: str) -> int:
    """Parse a Go duration string into nanoseconds; ValueError on anything Go would reject."""
    if not isinstance(text, str):
        raise ValueError(f"invalid duration {text!r}")
    orig, s = text, text
    neg = False
    if s and s[0] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError(f"invalid duration {orig!r}")
    total = 0
    i = 0
    while i < len(s):
        if not (s[i] == "." or "0" <= s[i] <= "9"):
            raise ValueError(f"invalid duration {orig!r}")
        j = _digits(s, i)
        whole = s[i:j]
        frac = ""
        if j < len(s) and s[j] == ".":
            k = _digits(s, j + 1)
            frac = s[j + 1 : k]
            j = k
        if not whole and not frac:
            raise ValueError(f"invalid duration {orig!r}")
        k = j
        while k < len(s) and not (s[k] == "." or "0" <= s[k] <= "9"):
            k += 1
        if k == j:
            raise ValueError(f"missing unit in duration {orig!r}")
        unit = _UNITS.get(s[j:k])
        if unit is None:
            raise ValueError(f"unknown unit {s[j:k]!r} in duration {orig!r}")
        value = int(whole or "0")
        if value > (1 << 63) // unit:
            raise ValueError(f"invalid duration {orig!r}")
        value *= unit
        f, scale = _leading_fraction(frac)
        if f:
            # The float64 arithmetic is Go's; exact math differs in the last ns of long fractions.
            value += int(float(f) * (float(unit) / scale))
        total += value
        if total > 1 << 63:
            raise ValueError(f"invalid duration {orig!r}")
        i = k
    if neg:
        return -total
    if total > _MAX:
        raise ValueError(f"invalid duration {orig!r}")
    return total


def parse(text: str) -> timedelta:
    """Parse a Go duration string into a timedelta (sub-microsecond parts truncated)."""
    ns = parse_ns(text)
    micros = abs(ns) // 1000
    return timedelta(microseconds=-micros if ns < 0 else micros)


def _frac(v: int, prec: int) -> tuple[str, int]:
    """Go's fmtFrac: the fraction v/10**prec without trailing zeros, and the integer part."""
    digits = ""
    printed = False
    for _digit in range(prec):
        d = v % 10
        printed = printed or d != 0
        if printed:
            digits = str(d) + digits
        v //= 10
    return ("." + digits if printed else ""), v


def format_ns(ns: int) -> str:
    """Go's Duration.String() for a nanosecond count: 1h30m0s, 1m0s, 45s, 300ms, 1.5µs, 0s."""
    u = abs(ns)
    sign = "-" if ns < 0 else ""
    if u == 0:
        return "0s"
    if u < 1_000_000_000:
        if u < 1_000:
            return f"{sign}{u}ns"
        if u < 1_000_000:
            frac, whole = _frac(u, 3)
            return f"{sign}{whole}{frac}µs"
        frac, whole = _frac(u, 6)
        return f"{sign}{whole}{frac}ms"
    frac, secs = _frac(u, 9)
    out = f"{secs % 60}{frac}s"
    mins = secs // 60
    if mins:
        out = f"{mins % 60}m{out}"
        hours = mins // 60
        if hours:
            out = f"{hours}h{out}"
    return sign + out


def format(td: timedelta) -> str:  # shadows the builtin on purpose: the contract names it
    """Go's Duration.String() for a timedelta."""
    ns = ((td.days * 86400 + td.seconds) * 1_000_000 + td.microseconds) * 1000
    return format_ns(ns)
