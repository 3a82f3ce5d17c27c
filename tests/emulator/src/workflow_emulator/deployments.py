"""Deployment jobs shaped like the service's (POST /admin/deployments): what a Pulumi
Deployments job's JobDefinition holds [DOC, SPEC, RE], run by the stand-in executor
(data/pulumi-deploy-executor), whose settings are [ASSUMED] and named PULUMI_DEPLOY_*.

What depends on who asks (the scoped access token, the URLs the job calls back) is added when
the definition is served: JobStore.definition.
"""

import json
import re

from workflow_emulator import durations, jobspec
from workflow_emulator.errors import ApiError
from workflow_emulator.records import DEFAULT_JOB_TIMEOUT

OPERATIONS = ("update", "preview", "destroy", "refresh")
# The service's default image [DOC: self-hosted PULUMI_DEPLOY_DEFAULT_IMAGE_REFERENCE]; with
# isDefault the runner uses its own default instead [SPEC DockerImage.isDefault].
DEFAULT_IMAGE = {"reference": "pulumi/pulumi:latest", "isDefault": True}
EXECUTOR = '"$PULUMI_DEPLOY_EXECUTOR"'  # where the agent puts the executor [ASSUMED]
# Set by the service [DOC: deployments "Environment Variables"]; a deployment's own env may not
# set them, nor the stand-in's settings.
SERVICE_ENV = (
    "PULUMI_ACCESS_TOKEN",
    "PULUMI_CI_SYSTEM",
    "PULUMI_CI_BUILD_ID",
    "PULUMI_CI_BUILD_NUMBER",
    "PULUMI_CI_BUILD_URL",
    "PULUMI_CI_ORGANIZATION",
    "PULUMI_CI_PROJECT",
    "PULUMI_CI_STACK",
    "PULUMI_CI_OPERATION",
)
CI_SYSTEM = "Pulumi Deployments"  # [ASSUMED] the value is not on the record
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
KNOWN = {
    "stack",
    "project",
    "operation",
    "source",
    "preRunCommands",
    "config",
    "env",
    "image",
    "timeout",
    "pool",
}


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value) or value in (".", ".."):
        raise ApiError(400, f"{what} must be a name of letters, digits, _ . - (not {value!r})")
    return value


def target(spec: dict, pool_org: str) -> dict:
    """org, project and stack from "org/project/stack", or "stack" with "project"."""
    stack = spec.get("stack")
    if not isinstance(stack, str) or not stack:
        raise ApiError(400, 'stack must be "org/project/stack", or a stack name with project')
    parts = stack.split("/")
    if len(parts) == 3:
        org, project, name = parts
        if "project" in spec and spec["project"] != project:
            raise ApiError(400, f"project {spec['project']!r} differs from the stack's {project!r}")
    elif len(parts) == 1 and "project" in spec:
        org, project, name = pool_org, spec["project"], stack
    else:
        raise ApiError(400, 'stack must be "org/project/stack", or a stack name with project')
    if org != pool_org:
        raise ApiError(400, f"the stack's organization {org!r} is not the pool's ({pool_org!r})")
    return {
        "org": org,
        "project": _name(project, "project"),
        "stack": _name(name, "stack"),
    }


def _source(value: object) -> dict:
    if not isinstance(value, dict) or not isinstance(value.get("url"), str) or not value["url"]:
        raise ApiError(400, 'source must be {"url", "branch"?, "repoDir"?}')
    unknown = sorted(set(value) - {"url", "branch", "repoDir"})
    if unknown:
        raise ApiError(400, f"source: unknown field(s): {', '.join(unknown)}")
    env = {"PULUMI_DEPLOY_SOURCE_URL": value["url"]}
    branch = value.get("branch")
    if branch is not None:
        if not isinstance(branch, str) or not branch or branch.startswith("-"):
            raise ApiError(400, "source.branch must be a branch name")
        env["PULUMI_DEPLOY_SOURCE_BRANCH"] = branch
    repo_dir = value.get("repoDir")
    if repo_dir is not None:
        if (
            not isinstance(repo_dir, str)
            or not repo_dir
            or repo_dir.startswith("/")
            or ".." in repo_dir.split("/")
        ):
            raise ApiError(400, "source.repoDir must be a relative path inside the repository")
        env["PULUMI_DEPLOY_SOURCE_REPO_DIR"] = repo_dir
    return env


def _config(value: object) -> dict:
    """{key: "value" | {"value", "secret"?}} as the executor takes it: {key: {value, secret}}."""
    if not isinstance(value, dict):
        raise ApiError(400, 'config must be an object of key: "value" or {"value", "secret"}')
    out = {}
    for key, v in value.items():
        if not key or key.startswith("-"):
            raise ApiError(400, f"config key {key!r} is not valid")
        if isinstance(v, str):
            v = {"value": v}
        if (
            not isinstance(v, dict)
            or set(v) - {"value", "secret"}
            or not isinstance(v.get("value"), str)
            or not isinstance(v.get("secret", False), bool)
        ):
            raise ApiError(400, f'config.{key} must be a string or {{"value", "secret"?: bool}}')
        out[key] = {"value": v["value"], "secret": v.get("secret", False)}
    return out


def _pre_run(value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(c, str) and c.strip() for c in value):
        raise ApiError(400, "preRunCommands must be a list of non-empty shell commands")
    return value


def definition(spec: dict, where: dict, *, deployment_id: str, build_number: int) -> dict:
    """The JobDefinition of a deployment, but for what JobStore.definition adds when serving."""
    unknown = sorted(set(spec) - KNOWN)
    if unknown:
        raise ApiError(400, f"unknown deployment field(s): {', '.join(unknown)}")
    operation = spec.get("operation", "update")
    if operation not in OPERATIONS:
        raise ApiError(400, f"operation must be one of {', '.join(OPERATIONS)}")
    own = jobspec.env(spec.get("env", {}))
    env = {
        "PULUMI_CI_SYSTEM": CI_SYSTEM,
        "PULUMI_CI_BUILD_ID": deployment_id,
        "PULUMI_CI_BUILD_NUMBER": str(build_number),
        "PULUMI_CI_ORGANIZATION": where["org"],
        "PULUMI_CI_PROJECT": where["project"],
        "PULUMI_CI_STACK": where["stack"],
        "PULUMI_CI_OPERATION": operation,
        **_source(spec.get("source")),
    }
    config = _config(spec.get("config", {}))
    if config:
        env["PULUMI_DEPLOY_CONFIG"] = {"secret": json.dumps(config, sort_keys=True)}
    clash = sorted(n for n in own if n in SERVICE_ENV or n.startswith("PULUMI_DEPLOY_"))
    if clash:
        raise ApiError(400, f"env {', '.join(clash)}: set by the service, not the deployment")
    image = jobspec.image(spec.get("image", DEFAULT_IMAGE))
    image.setdefault("isDefault", False)
    steps = [
        {"name": "Get source", "run": ""},  # step 0: reserved, never run [RE]
        {"name": "Clone", "run": f"{EXECUTOR} clone"},
    ]
    for n, command in enumerate(_pre_run(spec.get("preRunCommands", [])), 1):
        # One step each: each pre-run command runs in its own shell [DOC].
        steps.append({"name": f"Pre-run command {n}", "run": command})
    steps.append({"name": f"Pulumi {operation}", "run": f"{EXECUTOR} {operation}"})
    return {
        "os": "linux",
        "architecture": "amd64",
        "image": image,
        "timeout": durations.to_go(
            jobspec.duration(spec.get("timeout", DEFAULT_JOB_TIMEOUT), "timeout")
        ),
        "env": {**env, **own},
        "steps": steps,
    }
