# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent role's look at a platform: the KEY=value lines of its one raw command, read.

The command (``SCRIPT``, run by the agent_host_info action with ``platform: true``) prints
``SYSTEM`` (uname), os-release's ``ID``, ``ID_LIKE``, ``VERSION_ID`` and ``NAME`` as ``OS_*``
(or macOS's version), ``SERVICE_MGR`` (systemd when it is PID 1's manager, launchd on macOS),
``CPUS`` and ``MEMORY_MB``. Pure, with no Ansible imports.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

# KEY=value lines; no Python needed (the platform decides which Pythons to try).
SCRIPT = (
    "printf 'SYSTEM=%s\\n' \"$(uname -s)\"; "
    "if [ -r /etc/os-release ]; then "
    "grep -E '^(ID|ID_LIKE|VERSION_ID|NAME)=' /etc/os-release | sed 's/^/OS_/'; fi; "
    "if command -v sw_vers >/dev/null 2>&1; then "
    "printf 'OS_NAME=macOS\\nOS_VERSION_ID=%s\\n' \"$(sw_vers -productVersion)\"; fi; "
    "if [ -d /run/systemd/system ]; then echo SERVICE_MGR=systemd; "
    'elif [ "$(uname -s)" = Darwin ]; then echo SERVICE_MGR=launchd; fi; '
    "printf 'CPUS=%s\\n' \"$(nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null "
    '|| getconf _NPROCESSORS_ONLN)"; '
    "if [ -r /proc/meminfo ]; then "
    "awk '/^MemTotal:/ { print \"MEMORY_MB=\" int($2 / 1024) }' /proc/meminfo; "
    "else printf 'MEMORY_MB=%s\\n' \"$(( $(sysctl -n hw.memsize) / 1048576 ))\"; fi"
)
_LINE = re.compile(r"^([A-Z_]+)=(.*)$")
# The platforms the role supports: the one list. roles/agent/meta/main.yml's galaxy_info.platforms,
# the role's argument spec and the README's platform table say the same (tests/system/
# test_role_docs.py holds them to it); each is one a test proves on a host or with a mock.
DEBIAN_RELEASES = {"12": "bookworm", "13": "trixie"}
MACOS_MIN = 13
SUPPORTED = "Debian %s (with systemd) and macOS %d or later (launchd)" % (
    "/".join(DEBIAN_RELEASES),
    MACOS_MIN,
)


def _unquote(value):
    for quote in ('"', "'"):
        if len(value) >= 2 and value[0] == quote and value[-1] == quote:
            return value[1:-1]
    return value


def _whole(value, default):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _supported(p):
    if p["id"] == "debian" and p["service_mgr"] == "systemd":
        return p["major_version"] in DEBIAN_RELEASES
    if p["os_family"] == "Darwin":
        return _whole(p["major_version"], 0) >= MACOS_MIN
    return False


def parse_platform(lines):
    """The platform of a host from its lines: ``os_family``, ``distribution``, ``id``,
    ``version``, ``major_version``, ``service_mgr``, ``cpus``, ``memory_mb``, ``supported`` (one
    of the platforms the role supports, ``SUPPORTED``) and ``problem`` (why not, or "")."""
    kv = {}
    for line in lines:
        found = _LINE.match(line.strip())
        if found:
            kv[found.group(1)] = _unquote(found.group(2))
    system = kv.get("SYSTEM", "")
    os_id = kv.get("OS_ID", "").lower()
    like = kv.get("OS_ID_LIKE", "").lower().split()
    if system == "Darwin":
        family = "Darwin"
    elif os_id in ("debian", "ubuntu") or "debian" in like or "ubuntu" in like:
        family = "Debian"
    elif os_id in ("rhel", "centos", "fedora") or set(like) & {"rhel", "centos", "fedora"}:
        family = "RedHat"
    else:
        family = system or "unknown"
    version = kv.get("OS_VERSION_ID", "")
    platform = {
        "os_family": family,
        "distribution": kv.get("OS_NAME", system or "unknown"),
        "id": os_id,
        "version": version,
        "major_version": version.split(".")[0],
        "service_mgr": kv.get("SERVICE_MGR", "unknown"),
        "cpus": _whole(kv.get("CPUS"), 1),
        "memory_mb": _whole(kv.get("MEMORY_MB"), 0),
    }
    platform["supported"] = _supported(platform)
    platform["problem"] = (
        ""
        if platform["supported"]
        else "selfhosted.workflow_agent.agent supports %s; this host is %s %s (os family %s, "
        "service manager %s)"
        % (SUPPORTED, platform["distribution"], version, family, platform["service_mgr"])
    )
    return platform
