"""The agent role's look at a platform, read (module_utils/agent_platform.py)."""

from __future__ import annotations

import pytest
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_platform import (
    SUPPORTED,
    parse_platform,
)

# What the role's command prints on a Debian 12 systemd host (os-release quotes NAME).
DEBIAN12 = [
    "SYSTEM=Linux",
    'OS_NAME="Debian GNU/Linux"',
    'OS_VERSION_ID="12"',
    "OS_ID=debian",
    "SERVICE_MGR=systemd",
    "CPUS=2",
    "MEMORY_MB=23931",
]


def test_a_debian_12_host():
    assert parse_platform(DEBIAN12) == {
        "os_family": "Debian",
        "distribution": "Debian GNU/Linux",
        "id": "debian",
        "version": "12",
        "major_version": "12",
        "service_mgr": "systemd",
        "cpus": 2,
        "memory_mb": 23931,
        "supported": True,
        "problem": "",
    }


@pytest.mark.parametrize(
    ("lines", "family", "supported"),
    [
        (
            ["SYSTEM=Linux", "OS_ID=ubuntu", "OS_VERSION_ID='24.04'", "SERVICE_MGR=systemd"],
            "Debian",
            False,  # not in meta/main.yml: nothing tests it
        ),
        (
            ["SYSTEM=Linux", "OS_ID=debian", "OS_VERSION_ID=13", "SERVICE_MGR=systemd"],
            "Debian",
            True,
        ),
        (
            ["SYSTEM=Linux", "OS_ID=debian", "OS_VERSION_ID=11", "SERVICE_MGR=systemd"],
            "Debian",
            False,
        ),
        (
            ["SYSTEM=Linux", "OS_ID=ubuntu", "OS_VERSION_ID=20.04", "SERVICE_MGR=systemd"],
            "Debian",
            False,
        ),
        (
            [
                "SYSTEM=Linux",
                "OS_ID=rocky",
                'OS_ID_LIKE="rhel centos fedora"',
                "OS_VERSION_ID=9.4",
                "SERVICE_MGR=systemd",
            ],
            "RedHat",
            False,  # not in meta/main.yml: nothing tests it
        ),
        (
            ["SYSTEM=Linux", "OS_ID=linuxmint", 'OS_ID_LIKE="ubuntu debian"', "OS_VERSION_ID=22"],
            "Debian",
            False,
        ),
        (
            ["SYSTEM=Darwin", "OS_NAME=macOS", "OS_VERSION_ID=14.2.1", "SERVICE_MGR=launchd"],
            "Darwin",
            True,
        ),
        (["SYSTEM=Darwin", "OS_NAME=macOS", "OS_VERSION_ID=12.7"], "Darwin", False),
        (
            ["SYSTEM=Linux", "OS_ID=debian", "OS_VERSION_ID=12"],
            "Debian",
            False,
        ),  # no systemd as PID 1
        (["SYSTEM=FreeBSD"], "FreeBSD", False),
        ([], "unknown", False),
    ],
)
def test_families_and_support(lines, family, supported):
    got = parse_platform(lines)
    assert (got["os_family"], got["supported"]) == (family, supported)
    assert (got["problem"] == "") is supported


def test_the_supported_platforms_read():
    assert SUPPORTED == "Debian 12/13 (with systemd) and macOS 13 or later (launchd)"


def test_the_problem_names_the_supported_platforms_and_this_host():
    got = parse_platform(
        ["SYSTEM=Linux", "OS_NAME=Alpine Linux", "OS_ID=alpine", "OS_VERSION_ID=3.20.1"]
    )
    assert got["problem"] == (
        f"selfhosted.workflow_agent.agent supports {SUPPORTED}; this host is Alpine Linux 3.20.1 "
        "(os family Linux, service manager unknown)"
    )


def test_noise_and_bad_numbers():
    got = parse_platform(["  CPUS=x ", "MEMORY_MB=", "garbage", "lower=case", "SYSTEM=Linux"])
    assert (got["cpus"], got["memory_mb"], got["distribution"]) == (1, 0, "Linux")
