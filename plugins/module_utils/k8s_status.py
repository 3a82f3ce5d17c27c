# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the agent_k8s role reads back from a cluster: why agent pods are not ready. A pure
function with no Ansible imports (the ``k8s_plan`` action's step ``pod_problems`` runs it).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


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
