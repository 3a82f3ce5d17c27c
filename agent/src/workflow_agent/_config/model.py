"""The config model: every key, its type (declared once, see fields.py) and default, and the
checks across keys. No I/O happens here."""

from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, SecretStr, model_validator

from workflow_agent import durations
from workflow_agent._config.errors import fail, type_name
from workflow_agent._config.fields import (
    Count,
    Duration,
    EnvNames,
    Expiration,
    Flag,
    Id,
    Ids,
    OneOf,
    OptionalDuration,
    PositiveDuration,
    Text,
    Url,
    choice,
)

WORKFLOW_TYPES = ("deployment", "insights_scan", "policy_evaluation")
DEPLOY_TARGETS = ("docker", "kubernetes", "process")
JOB_SECURITY_PROFILES = ("image", "restricted")
SECRET_KEYS = frozenset({"token"})
# In upstream's docs examples (`version: v0.0.5`) but no setting of any agent: accepted and left
# out of the settings (and so of files the collection renders), reported like INERT_KEYS.
IGNORED_KEYS = frozenset({"version"})
# Upstream keys that do nothing in this agent: accepted (and type-checked), and reported once at
# start, at info, with the reason.
_NO_RUNNER_BINARIES = "this agent runs steps itself and loads no workflow-runner binaries"
INERT_KEYS = {
    "version": "an upstream docs example key, not a setting",
    "working_directory": _NO_RUNNER_BINARIES,
    "workflow_runners_directory": _NO_RUNNER_BINARIES + " (upstream's sample config key)",
    "workflow_runners_embeddable": _NO_RUNNER_BINARIES + " (upstream's sample config key)",
    "ecs": "this agent has no ecs deploy target (deploy_target: docker, kubernetes or process)",
}
# Environment-only upstream settings that do nothing here (the others, PULUMI_AGENT_NUM_CPUS and
# the like, belong to the kubernetes target).
INERT_ENV = {
    "PULUMI_AGENT_IMAGE": "the kubernetes target copies no runner binary into its pods",
    "PULUMI_AGENT_IMAGE_PULL_POLICY": (
        "upstream's pull policy of PULUMI_AGENT_IMAGE, which this agent does not use (the job "
        "image's: WORKFLOW_AGENT_JOB_IMAGE_PULL_POLICY)"
    ),
}


def _token(v: Any) -> Any:
    # Describe a bad token, never echo it.
    if isinstance(v, SecretStr):
        v = v.get_secret_value()
    if not isinstance(v, str):
        raise fail(f"expected a string, got {type_name(v)} (value not shown)")
    if v == "":
        return None
    if any(c.isspace() for c in v):
        raise fail("contains whitespace (value not shown)")
    if not v.isprintable():
        raise fail("contains control characters (value not shown)")
    return v


def _deploy_target(v: Any) -> str:
    if v == "ecs":
        raise fail('"ecs" is not supported by this agent (use docker, kubernetes or process)')
    return choice(v, DEPLOY_TARGETS, "a deploy target")


def _workflow_types(v: Any) -> list[str]:
    if not isinstance(v, list):
        raise fail(f"expected a list of workflow types, got {type_name(v)}")
    out: list[str] = []
    for item in v:
        name = choice(item, WORKFLOW_TYPES, "a workflow type")
        if name not in out:
            out.append(name)
    if not out:
        raise fail(f"must list at least one of {', '.join(WORKFLOW_TYPES)}")
    return out


def _ecs(v: Any) -> Any:
    if not isinstance(v, dict | EcsConfig):
        raise fail(f"expected a mapping of ECS settings, got {type_name(v)}")
    return v


class EcsConfig(BaseModel):
    """Upstream's `ecs` block (its v2.3.0 target), with its defaults. Accepted so that an
    upstream file loads; it has no effect here (there is no ecs target)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster: Text = ""
    subnets: Ids = []
    security_groups: Ids = []
    launch_type: OneOf(("FARGATE", "EC2"), "an ECS launch type") = "FARGATE"
    assign_public_ip: Flag = False
    task_definition_template_file: Text = ""


ECS_KEYS = tuple(EcsConfig.model_fields)


class AgentConfig(BaseModel):
    """The agent's settings. Field names are the reference keys; no I/O happens here."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Upstream reference keys, with the reference's defaults.
    token: Annotated[SecretStr | None, BeforeValidator(_token)] = None
    service_url: Url = "https://api.pulumi.com"
    working_directory: Text = ""  # "" = the directory of the agent executable
    shared_volume_directory: Text = ""  # "" = the OS temp directory
    deploy_target: Annotated[Literal[DEPLOY_TARGETS], BeforeValidator(_deploy_target)] = "docker"
    single_run: Flag = False
    pull_image: Flag = True
    enabled_workflow_types: Annotated[
        list[Literal[WORKFLOW_TYPES]], BeforeValidator(_workflow_types)
    ] = list(WORKFLOW_TYPES)
    env_forward_allowlist: EnvNames = []
    oidc_token_file: Text = ""
    organization_name: Id = ""
    runner_pool_id: Id = ""
    token_expiration: Expiration = None
    polling_interval: PositiveDuration = timedelta(minutes=1)
    polling_interval_override: Flag = False
    job_status_loop_interval: PositiveDuration = timedelta(seconds=30)
    request_timeout: PositiveDuration = timedelta(seconds=30)
    request_retry_count: Count(0, 100) = 2
    request_retry_wait: Duration = timedelta(seconds=20)
    request_retry_max_wait: Duration = timedelta(minutes=2)
    circuit_breaker_failures: Count(1, 1000) = 2
    circuit_breaker_timeout: PositiveDuration = timedelta(minutes=10)
    http_server_port: Count(0, 65535) = 8080
    health_threshold: OptionalDuration = None
    syslog: Flag = False

    # Upstream keys without effect here (INERT_KEYS; working_directory above is one too).
    workflow_runners_directory: Text = ""
    workflow_runners_embeddable: Text = ""
    ecs: Annotated[EcsConfig, BeforeValidator(_ecs)] = EcsConfig()

    # Extensions of this agent.
    slots: Count(1, 150) = 1
    drain_timeout: Duration = timedelta(minutes=5)
    log_format: OneOf(("text", "json"), "a log format") = "text"
    log_level: OneOf(("debug", "info", "warning", "error"), "a log level") = "info"
    debug_keep_runner: Flag = False
    ca_bundle: Text = ""
    # The runner's built-in default image [SPEC DockerImage.isDefault]: for jobs that ask for it
    # or name none. pulumi/pulumi is the service's default job image [DOC].
    default_image: Text = "pulumi/pulumi:latest"
    # Jobs: the agent's CA bundle (trust.py); the Docker engine (docker target); the image's own
    # user, or the hardened non-root profile.
    job_ca_bundle: Flag = False
    job_docker: Flag = False
    job_security_profile: OneOf(JOB_SECURITY_PROFILES, "a job security profile") = "image"
    # process target: the unprivileged user steps run as ("" = the agent's own user).
    process_job_user: Text = ""

    @model_validator(mode="after")
    def _credentials(self) -> "AgentConfig":
        if self.oidc_token_file:
            for key in ("organization_name", "runner_pool_id"):
                if not getattr(self, key):
                    raise fail("required when oidc_token_file is set", key)
        elif self.token is None:
            raise fail(
                "not set: set token (PULUMI_AGENT_TOKEN), or oidc_token_file "
                "with organization_name and runner_pool_id",
                "token",
            )
        if not self.default_image.strip():
            raise fail("must name an image", "default_image")
        if self.request_retry_max_wait < self.request_retry_wait:
            raise fail(
                f"{durations.format(self.request_retry_max_wait)} is shorter than "
                f"request_retry_wait ({durations.format(self.request_retry_wait)})",
                "request_retry_max_wait",
            )
        return self

    @property
    def effective_health_threshold(self) -> timedelta:
        if self.health_threshold is not None:
            return self.health_threshold
        return 2 * max(self.polling_interval, self.job_status_loop_interval)


EXTENSION_KEYS = (
    "slots",
    "drain_timeout",
    "log_format",
    "log_level",
    "debug_keep_runner",
    "ca_bundle",
    "default_image",
    "job_ca_bundle",
    "job_docker",
    "job_security_profile",
    "process_job_user",
)
ALL_KEYS = tuple(AgentConfig.model_fields)
REFERENCE_KEYS = tuple(k for k in ALL_KEYS if k not in EXTENSION_KEYS)
