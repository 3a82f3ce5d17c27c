"""What the agent_k8s role reads back from a cluster (module_utils/k8s_status.py)."""

from __future__ import annotations

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.k8s_status import (
    pod_problems,
)


def pod(name, status, deleting=False):
    meta = {"name": name, **({"deletionTimestamp": "now"} if deleting else {})}
    return {"metadata": meta, "status": status}


def test_why_pods_are_not_ready():
    pods = [
        {
            "item": "ns-a",
            "resources": [
                pod(
                    "crash",
                    {
                        "containerStatuses": [
                            {
                                "ready": False,
                                "restartCount": 4,
                                "state": {
                                    "waiting": {
                                        "reason": "CrashLoopBackOff",
                                        "message": "back-off 40s",
                                    }
                                },
                            },
                            {"ready": True, "state": {"running": {}}},
                        ]
                    },
                ),
                pod("ready", {"containerStatuses": [{"ready": True, "state": {"running": {}}}]}),
                pod("old", {"containerStatuses": [{"ready": False, "state": {}}]}, deleting=True),
                pod(
                    "starting", {"containerStatuses": [{"ready": False, "state": {"running": {}}}]}
                ),
            ],
        },
        {
            "item": "ns-b",
            "resources": [
                pod(
                    "pending",
                    {
                        "phase": "Pending",
                        "conditions": [
                            {"type": "PodScheduled", "message": "0/1 nodes are available:"},
                            {"type": "Other"},
                            {"type": "X", "message": "insufficient cpu"},
                        ],
                    },
                ),
                pod("new", {"phase": "Pending"}),
            ],
        },
    ]
    assert pod_problems(pods) == [
        "ns-a/crash CrashLoopBackOff: back-off 40s (restarts: 4)",
        "ns-a/starting not ready",
        "ns-b/pending Pending: 0/1 nodes are available: insufficient cpu",
        "ns-b/new Pending: no status",
    ]
    assert pod_problems([]) == []
