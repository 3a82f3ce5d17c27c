# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent role's instances and its preflight problems.

Pure functions with no Ansible imports (the ``agent_instances`` filter is their face), so the
role's YAML says what it wants and this file how:

- ``workflow_agent_instances`` is a count (instances named ``1`` .. ``N``) or a list of names or
  dicts (``name``, ``state``, ``deploy_target``, ``slots``, ``http_server_port``,
  ``env_forward_allowlist``, ``enabled_workflow_types``, ``config``).
- The instance at position *i* (from 0, absent ones counted) listens on ``port_base + i`` unless
  it names its ``http_server_port``.
- Problems are returned, not raised, one message each naming the variable, so the role fails
  once with all of them and before it changes anything.
"""

from __future__ import absolute_import, division, print_function

import re
from collections.abc import Mapping

__metaclass__ = type

INSTANCE_KEYS = (
    "name",
    "state",
    "deploy_target",
    "slots",
    "http_server_port",
    "env_forward_allowlist",
    "enabled_workflow_types",
    "config",
)
# Agent keys the role sets per instance itself (paths it sandboxes, the port it health-checks).
MANAGED_KEYS = ("shared_volume_directory", "http_server_port", "ca_bundle")
MAX_INSTANCES = 64
# systemd instance names and launchd label suffixes: no "@", "/", spaces or escapes.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}\Z")
_VERSION = re.compile(r"^[A-Za-z0-9.+!-]*\Z")
_VAR = "workflow_agent_instances"


def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_list(value):
    return not isinstance(value, (str, bytes, Mapping)) and hasattr(value, "__iter__")


def _entries(instances):
    if _is_count(instances):
        return [{"name": str(i + 1)} for i in range(max(instances, 0))]
    if _is_list(instances):
        return [
            dict(item, name=str(item.get("name", "")))
            if isinstance(item, Mapping)
            else {"name": str(item)}
            for item in instances
        ]
    return []


def _unique(values):
    seen = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def _problems(instances, entries, present, config, version):
    problems = []
    if not ((_is_count(instances) and 0 <= instances <= MAX_INSTANCES) or _is_list(instances)):
        problems.append(
            "%s: must be a count from 0 to %d or a list, not %s" % (_VAR, MAX_INSTANCES, instances)
        )
    names = [entry["name"] for entry in entries]
    for name in _unique(names):
        if names.count(name) > 1:
            problems.append("%s: the name %s is used more than once" % (_VAR, name))
    for name in names:
        if not _NAME.match(name):
            problems.append(
                '%s: the name "%s" is not a valid instance name '
                "(letters, digits, _ . -; at most 63)" % (_VAR, name)
            )
    for key in _unique(key for entry in entries for key in entry):
        if key not in INSTANCE_KEYS:
            problems.append(
                '%s: unknown key "%s" (valid: %s)' % (_VAR, key, ", ".join(INSTANCE_KEYS))
            )
    for entry in entries:
        if "state" in entry and entry["state"] not in ("present", "absent"):
            problems.append("%s: %s: state must be present or absent" % (_VAR, entry["name"]))
    for entry in entries:
        if "config" in entry and not isinstance(entry["config"], Mapping):
            problems.append(
                "%s: %s: config must be a mapping of agent keys" % (_VAR, entry["name"])
            )
    extra = list(config or {}) + [
        key
        for entry in entries
        if isinstance(entry.get("config"), Mapping)
        for key in entry["config"]
    ]
    for key in _unique(extra):
        if key in MANAGED_KEYS:
            problems.append(
                "%s (in workflow_agent_config or an instance config) is set by the role; use the "
                "instance key http_server_port for ports and workflow_agent_ca_bundle for CAs" % key
            )
    if not _VERSION.match(str(version)):
        problems.append('workflow_agent_version: "%s" is not a version' % version)
    ports = [entry["port"] for entry in present]
    if len(set(ports)) != len(ports):
        problems.append(
            "Two instances would listen on the same http_server_port: %s"
            % ", ".join(str(p) for p in ports)
        )
    return problems


def instance_plan(instances, port_base=8080, config=None, version=""):
    """The instances as dicts, the present ones with their ports, and the problems.

    Returns ``{"instances": [{"name": ..., ...}], "present": [{"name": ..., "port": ...}],
    "problems": [message, ...], "managed_keys": [...]}`` (the agent keys the role sets itself).
    """
    entries = _entries(instances)
    present = []
    problems = []
    for index, entry in enumerate(entries):
        if entry.get("state", "present") != "present":
            continue
        try:
            port = int(entry.get("http_server_port", int(port_base) + index))
        except (TypeError, ValueError):
            problems.append(
                "%s: %s: http_server_port must be a port number" % (_VAR, entry["name"])
            )
            continue
        present.append({"name": entry["name"], "port": port})
    problems = _problems(instances, entries, present, config, version) + problems
    return {
        "instances": entries,
        "present": present,
        "problems": problems,
        "managed_keys": list(MANAGED_KEYS),
    }
