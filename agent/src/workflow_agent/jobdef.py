"""What the service hands the agent: the claim and the job definition, parsed and checked.

Shapes: docs/protocol.md. Anything malformed raises `BadPayload` with a short reason, so a
broken server answer fails one job cleanly instead of crashing a slot.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from workflow_agent import durations

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A shell is a program name or path, run as `<shell> -c <step>`; no arguments, no spaces.
_SHELL = re.compile(r"[A-Za-z0-9_./+-]{1,200}")


class BadPayload(ValueError):
    """The service sent something this agent cannot use."""


def _str(data: Mapping, key: str, *, required: bool = True) -> str:
    value = data.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise BadPayload(f"{key}: expected a non-empty string")
    return value


@dataclass(frozen=True)
class Claim:
    """An `AgentWorkflowDefinition`: one claimed job."""

    job_id: str
    job_token: str = field(repr=False)
    run_id: str
    type_specific_id: str
    type: str = "deployment"
    oidc_token: str = field(default="", repr=False)

    @classmethod
    def parse(cls, data: Any, default_type: str = "deployment") -> Claim:
        if not isinstance(data, dict):
            raise BadPayload("claim: expected a JSON object")
        type_specific = _str(data, "typeSpecificID", required=False) or _str(
            data, "deploymentID", required=False
        )
        return cls(
            job_id=_str(data, "jobID"),
            job_token=_str(data, "jobToken"),
            run_id=_str(data, "runID", required=False),
            type_specific_id=type_specific,
            type=_str(data, "type", required=False) or default_type,
            oidc_token=_str(data, "oidcToken", required=False),
        )


@dataclass(frozen=True)
class StepDef:
    index: int
    name: str
    run: str
    timeout: float | None  # seconds
    working_dir: str = ""  # steps[].workingDir [RE]


@dataclass(frozen=True)
class Definition:
    image: str
    # image.isDefault [SPEC DockerImage]: use the runner's built-in default image instead.
    image_is_default: bool = field(default=False, kw_only=True)
    credentials: tuple[str, str] | None = field(repr=False)
    timeout: float | None  # seconds
    env: dict[str, str] = field(repr=False)
    secrets: tuple[str, ...] = field(repr=False)
    steps: tuple[StepDef, ...]  # step 0 (reserved: source checkout) already dropped
    shell: str = ""  # [RE]; "" means /bin/sh


def _duration(value: Any, where: str) -> float | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadPayload(f"{where}: expected a duration string")
    try:
        seconds = durations.parse_ns(value) / 1e9
    except ValueError:
        raise BadPayload(f"{where}: {value[:40]!r} is not a duration") from None
    if seconds <= 0:
        raise BadPayload(f"{where}: {value[:40]!r} is not a positive duration")
    return seconds


def _value(value: Any, where: str, secrets: list[str]) -> str:
    """A WorkflowValue: a string, or {"secret": "..."} (kept, and remembered for redaction)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("secret"), str):
        secrets.append(value["secret"])
        return value["secret"]
    raise BadPayload(f'{where}: expected a string or {{"secret": ...}}')


def parse_definition(data: Any) -> Definition:
    if not isinstance(data, dict):
        raise BadPayload("job definition: expected a JSON object")
    secrets: list[str] = []
    image = data.get("image") or {}
    if not isinstance(image, dict):
        raise BadPayload("image: expected an object")
    reference = _str(image, "reference", required=False)
    is_default = image.get("isDefault", False)
    if not isinstance(is_default, bool):
        raise BadPayload("image.isDefault: expected true or false")
    credentials = None
    creds = image.get("credentials")
    if creds is not None:
        if not isinstance(creds, dict):
            raise BadPayload("image.credentials: expected an object")
        user = _value(creds.get("username", ""), "image.credentials.username", [])
        password = _value(creds.get("password", ""), "image.credentials.password", secrets)
        secrets.append(password)
        credentials = (user, password)
    env_in = data.get("env") or {}
    if not isinstance(env_in, dict):
        raise BadPayload("env: expected an object")
    env: dict[str, str] = {}
    for name, value in env_in.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise BadPayload(f"env: {str(name)[:40]!r} is not a variable name")
        env[name] = _value(value, f"env.{name}", secrets)
    steps_in = data.get("steps")
    if not isinstance(steps_in, list):
        raise BadPayload("steps: expected a list")
    steps: list[StepDef] = []
    for index, step in enumerate(steps_in):
        if not isinstance(step, dict):
            raise BadPayload(f"steps[{index}]: expected an object")
        if index == 0:
            continue  # reserved for the source checkout; never run by the agent
        working_dir = _str(step, "workingDir", required=False)
        if "\0" in working_dir or "\n" in working_dir:
            raise BadPayload(f"steps[{index}].workingDir: not a path")
        steps.append(
            StepDef(
                index=index,
                name=_str(step, "name", required=False) or f"step {index}",
                run=_str(step, "run", required=False),
                timeout=_duration(step.get("timeout"), f"steps[{index}].timeout"),
                working_dir=working_dir,
            )
        )
    shell = _str(data, "shell", required=False)
    if shell and not _SHELL.fullmatch(shell):
        raise BadPayload(f"shell: {shell[:40]!r} is not a program name or path")
    return Definition(
        image=reference,
        image_is_default=is_default,
        credentials=credentials,
        timeout=_duration(data.get("timeout"), "timeout"),
        env=env,
        secrets=tuple(s for s in secrets if s),
        steps=tuple(steps),
        shell=shell,
    )


def job_image(definition: Definition, default_image: str, override: str) -> str:
    """The image a job runs in: the agent's PULUMI_DEPLOY_OVERRIDE_IMAGE_REFERENCE [REPO 1.3.5]
    before anything; the built-in default when the job asks for it (isDefault [SPEC]) or names
    none; else the job's own reference."""
    if override:
        return override
    if definition.image_is_default or not definition.image:
        return default_image
    return definition.image


def build_env(
    job_env: Mapping[str, str],
    allowlist: Iterable[str],
    host_env: Mapping[str, str],
    withheld: Iterable[str] = (),
) -> tuple[dict[str, str], list[str]]:
    """The job's environment: its own env + the allowlisted host variables + DOCKER_HOST.

    Nothing else from the host gets in. Host variables whose value holds one of the agent's own
    credentials (`withheld`) are never forwarded; their names are returned so the caller can warn.
    """
    env = dict(job_env)
    refused: list[str] = []
    secrets = [s for s in withheld if s]
    for name in [*allowlist, "DOCKER_HOST"]:
        value = host_env.get(name)
        if value is None:
            continue
        if any(s in value for s in secrets):
            refused.append(name)
            continue
        env[name] = value
    return env, refused
