"""Fixtures: one harness per target (target_harness.py); a missing backend skips with its reason."""

from __future__ import annotations

import pytest
from target_harness import (
    DockerHarness,
    KubernetesHarness,
    ProcessHarness,
    docker_available,
    kubernetes_available,
)


@pytest.fixture
def process_harness(tmp_path):
    h = ProcessHarness(tmp_path)
    yield h
    h.teardown()


@pytest.fixture(scope="session")
def docker_reason():
    return docker_available()


@pytest.fixture
def docker_harness(tmp_path, docker_reason):
    if docker_reason:
        pytest.skip(docker_reason)
    h = DockerHarness(tmp_path)
    yield h
    h.teardown()


@pytest.fixture(scope="session")
def kubernetes_reason():
    return kubernetes_available()


@pytest.fixture
def kubernetes_harness(tmp_path, kubernetes_reason):
    if kubernetes_reason:
        pytest.skip(kubernetes_reason)
    h = KubernetesHarness(tmp_path)
    yield h
    h.teardown()


@pytest.fixture(params=["process", "docker", "kubernetes"])
def harness(request):
    return request.getfixturevalue(f"{request.param}_harness")
