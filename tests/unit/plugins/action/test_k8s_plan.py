"""k8s_plan, the agent_k8s role's one internal entry point (plugins/action/k8s_plan.py): each step
runs its module_utils function on the controller with the arguments the role passes, and returns
its result unchanged under `plan`; bad arguments fail with one message. The functions themselves
are tested in tests/unit/plugins/module_utils/test_k8s_*.py; the role through real
ansible-playbook in tests/system/test_k8s_manifests.py and on the test cluster (tests/k8s,
molecule/kind)."""

from __future__ import annotations

import base64
from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail
from ansible.playbook.task import Task
from ansible_collections.selfhosted.workflow_agent.plugins.action import k8s_plan as plugin
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils import (
    k8s_adopt,
    k8s_chart_values,
    k8s_namespaces,
    k8s_status,
)


def run(args, check_mode=False):
    task = Task()
    task.action = "selfhosted.workflow_agent.k8s_plan"
    task.args = args
    task.check_mode = check_mode
    connection = MagicMock()
    action = plugin.ActionModule(
        task=task,
        connection=connection,
        play_context=MagicMock(),
        loader=MagicMock(),
        templar=MagicMock(),
        shared_loader_obj=MagicMock(),
    )
    action._load_name = task.action  # the plugin loader sets it (ansible-core < 2.19 reads it)
    result = action.run(task_vars={})
    # Controller only: nothing is run on, or sent to, the host.
    assert connection.exec_command.call_count == 0
    assert connection.put_file.call_count == 0
    return result


# The role's defaults (roles/agent_k8s/defaults/main.yml), as preflight.yml passes them.
NAMESPACES_ARGS = {
    "step": "namespaces",
    "namespaces": ["ns-a", {"name": "ns-b", "weight": 2}],
    "state": "present",
    "plan": {},
    "pool_target": None,
    "slots": 1,
    "cap": 150,
    "replicas": 1,
    "min_replicas": None,
    "autoscaling": "none",
}


def test_the_controller_only_action_needs_no_connection():
    assert plugin.ActionModule._requires_connection is False
    assert plugin.ActionModule._supports_check_mode is True


@pytest.mark.parametrize("check_mode", [False, True])
def test_namespaces_as_the_role_calls_it(check_mode):
    result = run(dict(NAMESPACES_ARGS), check_mode)
    assert result["changed"] is False
    assert result["plan"]["replicas"] == {"ns-a": 1, "ns-b": 1}
    assert result["plan"]["problems"] == []


def test_namespaces_with_a_pool_target_is_the_module_utils_plan():
    args = dict(NAMESPACES_ARGS, pool_target=6)
    expected = k8s_namespaces.namespace_plan(["ns-a", {"name": "ns-b", "weight": 2}], pool_target=6)
    assert run(args)["plan"] == expected
    assert expected["replicas"] == {"ns-a": 2, "ns-b": 4}


def test_namespaces_problems_are_returned_not_raised():
    plan = run(dict(NAMESPACES_ARGS, namespaces=["Bad_Name"]))["plan"]
    assert plan["problems"] and "workflow_agent_k8s_namespaces" in plan["problems"][0]


def test_numbers_given_as_strings_are_numbers():
    # Inventory values can be strings; the argument spec makes them ints.
    plan = run(dict(NAMESPACES_ARGS, pool_target="6", slots="1"))["plan"]
    assert plan["replicas"] == {"ns-a": 2, "ns-b": 4}


def settings():
    prefix = "workflow_agent_k8s_"
    return {
        prefix + key: value
        for key, value in {
            "name": "workflow-agent",
            "image": "registry.example.com/wa:1.2.3",
            "image_pull_policy": "IfNotPresent",
            "slots": 2,
            "existing_secret": None,
            "token_secret_key": "PULUMI_AGENT_TOKEN",
            "service_url": None,
            "drain_timeout": "5m",
            "termination_grace_margin": 30,
            "config": {},
            "port": 8080,
            "pod_ids": True,
            "autoscaling": "none",
            "chart_values": {},
        }.items()
    }


def test_chart_values_is_the_module_utils_result():
    namespace_plan = run(dict(NAMESPACES_ARGS))["plan"]
    args = {
        "step": "chart_values",
        "settings": settings(),
        "namespace_plan": namespace_plan,
        "digests": {"ns-a": "0123456789abcdef"},
    }
    got = run(args)["plan"]
    assert got == k8s_chart_values.chart_values(
        settings(), namespace_plan, digests={"ns-a": "0123456789abcdef"}
    )
    assert set(got["values"]) == {"ns-a", "ns-b"}
    assert got["values"]["ns-a"]["existingSecretChecksum"] == "0123456789abcdef"
    assert got["values"]["ns-b"]["existingSecretChecksum"] == ""


def test_pod_problems():
    pods = [
        {
            "item": "ns-a",
            "resources": [
                {
                    "metadata": {"name": "p1"},
                    "status": {
                        "containerStatuses": [
                            {"ready": False, "state": {"waiting": {"reason": "ErrImagePull"}}}
                        ]
                    },
                }
            ],
        }
    ]
    got = run({"step": "pod_problems", "results": pods})["plan"]
    assert got == k8s_status.pod_problems(pods) == ["ns-a/p1 ErrImagePull"]


def b64(text):
    return base64.b64encode(text.encode()).decode()


def test_adoption_steps_in_the_roles_order():
    deployment = {"spec": {"template": {"spec": {"containers": []}}}}
    found = [{"item": "a", "resources": [deployment]}, {"item": "b", "resources": []}]
    upstream = run({"step": "adoption_installs", "results": found})["plan"]
    assert upstream == k8s_adopt.installs(found) == [{"namespace": "a", "worker_sa": ""}]

    reads = run(
        {"step": "adoption_reads", "upstream": upstream, "namespaces": ["a", "b"], "name": "p"}
    )["plan"]
    assert reads == k8s_adopt.reads(upstream, ["a", "b"], "p")

    def secret(token):
        return {"data": {"PULUMI_AGENT_TOKEN": b64(token)}}

    read = [
        {"item": {"kind": "Secret", "name": "agent-secret"}, "resources": [secret("pul-1")]},
        {"item": {"kind": "Secret", "name": "agent-secret"}, "resources": [secret("pul-2")]},
    ]
    args = {"step": "adoption_settings", "results": read, "name": "p", "upstream": upstream}
    got = run(dict(args, given={"token": None, "service_url": None}))["plan"]
    assert got["tokens"] == ["pul-1", "pul-2"]
    assert got["problem"].startswith("workflow_agent_k8s_adopt: the upstream installs in a differ")
    assert "pul-" not in got["problem"]
    # The play's own token settles it.
    assert run(dict(args, given={"token": "pul-mine"}))["plan"]["problem"] == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"step": "nope"}, "value of step must be one of"),
        ({}, "missing required arguments: step"),
        ({"step": "namespaces"}, "step is namespaces but all of the following are missing"),
        ({"step": "chart_values", "settings": {}}, "namespace_plan"),
        ({"step": "pod_problems", "results": "x"}, "results"),
        (dict(NAMESPACES_ARGS, slots="two"), "slots"),
        (dict(NAMESPACES_ARGS, bogus=1), "Unsupported parameters"),
    ],
)
def test_bad_arguments_fail_with_one_message(args, message):
    with pytest.raises(AnsibleActionFail, match=message):
        run(args)
