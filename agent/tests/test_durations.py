"""durations: Go's time.ParseDuration and Duration.String(), case tables taken from Go's tests."""

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from workflow_agent import durations

NS, US, MS, S, M, H = 1, 1_000, 1_000_000, 1_000_000_000, 60_000_000_000, 3_600_000_000_000
MIN_NS, MAX_NS = -(1 << 63), (1 << 63) - 1

VALID = [
    ("0", 0),
    ("5s", 5 * S),
    ("30s", 30 * S),
    ("1478s", 1478 * S),
    ("-5s", -5 * S),
    ("+5s", 5 * S),
    ("-0", 0),
    ("+0", 0),
    ("5.0s", 5 * S),
    ("5.6s", 5 * S + 600 * MS),
    ("5.s", 5 * S),
    (".5s", 500 * MS),
    ("1.0s", S),
    ("1.00s", S),
    ("1.004s", S + 4 * MS),
    ("1.0040s", S + 4 * MS),
    ("100.00100s", 100 * S + MS),
    ("10ns", 10 * NS),
    ("11us", 11 * US),
    ("12\u00b5s", 12 * US),  # micro sign
    ("12\u03bcs", 12 * US),  # Greek mu
    ("13ms", 13 * MS),
    ("14s", 14 * S),
    ("15m", 15 * M),
    ("16h", 16 * H),
    ("1.5h", 90 * M),
    ("2h45m30.5s", 2 * H + 45 * M + 30 * S + 500 * MS),
    ("3h30m", 3 * H + 30 * M),
    ("10.5s4m", 4 * M + 10 * S + 500 * MS),
    ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
    ("1h2m3s4ms5us6ns", H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS),
    ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
    ("52763797000ns", 52763797000),
    ("0.3333333333333333333h", 20 * M),  # Go issue 6617: more than 9 fraction digits
    ("9007199254740993ns", (1 << 53) + 1),
    ("9223372036854775807ns", MAX_NS),
    ("9223372036854775.807us", MAX_NS),
    ("9223372036s854ms775us807ns", MAX_NS),
    ("-9223372036854775808ns", MIN_NS),
    ("-9223372036854775.808us", MIN_NS),
    ("-9223372036s854ms775us808ns", MIN_NS),
    ("-2562047h47m16.854775808s", MIN_NS),  # Go issue 48629
    ("0.100000000000000000000h", 6 * M),  # Go issue 15011
    ("0.830103483285477580700h", 49 * M + 48 * S + 372539827),  # leadingFraction overflow
]

INVALID = [
    "",
    "3",
    "-",
    "s",
    ".",
    "-.",
    ".s",
    "+.s",
    "1d",
    "\x85\x85",
    "\xffff",
    "hello \xffff world",
    "9223372036854775808ns",
    "9223372036854775.808us",
    "9223372036854ms775us808ns",
    "-9223372036854775809ns",
    "5 minutes",
    " 5s",
    "5s ",
    "1h 30m",
    "1e3s",
    "0x10s",
    "--5s",
    "5S",
    "1.5.5s",
]

FORMATS = [
    ("0s", 0),
    ("1ns", 1),
    ("1.1\u00b5s", 1100),
    ("2.2ms", 2200 * US),
    ("3.3s", 3300 * MS),
    ("45s", 45 * S),
    ("1m0s", M),
    ("1h30m0s", H + 30 * M),
    ("300ms", 300 * MS),
    ("4m5s", 4 * M + 5 * S),
    ("4m5.001s", 4 * M + 5001 * MS),
    ("5h6m7.001s", 5 * H + 6 * M + 7001 * MS),
    ("8m0.000000001s", 8 * M + 1),
    ("2562047h47m16.854775807s", MAX_NS),
    ("-2562047h47m16.854775808s", MIN_NS),
    ("-1.5s", -1500 * MS),
]


@pytest.mark.parametrize(("text", "ns"), VALID)
def test_parse_ns_matches_go(text, ns):
    assert durations.parse_ns(text) == ns


@pytest.mark.parametrize("text", INVALID)
def test_parse_rejects_what_go_rejects(text):
    with pytest.raises(ValueError):
        durations.parse_ns(text)


def test_error_messages_name_the_problem():
    with pytest.raises(ValueError, match="missing unit"):
        durations.parse("30")
    with pytest.raises(ValueError, match="unknown unit 'd'"):
        durations.parse("1d")
    with pytest.raises(ValueError, match="invalid duration"):
        durations.parse("")


def test_parse_returns_timedelta_truncating_below_a_microsecond():
    assert durations.parse("1h30m") == timedelta(hours=1, minutes=30)
    assert durations.parse("1.5h") == timedelta(minutes=90)
    assert durations.parse("1500ns") == timedelta(microseconds=1)
    assert durations.parse("-1500ns") == timedelta(microseconds=-1)
    assert durations.parse("999ns") == timedelta(0)
    assert durations.parse("0") == timedelta(0)


@pytest.mark.parametrize(("text", "ns"), FORMATS)
def test_format_ns_matches_go(text, ns):
    assert durations.format_ns(ns) == text


@pytest.mark.parametrize(
    ("td", "text"),
    [
        (timedelta(seconds=45), "45s"),
        (timedelta(minutes=1), "1m0s"),
        (timedelta(hours=1, minutes=30), "1h30m0s"),
        (timedelta(milliseconds=300), "300ms"),
        (timedelta(0), "0s"),
        (timedelta(days=2), "48h0m0s"),
        (timedelta(microseconds=1500), "1.5ms"),
        (timedelta(seconds=-90), "-1m30s"),
    ],
)
def test_format_timedelta(td, text):
    assert durations.format(td) == text


@pytest.mark.parametrize(("text", "ns"), VALID)
def test_format_then_parse_round_trips(text, ns):
    assert durations.parse_ns(durations.format_ns(ns)) == ns


@given(st.integers(min_value=MIN_NS, max_value=MAX_NS))
def test_round_trip_any_int64(ns):
    assert durations.parse_ns(durations.format_ns(ns)) == ns


@given(st.timedeltas(min_value=timedelta(days=-100_000), max_value=timedelta(days=100_000)))
def test_round_trip_any_timedelta(td):
    assert durations.parse(durations.format(td)) == td


@given(st.text(alphabet="0123456789.+-nsuµμmh dx\u00b5", max_size=30) | st.text(max_size=30))
def test_parser_raises_only_value_error(text):
    try:
        result = durations.parse(text)
    except ValueError:
        return
    assert isinstance(result, timedelta)
