"""Fuzz the config loader and the duration parser: no exception but the documented ones.

agent/tests fuzzes `validate_mapping` with arbitrary mappings and `durations.parse` with short
random text. This goes further: whole YAML documents and PULUMI_AGENT_* environments through
`load_config` (files, discovery, the env overlay), values shaped like the ones each key takes,
tokens that must never be echoed, and duration strings built from Go's grammar (huge numbers,
fractions, every unit, near-misses).
"""

from __future__ import annotations

import collections
import tempfile
from datetime import timedelta
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from workflow_agent import durations
from workflow_agent.config import ALL_KEYS, ConfigError, LoadedConfig, env_var, load_config

seen: collections.Counter = collections.Counter()
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
UNITS = ["ns", "us", "µs", "μs", "ms", "s", "m", "h", "", "d", "S", "sec", "mss", " s"]

numbers = st.one_of(
    st.integers(min_value=0, max_value=10**30).map(str),
    st.tuples(st.integers(0, 10**6), st.integers(0, 10**25)).map(lambda t: f"{t[0]}.{t[1]}"),
    st.integers(0, 10**6).map(lambda n: f".{n}"),
    st.integers(0, 10**6).map(lambda n: f"{n}."),
    st.just("."),
    st.just(""),
)
go_durations = st.builds(
    lambda sign, parts: sign + "".join(parts),
    st.sampled_from(["", "-", "+", "--"]),
    st.lists(st.builds(lambda n, u: n + u, numbers, st.sampled_from(UNITS)), max_size=5),
)
near_values = st.one_of(
    go_durations,
    st.sampled_from(["true", "false", "yes", "no", "on", "1", "0", "t", "F", "null", "~", ""]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=30),
    st.lists(st.text(max_size=8), max_size=4),
    st.sampled_from(["docker", "process", "kubernetes", "ecs", "deployment", "insights_scan"]),
    st.sampled_from(["http://127.0.0.1:1", "https://api.pulumi.com/", "ftp://x", "api.pulumi.com"]),
)
bad_tokens = st.builds(
    lambda core, bad: f"pul-{core}{bad}",
    st.text(alphabet="abcdef0123456789", min_size=12, max_size=20),
    st.sampled_from([" ", "\n", "\t", "\x00", "é", " trailing", "\u202e"]),
)
documents = st.dictionaries(
    st.sampled_from(ALL_KEYS) | st.text(max_size=12), near_values, max_size=8
)
env_values = st.dictionaries(
    st.sampled_from(ALL_KEYS).map(env_var),
    st.one_of(
        go_durations, st.text(alphabet=st.characters(blacklist_characters="\x00"), max_size=20)
    ),
    max_size=5,
)


def check_error(err: ConfigError, sources: set[str], secrets: list[str] = ()) -> None:
    text = str(err)
    assert "\n" not in text, text
    assert any(text.startswith(f"{s}: ") for s in sources), (text, sources)
    for secret in secrets:
        assert secret not in text, (text, secret)


def load(
    text: str | bytes, env: dict[str, str]
) -> tuple[LoadedConfig | None, ConfigError | None, str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pulumi-workflow-agent.yaml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        try:
            return load_config(path, env=env), None, str(path)
        except ConfigError as err:
            return None, err, str(path)


@SETTINGS
@given(documents, env_values, st.booleans())
def test_load_config_on_generated_yaml_and_env(doc, env, with_token):
    if with_token:  # so that many documents get past the credentials check to the other keys
        doc = {"token": "pul-0123456789abcdef0123", **doc}
    loaded, err, path = load(yaml.safe_dump(doc, allow_unicode=True), env)
    seen["loaded" if err is None else "rejected"] += 1
    if err is not None:
        check_error(err, {path, "pulumi-workflow-agent.yaml", *env})
    else:
        assert loaded.source == path
        for key, origin in loaded.origins.items():
            assert origin in (path, "default", env_var(key))


@SETTINGS
@given(st.binary(max_size=200) | st.text(max_size=200), env_values)
def test_load_config_on_arbitrary_bytes(raw, env):
    loaded, err, path = load(raw, env)
    if err is not None:
        check_error(err, {path, "pulumi-workflow-agent.yaml", *env})


@SETTINGS
@given(st.text(alphabet=":-{}[]&*!|>'\"%@`#,? \n\tabc1", max_size=60))
def test_load_config_on_yaml_syntax_soup(text):
    loaded, err, path = load("token: pul-0123456789abcdef\n" + text, {})
    if err is not None:
        check_error(err, {path}, ["pul-0123456789abcdef"])


@SETTINGS
@given(env_values, st.booleans())
def test_environment_alone_with_discovery(env, with_token):
    """No file anywhere: discovery finds nothing, the environment must carry everything."""
    if with_token:
        env = {**env, env_var("token"): "pul-0123456789abcdef0123"}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            loaded = load_config(env=env, cwd=tmp, home=tmp, exe_dir=tmp, etc=tmp)
        except ConfigError as err:
            check_error(err, {"pulumi-workflow-agent.yaml", *env}, ["pul-0123456789abcdef0123"])
            return
    assert loaded.source is None


@SETTINGS
@given(bad_tokens, st.sampled_from(["file", "env"]))
def test_a_rejected_token_is_never_echoed(token, where):
    env = {env_var("token"): token} if where == "env" else {}
    doc = {} if where == "env" else {"token": token}
    doc["service_url"] = "http://127.0.0.1:1"
    loaded, err, path = load(yaml.safe_dump(doc, allow_unicode=True), env)
    if err is not None:
        check_error(err, {path, env_var("token")}, [token, token.strip()])


@SETTINGS
@given(go_durations | st.text(max_size=40))
def test_duration_parser_raises_only_value_error(text):
    try:
        ns = durations.parse_ns(text)
    except ValueError:
        try:
            durations.parse(text)
        except ValueError:
            return
        raise AssertionError(f"parse accepted {text!r} that parse_ns rejected") from None
    assert isinstance(ns, int) and -(2**63) <= ns < 2**63
    # What was accepted formats back to a string that parses to the same value.
    assert durations.parse_ns(durations.format_ns(ns)) == ns
    td = durations.parse(text)
    assert isinstance(td, timedelta)
    assert abs(td - timedelta(microseconds=ns / 1000)) <= timedelta(microseconds=1)


@SETTINGS
@given(st.one_of(st.integers(), st.floats(), st.none(), st.binary(), st.lists(st.integers())))
def test_duration_parser_on_non_strings(value):
    for parse in (durations.parse_ns, durations.parse):
        try:
            parse(value)
        except ValueError:
            continue
        raise AssertionError(f"{parse.__name__} accepted {value!r}")


def test_the_fuzzers_reach_both_outcomes():
    """The generated documents are not all rejected (nor all accepted), and a plain valid one
    loads."""
    if seen:  # run after the fuzz test (file order); alone, only the plain check applies
        assert seen["loaded"] > 0 and seen["rejected"] > 0, seen
    loaded, err, _ = load("token: pul-0123456789abcdef\npolling_interval: 1m30s\n", {})
    assert err is None and loaded.config.polling_interval == timedelta(seconds=90)
