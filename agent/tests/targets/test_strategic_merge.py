"""Strategic merge patch of a Pod: expected results, and the same cases against `kubectl patch
--local` (no cluster needed) when kubectl is installed."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from workflow_agent.targets.strategic_merge import PatchError, merge

BASE = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "labels": {"app": "x", "drop": "me"},
        "finalizers": ["a", "b"],
    },
    "spec": {
        "containers": [
            {
                "name": "pulumi-workflow",
                "image": "job:1",
                "env": [
                    {"name": "A", "value": "1"},
                    {"name": "B", "value": "2"},
                    {"name": "C", "value": "3"},
                ],
                "volumeMounts": [{"name": "workflow", "mountPath": "/mnt/workflow"}],
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
        "volumes": [{"name": "workflow", "emptyDir": {}}],
        "tolerations": [{"key": "old", "operator": "Exists"}],
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000},
    },
}

CASES = {
    "container_by_name_and_sidecar": {
        "spec": {
            "containers": [
                {
                    "name": "pulumi-workflow",
                    "resources": {"limits": {"memory": "1Gi"}},
                    "env": [{"name": "B", "value": "two"}, {"name": "D", "value": "4"}],
                },
                {"name": "sidecar", "image": "side:1"},
            ]
        }
    },
    "labels_null_deletes_and_tolerations_replace": {
        "metadata": {"labels": {"drop": None, "team": "infra"}, "annotations": {"a": "b"}},
        "spec": {"tolerations": [{"key": "new", "operator": "Exists"}], "nodeSelector": {"x": "y"}},
    },
    "volumes_and_mounts_merge": {
        "spec": {
            "volumes": [{"name": "cache", "emptyDir": {"medium": "Memory"}}],
            "containers": [
                {
                    "name": "pulumi-workflow",
                    "volumeMounts": [
                        {"name": "cache", "mountPath": "/cache"},
                        {"name": "workflow", "mountPath": "/mnt/workflow", "readOnly": True},
                    ],
                }
            ],
        }
    },
    "replace_and_delete_directives": {
        "spec": {
            "securityContext": {"$patch": "replace", "runAsUser": 0},
            "containers": [
                {
                    "name": "pulumi-workflow",
                    "env": [{"name": "A", "$patch": "delete"}],
                    "securityContext": {"capabilities": {"drop": ["NET_RAW"]}},
                }
            ],
        }
    },
    "list_replace_item": {
        "spec": {
            "containers": [
                {
                    "name": "pulumi-workflow",
                    "env": [{"$patch": "replace"}, {"name": "Z", "value": "z"}],
                }
            ]
        }
    },
    "delete_a_container": {
        "spec": {"containers": [{"name": "pulumi-workflow", "$patch": "delete"}]}
    },
    "finalizers_union_and_delete_from_primitive_list": {
        "metadata": {"finalizers": ["c", "a"], "$deleteFromPrimitiveList/finalizers": ["b"]}
    },
    "order_of_new_items": {
        "spec": {"containers": [{"name": "pulumi-workflow", "env": [{"name": "B"}, {"name": "E"}]}]}
    },
    "set_element_order": {
        "spec": {
            "containers": [
                {
                    "name": "pulumi-workflow",
                    "$setElementOrder/env": [{"name": "C"}, {"name": "A"}, {"name": "B"}],
                    "env": [{"name": "A", "value": "one"}],
                }
            ]
        }
    },
    "retain_keys_in_a_volume": {
        "spec": {
            "volumes": [
                {
                    "name": "workflow",
                    "$retainKeys": ["name", "hostPath"],
                    "hostPath": {"path": "/x"},
                }
            ]
        }
    },
    "init_container_and_pull_secrets": {
        "spec": {
            "initContainers": [{"name": "init", "image": "busybox", "command": ["true"]}],
            "imagePullSecrets": [{"name": "regcred"}],
            "serviceAccountName": "worker",
        }
    },
    "empty_patch": {},
    "ports_by_container_port": {
        "spec": {
            "containers": [
                {"name": "pulumi-workflow", "ports": [{"containerPort": 80, "name": "http"}]}
            ]
        }
    },
    "nulls_inside_a_new_map": {"spec": {"nodeSelector": {"a": None, "b": "c"}}},
    "order_without_the_list": {
        "spec": {
            "containers": [
                {
                    "name": "pulumi-workflow",
                    "$setElementOrder/env": [{"name": "C"}, {"name": "B"}, {"name": "A"}],
                }
            ]
        }
    },
    "replace_item_in_an_atomic_list": {
        "spec": {"tolerations": [{"$patch": "replace"}, {"key": "t", "operator": "Exists"}]}
    },
    "delete_missing_item": {
        "spec": {"containers": [{"name": "nope", "$patch": "delete"}]},
    },
}


EXPECTED = {
    "container_by_name_and_sidecar": lambda p: (
        p["spec"]["containers"][0]["env"]
        == [
            {"name": "A", "value": "1"},
            {"name": "B", "value": "two"},
            {"name": "D", "value": "4"},
            {"name": "C", "value": "3"},
        ]
        and p["spec"]["containers"][0]["resources"] == {"limits": {"memory": "1Gi"}}
        and p["spec"]["containers"][0]["image"] == "job:1"
        and [c["name"] for c in p["spec"]["containers"]] == ["pulumi-workflow", "sidecar"]
    ),
    "labels_null_deletes_and_tolerations_replace": lambda p: (
        p["metadata"]["labels"] == {"app": "x", "team": "infra"}
        and p["spec"]["tolerations"] == [{"key": "new", "operator": "Exists"}]
    ),
    "replace_and_delete_directives": lambda p: (
        p["spec"]["securityContext"] == {"runAsUser": 0}
        and [e["name"] for e in p["spec"]["containers"][0]["env"]] == ["B", "C"]
        and p["spec"]["containers"][0]["securityContext"]["capabilities"] == {"drop": ["NET_RAW"]}
    ),
    "list_replace_item": lambda p: (
        p["spec"]["containers"][0]["env"] == [{"name": "Z", "value": "z"}]
    ),
    "delete_a_container": lambda p: p["spec"]["containers"] == [],
    "finalizers_union_and_delete_from_primitive_list": lambda p: (
        p["metadata"]["finalizers"] == ["c", "a"]
    ),
    "set_element_order": lambda p: (
        [e["name"] for e in p["spec"]["containers"][0]["env"]] == ["C", "A", "B"]
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_expected_results(name):
    assert EXPECTED[name](merge(BASE, CASES[name])), json.dumps(merge(BASE, CASES[name]), indent=1)


def test_merge_does_not_modify_its_inputs():
    before = json.dumps(BASE, sort_keys=True)
    patch = CASES["container_by_name_and_sidecar"]
    patch_before = json.dumps(patch, sort_keys=True)
    merge(BASE, patch)
    assert json.dumps(BASE, sort_keys=True) == before
    assert json.dumps(patch, sort_keys=True) == patch_before


def test_an_item_without_its_merge_key_is_an_error_naming_the_field():
    with pytest.raises(PatchError, match=r"spec\.containers: an item has no merge key 'name'"):
        merge(BASE, {"spec": {"containers": [{"image": "x"}]}})


def test_unknown_directive_is_an_error():
    with pytest.raises(PatchError, match=r"spec\.securityContext: unknown \$patch directive"):
        merge(BASE, {"spec": {"securityContext": {"$patch": "explode"}}})


KUBECTL = shutil.which("kubectl")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (the cross-check needs it)")
@pytest.mark.parametrize("name", sorted(CASES))
def test_same_result_as_kubectl(name, tmp_path):
    src = tmp_path / "pod.json"
    src.write_text(json.dumps(BASE))
    proc = subprocess.run(
        [KUBECTL, "patch", "--local", "-f", str(src), "--type", "strategic", "-o", "json"]
        + ["-p", json.dumps(CASES[name])],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert merge(BASE, CASES[name]) == json.loads(proc.stdout)
