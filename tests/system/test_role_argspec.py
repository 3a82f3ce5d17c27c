"""The agent role's meta/argument_specs.yml documents exactly the variables of defaults/main.yml.

argument_specs.yml is where each role variable is documented (the role's docs are generated
from it), so a variable missing there is undocumented and one missing from the defaults is a
documented variable the role never sets.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROLE = Path(__file__).resolve().parents[2] / "roles" / "agent"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
SPEC = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]
OPTIONS = SPEC["options"]


def test_same_variables():
    assert sorted(DEFAULTS) == sorted(OPTIONS), {
        "undocumented (only in defaults)": sorted(set(DEFAULTS) - set(OPTIONS)),
        "documented but not in defaults": sorted(set(OPTIONS) - set(DEFAULTS)),
    }


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_prefixed_and_described(name):
    assert name.startswith("workflow_agent_")
    description = OPTIONS[name].get("description")
    text = " ".join(description) if isinstance(description, list) else description or ""
    assert len(text.split()) >= 5, f"{name}: describe it"
    assert OPTIONS[name].get("type"), f"{name}: no type"


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_documented_default_is_the_real_one(name):
    value = DEFAULTS[name]
    if isinstance(value, str) and "{{" in value:
        assert "default" not in OPTIONS[name], f"{name}: the default is computed; describe it"
    elif value is None:
        assert "default" not in OPTIONS[name], f"{name}: null means the agent's default"
    else:
        assert OPTIONS[name].get("default") == value, name


def test_the_token_is_no_log():
    assert OPTIONS["workflow_agent_token"].get("no_log") is True
