"""Execution targets. `make_target` imports the chosen one lazily: the docker and kubernetes
SDKs are optional extras, and a host running the process target needs neither."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workflow_agent.targets.base import JobSpec, Step, StepOutcome, Target, TargetError

if TYPE_CHECKING:
    from workflow_agent.config import AgentConfig

__all__ = ["JobSpec", "Step", "StepOutcome", "Target", "TargetError", "make_target"]


def make_target(cfg: AgentConfig, instance: str) -> Target:
    if cfg.deploy_target == "process":
        from workflow_agent.targets.process import ProcessTarget

        return ProcessTarget(cfg, instance)
    if cfg.deploy_target == "docker":
        from workflow_agent.targets.docker import DockerTarget

        return DockerTarget(cfg, instance)
    if cfg.deploy_target == "kubernetes":
        from workflow_agent.targets.kubernetes import KubernetesTarget

        return KubernetesTarget(cfg, instance)
    raise ValueError(f"unknown deploy target {cfg.deploy_target!r}")
