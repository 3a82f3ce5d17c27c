"""Fixtures of the tests that drive the test cluster through Ansible or Helm: the cluster (its
kubeconfig and kubectl, tests/k8s/README.md) and what the suite's registry holds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from chartlib import registry_refs

STABLE = Path("/var/tmp/workflow-agent-k8s")


@pytest.fixture(scope="module")
def refs() -> dict[str, str]:
    return registry_refs()


@pytest.fixture(scope="module")
def cluster() -> dict[str, str]:
    kubeconfig = Path(os.environ.get("KUBECONFIG") or STABLE / "kubeconfig")
    if not kubeconfig.exists() or not (STABLE / "kubectl").exists():
        pytest.skip("no test cluster is up (bash tests/k8s/up.sh)")
    return {"kubeconfig": str(kubeconfig), "kubectl": str(STABLE / "kubectl")}
