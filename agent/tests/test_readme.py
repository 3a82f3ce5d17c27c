"""The README's key table documents every config key once, with its env var and extension flag."""

import re
from pathlib import Path

from pydantic import BaseModel
from workflow_agent.config import ALL_KEYS, EXTENSION_KEYS, AgentConfig, env_var
from workflow_agent.durations import format as go

README = Path(__file__).resolve().parents[1] / "README.md"
ROW = re.compile(r"^\| `([a-z_]+)` \| `(PULUMI_AGENT_[A-Z_<>]+)` \| (.*?) \| (.*) \| ?(yes)? ?\|$")


def rows():
    found = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            assert m.group(1) not in found, f"{m.group(1)} documented twice"
            found[m.group(1)] = m.groups()
    return found


def test_every_key_is_in_the_table_with_its_env_var():
    table = rows()
    assert list(table) == list(ALL_KEYS)
    for key, (_, var, _, meaning, _) in table.items():
        # A block's settings each have their own variable: ecs.cluster, PULUMI_AGENT_ECS_CLUSTER.
        assert var == (env_var(key) + "_<SETTING>" if key == "ecs" else env_var(key))
        assert meaning.strip()


def test_extensions_are_marked():
    assert {k for k, row in rows().items() if row[4] == "yes"} == set(EXTENSION_KEYS)


def test_defaults_match_the_schema():
    for key, (_, _, default, _, _) in rows().items():
        value = AgentConfig.model_fields[key].default
        if value is None or value == "":
            assert default.startswith(('`""`', "—")), key
        elif isinstance(value, bool):
            assert default == f"`{str(value).lower()}`", key
        elif isinstance(value, int):
            assert default == f"`{value}`", key
        elif isinstance(value, list):
            assert default == f"`[{', '.join(value)}]`", key
        elif isinstance(value, BaseModel):  # a block of settings
            assert default.startswith("`{}`"), key
        elif hasattr(value, "total_seconds"):
            assert default in (f"`{go(value)}`", f"`{go(value).removesuffix('0s')}`"), key
        else:
            assert default.startswith(f"`{value}`"), key
