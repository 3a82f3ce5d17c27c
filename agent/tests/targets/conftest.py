"""Fixtures: one harness per target (target_harness.py); a missing backend skips with its reason."""

from __future__ import annotations

import pytest
from target_harness import DockerHarness, ProcessHarness, docker_available


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


@pytest.fixture(params=["process", "docker"])
def harness(request):
    return request.getfixturevalue(f"{request.param}_harness")
