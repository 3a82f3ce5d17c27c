"""What the activity configuration answer [RE] turns off (workflow_agent.bootstrap), and the
image rules of a job (jobdef.job_image), as tables."""

from __future__ import annotations

import pytest
from workflow_agent.bootstrap import disabled_types
from workflow_agent.jobdef import job_image, parse_definition

POOLS = [{"id": "pool-a", "name": "a", "description": ""}]


@pytest.mark.parametrize(
    ("answer", "pool", "off", "why"),
    [
        ([{"kind": "deployment", "enabled": True, "agentPools": POOLS}], "", {}, ""),
        ([{"kind": "deployment", "enabled": False}], "", {"deployment": "disabled"}, ""),
        ([{"kind": "insights_scan", "agentPools": POOLS}], "pool-a", {}, ""),
        ([{"kind": "insights_scan", "agentPools": POOLS}], "a", {}, ""),  # its name
        (
            [{"kind": "insights_scan", "agentPools": POOLS}],
            "pool-b",
            {"insights_scan": "pool pool-b is not among its agent pools"},
            "",
        ),
        ([{"kind": "policy_evaluation", "agentPools": []}], "pool-b", {}, ""),  # no list: all
        ([], "", {}, ""),
        ({"kind": "deployment"}, "", {}, "the activity configuration is not a JSON array"),
        ([{"enabled": False}], "", {}, "the activity configuration's item 0 has no kind"),
    ],
)
def test_disabled_types(answer, pool, off, why):
    assert disabled_types(answer, pool) == (off, why)


def definition(image):
    return parse_definition({"image": image, "steps": [{}, {"run": "true"}]})


@pytest.mark.parametrize(
    ("image", "override", "chosen"),
    [
        ({"reference": "acme/job:1"}, "", "acme/job:1"),
        ({"reference": "pulumi/pulumi:3", "isDefault": True}, "", "local/default:1"),
        ({}, "", "local/default:1"),
        ({"reference": ""}, "", "local/default:1"),
        ({"reference": "acme/job:1"}, "mirror/job:2", "mirror/job:2"),
        ({"reference": "x", "isDefault": True}, "mirror/job:2", "mirror/job:2"),
    ],
)
def test_job_image(image, override, chosen):
    assert job_image(definition(image), "local/default:1", override) == chosen


def test_is_default_must_be_a_boolean():
    with pytest.raises(ValueError, match="image.isDefault: expected true or false"):
        definition({"reference": "x", "isDefault": "yes"})
