# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent_k8s role's namespaces: checked, and the replicas of each planned.

A pure function with no Ansible imports (the ``k8s_plan`` action's step ``namespaces`` runs it),
so the role's YAML says what it wants and this file says how it is worked out:

- ``workflow_agent_k8s_namespaces`` entries are names or dicts (``name``, ``weight``, ``min``,
  ``max``, ``replicas``); names are RFC 1123 labels, each listed once.
- Replicas per namespace, the first that applies: ``workflow_agent_k8s_plan[ns].instances``
  (a plan made elsewhere, which must cover every namespace); the pool planner over the
  namespaces when ``workflow_agent_k8s_pool_target`` is set (namespaces are its hosts, with
  their weight and bounds); else the entry's ``replicas``, else ``workflow_agent_k8s_replicas``.
- An autoscaler's lower bound per namespace: ``workflow_agent_k8s_min_replicas`` when set, else
  the planned replicas; at least 1 for an HPA (its minReplicas may not be 0), 0 for KEDA.

Problems are returned, not raised, one message each naming the variable, so the role fails
once with all of them and before it changes anything.
"""

from __future__ import absolute_import, division, print_function

import re
from collections.abc import Mapping

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.pool_plan import (
    DEFAULT_CAP,
    PoolPlanError,
    plan_pool,
)

__metaclass__ = type

NAMESPACE_KEYS = ("name", "weight", "min", "max", "replicas")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_MAX = 63
_VAR = "workflow_agent_k8s_namespaces"


def _entries(namespaces):
    """Names or dicts -> dicts with a string name."""
    if isinstance(namespaces, (str, bytes, Mapping)) or not hasattr(namespaces, "__iter__"):
        return None
    return [
        dict(entry) if isinstance(entry, Mapping) else {"name": str(entry)} for entry in namespaces
    ]


def _check(entries):
    if entries is None:
        return ["%s must be a list of namespace names or dicts" % _VAR]
    if not entries:
        return ["%s must list at least one namespace" % _VAR]
    problems = []
    unknown = sorted({key for entry in entries for key in entry} - set(NAMESPACE_KEYS))
    if unknown:
        problems.append(
            "%s: unknown key(s) %s; a namespace entry is a name or a dict with the keys %s"
            % (_VAR, ", ".join(unknown), ", ".join(NAMESPACE_KEYS))
        )
    names = [str(entry.get("name", "")) for entry in entries]
    bad = [n for n in names if not _LABEL.match(n) or len(n) > _LABEL_MAX]
    twice = []
    for index, name in enumerate(names):
        if name in names[:index] and name not in twice:
            twice.append(name)
    if bad:
        problems.append(
            "%s: not a lowercase RFC 1123 label (letters, digits and -, at most 63 characters): %s"
            % (_VAR, ", ".join(bad))
        )
    elif twice:
        problems.append("%s: listed twice: %s" % (_VAR, ", ".join(twice)))
    return problems


def _replicas(entries, plan, pool_target, slots, cap, default):
    """Replicas per namespace name, and the problems found on the way."""
    if plan:
        replicas = {}
        for entry in entries:
            planned = plan.get(entry["name"])
            replicas[entry["name"]] = (
                planned.get("instances") if isinstance(planned, Mapping) else None
            )
        missing = [name for name, count in replicas.items() if count is None]
        if missing:
            return {}, [
                "workflow_agent_k8s_plan has no entry (with `instances`) for the namespace(s) %s "
                "(its keys: %s)" % (", ".join(missing), ", ".join(str(k) for k in plan))
            ]
        return replicas, []
    if pool_target is not None:
        # Namespaces are the planner's hosts, with their weight and bounds.
        hosts = [
            dict((k, entry[k]) for k in ("name", "weight", "min", "max") if k in entry)
            for entry in entries
        ]
        try:
            made = plan_pool(hosts, pool_target, slots_per_instance=slots, cap=cap)
        except PoolPlanError as exc:
            return {}, ["pool_plan: %s" % exc]
        return dict((name, made[name]["instances"]) for name in made), []
    return dict((entry["name"], entry.get("replicas", default)) for entry in entries), []


def namespace_plan(
    namespaces,
    state="present",
    plan=None,
    pool_target=None,
    slots=1,
    cap=DEFAULT_CAP,
    replicas=1,
    min_replicas=None,
    autoscaling="none",
):
    """The checked namespaces, and (state present) each one's replicas and autoscaler minimum.

    Returns ``{"namespaces": [{"name": ..., ...}], "names": [...], "replicas": {ns: n},
    "min_replicas": {ns: n}, "problems": [message, ...]}``; with problems, the rest is what
    could be worked out (the role stops before it uses it).
    """
    entries = _entries(namespaces)
    problems = _check(entries)
    result = {
        "namespaces": entries or [],
        "names": [str(entry.get("name", "")) for entry in entries or []],
        "replicas": {},
        "min_replicas": {},
        "problems": problems,
    }
    if problems or state != "present":
        return result
    counts, problems = _replicas(entries, plan, pool_target, slots, cap, replicas)
    if problems:
        result["problems"] = problems
        return result
    try:
        counts = dict((name, int(count)) for name, count in counts.items())
        low = None if min_replicas is None else int(min_replicas)
    except (TypeError, ValueError) as exc:
        result["problems"] = ["%s: replicas must be whole numbers (%s)" % (_VAR, exc)]
        return result
    floor = 1 if autoscaling == "hpa" else 0
    result["replicas"] = counts
    result["min_replicas"] = dict(
        (name, max(count if low is None else low, floor)) for name, count in counts.items()
    )
    return result
