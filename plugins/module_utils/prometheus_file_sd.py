# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus file_sd target groups for a pool's planned agent instances.

A pure function with no Ansible imports, shared by the prometheus_file_sd filter and its tests.
One target group per instance, so each carries its own labels; sorted by host and instance
name (numerically when the name is a number), so the same plan always gives the same file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DEFAULT_PORT_BASE = 8080  # the agent role's workflow_agent_http_port_base


class FileSdError(ValueError):
    pass


def _address(host, address):
    if not isinstance(address, str) or not address.strip():
        raise FileSdError(
            "host %r: no address to scrape (set workflow_agent_prometheus_address)" % host
        )
    address = address.strip()
    # An IPv6 literal needs brackets before the port.
    if ":" in address and not address.startswith("["):
        address = "[%s]" % address
    return address


def _port(host, value, what):
    try:
        port = int(value)
    except (TypeError, ValueError):
        port = -1
    if not 0 < port < 65536:
        raise FileSdError("host %r: %s %r is not a TCP port" % (host, what, value))
    return port


def _order(name):
    return (0, int(name), "") if name.isdigit() else (1, 0, name)


def file_sd_targets(hosts, pool=None):
    """The file_sd JSON document (a list) for ``hosts``.

    Each host is a dict: ``host`` (its inventory name), ``address`` (as Prometheus reaches it),
    ``instances`` (the agent role's list: names or dicts with ``name`` and optionally
    ``http_server_port`` and ``deploy_target``), ``port_base`` (instance i from 0 listens on
    port_base + i unless it names its port) and ``deploy_target``.
    Labels: ``host``, ``instance`` (``<host>/<name>``, the agent's identity), ``deploy_target``
    when known, and ``pool`` when given.
    """
    groups = []
    seen = set()
    for entry in hosts:
        host = entry.get("host")
        if not isinstance(host, str) or not host:
            raise FileSdError("every host needs a name, got %r" % (entry,))
        if host in seen:
            raise FileSdError("host %r is listed twice" % host)
        seen.add(host)
        instances = entry.get("instances") or []
        if not isinstance(instances, list):
            raise FileSdError("host %r: instances must be a list, got %r" % (host, instances))
        if not instances:
            continue
        address = _address(host, entry.get("address"))
        base = _port(
            host, entry.get("port_base", DEFAULT_PORT_BASE), "workflow_agent_http_port_base"
        )
        rows = []
        for i, inst in enumerate(instances):
            spec = inst if isinstance(inst, dict) else {"name": inst}
            name = str(spec.get("name", ""))
            if not name:
                raise FileSdError("host %r: instance %d has no name" % (host, i))
            if spec.get("state", "present") == "absent":
                continue
            port = spec.get("http_server_port")
            port = base + i if port is None else _port(host, port, "http_server_port of %s" % name)
            _port(host, port, "instance %s's port" % name)
            labels = {"host": host, "instance": "%s/%s" % (host, name)}
            target = spec.get("deploy_target") or entry.get("deploy_target")
            if target:
                labels["deploy_target"] = str(target)
            if pool:
                labels["pool"] = str(pool)
            rows.append((_order(name), {"targets": ["%s:%d" % (address, port)], "labels": labels}))
        groups.extend(row[1] for row in sorted(rows, key=lambda r: r[0]))
    groups.sort(key=lambda g: g["labels"]["host"])
    return groups
