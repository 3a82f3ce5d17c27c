"""file_sd_targets: the scrape targets of a plan, their labels, order and errors."""

from __future__ import annotations

import pytest
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.prometheus_file_sd import (
    FileSdError,
    file_sd_targets,
)


def host(name, n, **extra):
    return {
        "host": name,
        "address": extra.pop("address", f"10.0.0.{ord(name[-1]) - 96}"),
        "instances": [{"name": str(i), "slots": 1} for i in range(1, n + 1)],
        "port_base": 8080,
        "deploy_target": "process",
        **extra,
    }


def test_one_group_per_instance_with_its_port_and_labels():
    assert file_sd_targets([host("a", 2)], pool="p") == [
        {
            "targets": ["10.0.0.1:8080"],
            "labels": {"host": "a", "instance": "a/1", "deploy_target": "process", "pool": "p"},
        },
        {
            "targets": ["10.0.0.1:8081"],
            "labels": {"host": "a", "instance": "a/2", "deploy_target": "process", "pool": "p"},
        },
    ]


def test_scaling_down_removes_exactly_the_dropped_instances():
    before = file_sd_targets([host("a", 3), host("b", 3)])
    after = file_sd_targets([host("a", 2), host("b", 3)])
    gone = [g for g in before if g not in after]
    assert [g["labels"]["instance"] for g in gone] == ["a/3"]
    assert all(g in before for g in after)


def test_the_result_does_not_depend_on_host_order_and_numbers_sort_numerically():
    hosts = [host("b", 11), host("a", 1)]
    out = file_sd_targets(hosts)
    assert out == file_sd_targets(list(reversed(hosts)))
    assert [g["labels"]["instance"] for g in out][:4] == ["a/1", "b/1", "b/2", "b/3"]
    assert out[-1]["labels"]["instance"] == "b/11"
    assert out[-1]["targets"] == ["10.0.0.2:8090"]


def test_no_instances_no_targets_and_no_pool_no_label():
    out = file_sd_targets([host("a", 0), host("b", 1)])
    assert [g["labels"] for g in out] == [
        {"host": "b", "instance": "b/1", "deploy_target": "process"}
    ]
    assert file_sd_targets([]) == []


def test_named_ports_absent_entries_plain_names_and_ipv6():
    out = file_sd_targets(
        [
            {
                "host": "a",
                "address": "fd00::1",
                "port_base": "9000",
                "instances": [
                    "x",
                    {"name": "y", "state": "absent"},
                    {"name": "z", "http_server_port": 9999},
                ],
            }
        ]
    )
    assert [(g["targets"], g["labels"]["instance"]) for g in out] == [
        (["[fd00::1]:9000"], "a/x"),
        (["[fd00::1]:9999"], "a/z"),
    ]
    assert "deploy_target" not in out[0]["labels"]


@pytest.mark.parametrize(
    ("hosts", "message"),
    [
        ([host("a", 1), host("a", 1)], "host 'a' is listed twice"),
        (
            [host("a", 1, address="")],
            "host 'a': no address to scrape (set workflow_agent_prometheus_address)",
        ),
        (
            [host("a", 1, port_base="http")],
            "host 'a': workflow_agent_http_port_base 'http' is not a TCP port",
        ),
        ([host("a", 2, port_base=65535)], "host 'a': instance 2's port 65536 is not a TCP port"),
        (
            [{"host": "a", "address": "x", "instances": 3}],
            "host 'a': instances must be a list, got 3",
        ),
        ([{"address": "x"}], "every host needs a name"),
        (
            [{"host": "a", "address": "x", "instances": [{"slots": 1}]}],
            "host 'a': instance 0 has no name",
        ),
    ],
)
def test_bad_input_names_what_and_where(hosts, message):
    with pytest.raises(FileSdError) as err:
        file_sd_targets(hosts)
    assert message in str(err.value)
