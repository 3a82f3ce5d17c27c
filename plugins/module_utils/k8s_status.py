# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the agent_k8s role reads back from a cluster: stale optional objects, and why agent
pods are not ready. Pure functions with no Ansible imports (the ``k8s_stale_objects`` and
``k8s_pod_problems`` filters are their faces).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def stale_objects(before, annotation, made, kinds, keep_secret=False):
    """``[namespace, kind]`` of the optional objects made before and switched off now.

    ``before``: the registered results of reading each namespace's Deployment (each with its
    ``item``, the namespace, and ``resources``); the Deployment lists the optional kinds it was
    applied with in its ``annotation``. ``made``: the kinds this run makes; ``kinds``: the known
    ones. ``keep_secret``: the token Secret is now one the user manages under the role's name,
    so it is never deleted.
    """
    out = []
    for result in before:
        resources = result.get("resources") or []
        if not resources:
            continue
        annotations = (resources[0].get("metadata") or {}).get("annotations") or {}
        for kind in (annotations.get(annotation) or "").split(","):
            if not kind or kind in made or kind not in kinds or (kind == "Secret" and keep_secret):
                continue
            if [result["item"], kind] not in out:
                out.append([result["item"], kind])
    return out


def _container_problem(status):
    state = status.get("state") or {}
    state = state.get("waiting") or state.get("terminated") or {}
    text = state.get("reason") or "not ready"
    if "message" in state:
        text += ": %s" % state["message"]
    if status.get("restartCount"):
        text += " (restarts: %s)" % status["restartCount"]
    return text


def pod_problems(pods):
    """``namespace/pod why`` for each agent pod that is not ready (deleted pods left out).

    ``pods``: the registered results of listing each namespace's agent pods (each with its
    ``item``, the namespace, and ``resources``).
    """
    out = []
    for result in pods:
        for pod in result.get("resources") or []:
            meta = pod.get("metadata") or {}
            if "deletionTimestamp" in meta:
                continue
            status = pod.get("status") or {}
            why = [
                _container_problem(cs)
                for cs in status.get("containerStatuses") or []
                if not cs.get("ready")
            ]
            if "containerStatuses" not in status:
                messages = [c["message"] for c in status.get("conditions") or [] if "message" in c]
                why.append("%s: %s" % (status.get("phase"), " ".join(messages) or "no status"))
            if why:
                out.append("%s/%s %s" % (result["item"], meta.get("name"), ", ".join(why)))
    return out
