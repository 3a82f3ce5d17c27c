"""The agent role's instances and preflight problems (module_utils/agent_instances.py)."""

from __future__ import annotations

import pytest
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_instances import (
    INSTANCE_KEYS,
    instance_plan,
)

V = "workflow_agent_instances"


def test_a_count_names_the_instances_from_1():
    got = instance_plan(3)
    assert got["instances"] == [{"name": "1"}, {"name": "2"}, {"name": "3"}]
    assert got["present"] == [{"name": str(i + 1), "port": 8080 + i} for i in range(3)]
    assert got["problems"] == []
    assert instance_plan(0)["instances"] == []


def test_a_list_keeps_its_dicts_and_positions_give_the_ports():
    got = instance_plan(
        ["a", {"name": "b", "state": "absent"}, {"name": 7, "http_server_port": 9100}, "d"],
        port_base=9000,
    )
    assert got["instances"][2] == {"name": "7", "http_server_port": 9100}
    # b is absent but keeps its position: d is the 4th instance, so 9000 + 3.
    assert got["present"] == [
        {"name": "a", "port": 9000},
        {"name": "7", "port": 9100},
        {"name": "d", "port": 9003},
    ]


def test_the_managed_keys_are_returned_for_other_tasks():
    assert instance_plan(1)["managed_keys"] == [
        "shared_volume_directory",
        "http_server_port",
        "ca_bundle",
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"instances": 65}, f"{V}: must be a count from 0 to 64 or a list, not 65"),
        ({"instances": -1}, f"{V}: must be a count from 0 to 64 or a list, not -1"),
        ({"instances": "2"}, f"{V}: must be a count from 0 to 64 or a list, not 2"),
        ({"instances": True}, f"{V}: must be a count from 0 to 64 or a list, not True"),
        ({"instances": ["a", "b", "a"]}, f"{V}: the name a is used more than once"),
        ({"instances": [{"name": "a/b"}]}, f'{V}: the name "a/b" is not a valid instance name'),
        ({"instances": [{"slots": 2}]}, f'{V}: the name "" is not a valid instance name'),
        ({"instances": ["x" * 64]}, f'{V}: the name "{"x" * 64}" is not a valid'),
        ({"instances": ["a\n"]}, f'{V}: the name "a\n" is not a valid instance name'),
        (
            {"instances": [{"name": "a", "colour": "red"}]},
            f'{V}: unknown key "colour" (valid: {", ".join(INSTANCE_KEYS)})',
        ),
        (
            {"instances": [{"name": "a", "state": "gone"}]},
            f"{V}: a: state must be present or absent",
        ),
        ({"instances": [{"name": "a", "config": "x"}]}, f"{V}: a: config must be a mapping"),
        (
            {"instances": 1, "config": {"shared_volume_directory": "/x"}},
            "shared_volume_directory (in workflow_agent_config or an instance config) is set by",
        ),
        (
            {"instances": [{"name": "a", "config": {"ca_bundle": "/x"}}]},
            "ca_bundle (in workflow_agent_config or an instance config) is set by the role",
        ),
        (
            {"instances": 1, "version": "1.0; rm -rf /"},
            'workflow_agent_version: "1.0; rm -rf /" is not a version',
        ),
        (
            {
                "instances": [
                    {"name": "a", "http_server_port": 9000},
                    {"name": "b", "http_server_port": 9000},
                ]
            },
            "Two instances would listen on the same http_server_port: 9000, 9000",
        ),
        (
            {"instances": [{"name": "a", "http_server_port": "web"}]},
            f"{V}: a: http_server_port must be a port",
        ),
    ],
)
def test_each_problem_is_one_message_naming_the_variable(kwargs, message):
    problems = instance_plan(**kwargs)["problems"]
    assert len(problems) == 1, problems
    assert problems[0].startswith(message), problems


def test_every_problem_is_reported_at_once():
    problems = instance_plan([{"name": "a", "colour": 1}, "a"], version="x y")["problems"]
    assert len(problems) == 3, problems


def test_a_port_base_clash_counts_positions_not_just_present_ones():
    got = instance_plan(["a", {"name": "b", "http_server_port": 8080}])
    assert got["problems"] == [
        "Two instances would listen on the same http_server_port: 8080, 8080"
    ]
