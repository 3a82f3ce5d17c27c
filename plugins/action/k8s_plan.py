# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""k8s_plan: the agent_k8s role's one internal entry point (plugins/modules/k8s_plan.py
documents it).

Each step is a pure function of plugins/module_utils/k8s_*.py, run on the controller; the
action never contacts the host. It is an action rather than filters so that these internals
stay out of ``ansible-doc -t filter`` (issue 28).
"""

from __future__ import absolute_import, division, print_function

from ansible.plugins.action import ActionBase
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils import (
    k8s_adopt,
    k8s_chart_values,
    k8s_namespaces,
    k8s_status,
)

__metaclass__ = type


def _namespaces(args):
    return k8s_namespaces.namespace_plan(
        args["namespaces"],
        state=args["state"],
        plan=args["plan"],
        pool_target=args["pool_target"],
        slots=args["slots"],
        cap=args["cap"],
        replicas=args["replicas"],
        min_replicas=args["min_replicas"],
        autoscaling=args["autoscaling"],
    )


def _chart_values(args):
    return k8s_chart_values.chart_values(
        args["settings"], args["namespace_plan"], digests=args["digests"]
    )


def _pod_problems(args):
    return k8s_status.pod_problems(args["results"])


def _adoption_installs(args):
    return k8s_adopt.installs(args["results"])


def _adoption_reads(args):
    return k8s_adopt.reads(args["upstream"], args["namespaces"] or [], args["name"])


def _adoption_settings(args):
    found = k8s_adopt.settings(args["results"], args["name"], args["token_key"])
    found["problem"] = k8s_adopt.disagreements(args["upstream"] or [], found, args["given"] or {})
    return found


# step -> (its function, the options it needs)
STEPS = {
    "namespaces": (_namespaces, ["namespaces"]),
    "chart_values": (_chart_values, ["settings", "namespace_plan"]),
    "pod_problems": (_pod_problems, ["results"]),
    "adoption_installs": (_adoption_installs, ["results"]),
    "adoption_reads": (_adoption_reads, ["upstream", "namespaces"]),
    "adoption_settings": (_adoption_settings, ["results", "upstream"]),
}

ARGUMENT_SPEC = {
    "step": {"type": "str", "required": True, "choices": sorted(STEPS)},
    "namespaces": {"type": "raw"},
    "state": {"type": "str", "default": "present"},
    "plan": {"type": "dict"},
    "pool_target": {"type": "int"},
    "slots": {"type": "int", "default": 1},
    "cap": {"type": "int", "default": k8s_namespaces.DEFAULT_CAP},
    "replicas": {"type": "int", "default": 1},
    "min_replicas": {"type": "int"},
    "autoscaling": {"type": "str", "default": "none"},
    "settings": {"type": "dict"},
    "namespace_plan": {"type": "dict"},
    "digests": {"type": "dict"},
    "results": {"type": "list", "elements": "dict"},
    "upstream": {"type": "list", "elements": "dict"},
    "name": {"type": "str", "default": "workflow-agent"},
    "token_key": {"type": "str", "default": k8s_adopt.TOKEN_KEY, "no_log": False},
    "given": {"type": "dict"},
}
REQUIRED_IF = [["step", step, STEPS[step][1]] for step in sorted(STEPS)]


def run_step(args):
    """The plan of the validated args' step, as its module_utils function returns it."""
    return STEPS[args["step"]][0](args)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False  # works on the controller only
    _supports_check_mode = True  # it only computes
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(
            argument_spec=ARGUMENT_SPEC, required_if=REQUIRED_IF
        )
        result.update(changed=False, plan=run_step(args))
        return result
