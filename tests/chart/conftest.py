"""Fixtures of the chart tests: the real Helm CLI (scripts/build-go-tool.sh helm, v3.22.0 from
its Go module) and, for test_chart_cluster.py, the test cluster (tests/k8s)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from chartlib import Helm, helm_path


@pytest.fixture(scope="session")
def helm() -> Helm:
    """The pinned Helm CLI; the session fails (never skips) when it cannot be built."""
    return Helm(helm_path())


K8S_DIR = Path("/var/tmp/workflow-agent-k8s")


@pytest.fixture(scope="session")
def kubectl() -> list[str]:
    """kubectl of the test cluster (tests/k8s/up.sh), with its kubeconfig; a skip names why."""
    kubeconfig = os.environ.get("KUBECONFIG") or str(K8S_DIR / "kubeconfig")
    binary = os.environ.get("KUBECTL") or (
        str(K8S_DIR / "kubectl") if (K8S_DIR / "kubectl").exists() else shutil.which("kubectl")
    )
    if not binary or not Path(kubeconfig).is_file():
        pytest.skip(f"no test cluster: no kubectl or no {kubeconfig} (run: bash tests/k8s/up.sh)")
    cmd = [binary, "--kubeconfig", kubeconfig]
    nodes = subprocess.run(
        [*cmd, "get", "nodes", "-o", "name"], capture_output=True, text=True, timeout=60
    )
    if nodes.returncode != 0 or not nodes.stdout.strip():
        pytest.skip(f"the test cluster does not answer (run: bash tests/k8s/up.sh): {nodes.stderr}")
    return cmd
