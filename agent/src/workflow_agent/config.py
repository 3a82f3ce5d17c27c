"""Agent configuration: the reference keys, discovery, the PULUMI_AGENT_* overlay, one-line errors.

`AgentConfig` does no I/O; `load_config` reads the file and the environment. Every problem is a
`ConfigError` whose text is one line, `<file or env var>: <key>: <reason>`, and never holds a
secret value.

Files written for upstream's agent load unchanged: both of its file names (the legacy one of
the 1.x agents too), every key of its docs, sample and drafts (`INERT_KEYS`: accepted, checked,
and reported as having no effect here), and its older value forms (a bare `token_expiration` is
seconds).
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from workflow_agent import durations

__all__ = [
    "CONFIG_FILE_NAME",
    "LEGACY_CONFIG_FILE_NAME",
    "ENV_PREFIX",
    "EXTENSION_KEYS",
    "REFERENCE_KEYS",
    "WORKFLOW_TYPES",
    "AgentConfig",
    "ConfigError",
    "LoadedConfig",
    "env_var",
    "load_config",
    "to_document",
    "validate_mapping",
]

CONFIG_FILE_NAME = "pulumi-workflow-agent.yaml"
# The name before upstream's 2.0 rename (customer-managed-deployment-agent 1.x): still found.
LEGACY_CONFIG_FILE_NAME = "pulumi-deployment-agent.yaml"
ENV_PREFIX = "PULUMI_AGENT_"
WORKFLOW_TYPES = ("deployment", "insights_scan", "policy_evaluation")
DEPLOY_TARGETS = ("docker", "kubernetes", "process")
DURATION_EXAMPLES = "(examples: 30s, 1m, 1h30m)"
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
}
_SECRET_PATTERN = re.compile(r"pul-[A-Za-z0-9_-]+")


class ConfigError(Exception):
    """A configuration problem; str() is one line and never contains a secret."""

    def __init__(self, source: str, key: str | None, reason: str) -> None:
        self.source = source
        self.key = key
        self.reason = _one_line(reason)
        where = _printable(source, limit=None)  # a path is never shortened: it says where to look
        text = f"{where}: {_printable(key)}: {self.reason}" if key else f"{where}: {self.reason}"
        super().__init__(text)


def _one_line(text: str) -> str:
    # Belt and braces: a pool token must never reach a log line, even via a YAML parser message.
    return _SECRET_PATTERN.sub("pul-***", " ".join(str(text).split()))


def _printable(text: str, limit: int | None = 80) -> str:
    """Names (keys, paths) as given, or JSON-quoted when they would break the one-line form.

    Keys longer than `limit` are shortened; file paths (limit=None) never are.
    """
    if text.isprintable() and text.strip() == text and text:
        return text if limit is None or len(text) <= limit else _show(text)
    return json.dumps(text, ensure_ascii=False) if limit is None else _show(text)


def _show(value: Any) -> str:
    """A short, quoted rendering of a user's (non-secret) value for an error message."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _fail(reason: str) -> PydanticCustomError:
    return PydanticCustomError("config", "{reason}", {"reason": reason})


# --- value coercion shared by file values and env-var strings -----------------------------


def parse_bool(value: Any) -> bool:
    """Go's strconv.ParseBool, plus real YAML booleans."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value in ("1", "t", "T", "TRUE", "true", "True"):
            return True
        if value in ("0", "f", "F", "FALSE", "false", "False"):
            return False
    raise _fail(f"{_show(value)} is not a boolean (use true or false)")


def _parse_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]+", value):
        return int(value)
    raise _fail(f"{_show(value)} is not a whole number")


def _parse_duration(value: Any, *, bare_seconds: bool = False) -> timedelta:
    """A Go duration; with `bare_seconds`, also a whole number of seconds (upstream's older
    docs spell token_expiration "the expiration in seconds")."""
    if isinstance(value, timedelta):
        return value
    whole = isinstance(value, int) and not isinstance(value, bool)
    if bare_seconds and (
        whole or (isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value))
    ):
        return timedelta(seconds=int(value))
    if isinstance(value, int) and not isinstance(value, bool):
        if value == 0:
            return timedelta(0)
        raise _fail(f"{value} is not a duration: add a unit {DURATION_EXAMPLES}")
    if isinstance(value, str):
        try:
            return durations.parse(value)
        except ValueError:
            pass
    raise _fail(f"{_show(value)} is not a duration {DURATION_EXAMPLES}")


def _parse_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise _fail(f"expected a string, got {_type_name(value)}")


def _choice(value: Any, choices: tuple[str, ...], what: str) -> str:
    if isinstance(value, str) and value in choices:
        return value
    hint = ""
    if isinstance(value, str):
        import difflib  # error paths only

        close = difflib.get_close_matches(value, choices, n=1)
        hint = f'; did you mean "{close[0]}"?' if close else ""
    raise _fail(f"{_show(value)} is not {what} (valid: {', '.join(choices)}){hint}")


# --- the model -----------------------------------------------------------------------------

_DURATION_FIELDS = (
    "token_expiration",
    "polling_interval",
    "job_status_loop_interval",
    "request_timeout",
    "request_retry_wait",
    "request_retry_max_wait",
    "circuit_breaker_timeout",
    "health_threshold",
    "drain_timeout",
)
_BOOL_FIELDS = (
    "single_run",
    "pull_image",
    "polling_interval_override",
    "syslog",
    "debug_keep_runner",
)
_INT_FIELDS = ("request_retry_count", "circuit_breaker_failures", "http_server_port", "slots")
_STR_FIELDS = (
    "working_directory",
    "shared_volume_directory",
    "oidc_token_file",
    "ca_bundle",
    "process_job_user",
    "workflow_runners_directory",
    "workflow_runners_embeddable",
)
_POSITIVE_DURATIONS = (
    "polling_interval",
    "job_status_loop_interval",
    "request_timeout",
    "circuit_breaker_timeout",
    "token_expiration",
    "health_threshold",
)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


ECS_KEYS = (
    "cluster",
    "subnets",
    "security_groups",
    "launch_type",
    "assign_public_ip",
    "task_definition_template_file",
)
_ECS_LISTS = ("subnets", "security_groups")


class EcsConfig(BaseModel):
    """Upstream's `ecs` block (its v2.3.0 target), with its defaults. Accepted so that an
    upstream file loads; it has no effect here (there is no ecs target)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster: str = ""
    subnets: list[str] = []
    security_groups: list[str] = []
    launch_type: Literal["FARGATE", "EC2"] = "FARGATE"
    assign_public_ip: bool = False
    task_definition_template_file: str = ""

    @field_validator("cluster", "task_definition_template_file", mode="before")
    @classmethod
    def _strs(cls, v: Any) -> str:
        return _parse_str(v)

    @field_validator(*_ECS_LISTS, mode="before")
    @classmethod
    def _lists(cls, v: Any) -> list[str]:
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            raise _fail(f"expected a list of ids, got {_show(v)}")
        return v

    @field_validator("launch_type", mode="before")
    @classmethod
    def _launch_type(cls, v: Any) -> str:
        return _choice(v, ("FARGATE", "EC2"), "an ECS launch type")

    @field_validator("assign_public_ip", mode="before")
    @classmethod
    def _bool(cls, v: Any) -> bool:
        return parse_bool(v)


class AgentConfig(BaseModel):
    """The agent's settings. Field names are the reference keys; no I/O happens here."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Upstream reference keys, with the reference's defaults.
    token: SecretStr | None = None
    service_url: str = "https://api.pulumi.com"
    working_directory: str = ""  # "" = the directory of the agent executable
    shared_volume_directory: str = ""  # "" = the OS temp directory
    deploy_target: Literal["docker", "kubernetes", "process"] = "docker"
    single_run: bool = False
    pull_image: bool = True
    enabled_workflow_types: list[Literal["deployment", "insights_scan", "policy_evaluation"]] = (
        list(WORKFLOW_TYPES)
    )
    env_forward_allowlist: list[str] = []
    oidc_token_file: str = ""
    organization_name: str = ""
    runner_pool_id: str = ""
    token_expiration: timedelta | None = None
    polling_interval: timedelta = timedelta(minutes=1)
    polling_interval_override: bool = False
    job_status_loop_interval: timedelta = timedelta(seconds=30)
    request_timeout: timedelta = timedelta(seconds=30)
    request_retry_count: int = 2
    request_retry_wait: timedelta = timedelta(seconds=20)
    request_retry_max_wait: timedelta = timedelta(minutes=2)
    circuit_breaker_failures: int = 2
    circuit_breaker_timeout: timedelta = timedelta(minutes=10)
    http_server_port: int = 8080
    health_threshold: timedelta | None = None
    syslog: bool = False

    # Upstream keys without effect here (INERT_KEYS; working_directory above is one too).
    workflow_runners_directory: str = ""
    workflow_runners_embeddable: str = ""
    ecs: EcsConfig = EcsConfig()

    # Extensions of this agent.
    slots: int = 1
    drain_timeout: timedelta = timedelta(minutes=5)
    log_format: Literal["text", "json"] = "text"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    debug_keep_runner: bool = False
    ca_bundle: str = ""
    # process target: the unprivileged user steps run as ("" = the agent's own user).
    process_job_user: str = ""

    @field_validator("token", mode="before")
    @classmethod
    def _token(cls, v: Any) -> Any:
        # Describe a bad token, never echo it.
        if isinstance(v, SecretStr):
            v = v.get_secret_value()
        if not isinstance(v, str):
            raise _fail(f"expected a string, got {_type_name(v)} (value not shown)")
        if v == "":
            return None
        if any(c.isspace() for c in v):
            raise _fail("contains whitespace (value not shown)")
        if not v.isprintable():
            raise _fail("contains control characters (value not shown)")
        return v

    @field_validator(*_DURATION_FIELDS, mode="before")
    @classmethod
    def _durations(cls, v: Any, info) -> Any:
        if v == "" and info.field_name in ("token_expiration", "health_threshold"):
            return None  # the reference's "" means "not set"
        td = _parse_duration(v, bare_seconds=info.field_name == "token_expiration")
        if td < timedelta(0):
            raise _fail(f"{_show(v)} is negative; use a positive duration")
        if td == timedelta(0) and info.field_name in _POSITIVE_DURATIONS:
            raise _fail(f"{_show(v)} must be longer than 0s {DURATION_EXAMPLES}")
        return td

    @field_validator(*_BOOL_FIELDS, mode="before")
    @classmethod
    def _bools(cls, v: Any) -> bool:
        return parse_bool(v)

    @field_validator(*_INT_FIELDS, mode="before")
    @classmethod
    def _ints(cls, v: Any, info) -> int:
        n = _parse_int(v)
        low, high = {
            "request_retry_count": (0, 100),
            "circuit_breaker_failures": (1, 1000),
            "http_server_port": (0, 65535),
            "slots": (1, 150),
        }[info.field_name]
        if not low <= n <= high:
            raise _fail(f"{n} is out of range ({low}..{high})")
        return n

    @field_validator(*_STR_FIELDS, mode="before")
    @classmethod
    def _strs(cls, v: Any) -> str:
        return _parse_str(v)

    @field_validator("ecs", mode="before")
    @classmethod
    def _ecs(cls, v: Any) -> Any:
        if not isinstance(v, dict | EcsConfig):
            raise _fail(f"expected a mapping of ECS settings, got {_type_name(v)}")
        return v

    @field_validator("organization_name", "runner_pool_id", mode="before")
    @classmethod
    def _ids(cls, v: Any) -> str:
        # Unquoted numeric IDs arrive from YAML as ints.
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        return _parse_str(v)

    @field_validator("service_url", mode="before")
    @classmethod
    def _service_url(cls, v: Any) -> str:
        url = _parse_str(v).strip().rstrip("/")
        if not re.fullmatch(r"https?://[^/\s?#]+(/\S*)?", url):
            raise _fail(f"{_show(v)} is not an http(s) URL (example: https://api.pulumi.com)")
        return url

    @field_validator("deploy_target", mode="before")
    @classmethod
    def _deploy_target(cls, v: Any) -> str:
        if v == "ecs":
            raise _fail('"ecs" is not supported by this agent (use docker, kubernetes or process)')
        return _choice(v, DEPLOY_TARGETS, "a deploy target")

    @field_validator("log_format", mode="before")
    @classmethod
    def _log_format(cls, v: Any) -> str:
        return _choice(v, ("text", "json"), "a log format")

    @field_validator("log_level", mode="before")
    @classmethod
    def _log_level(cls, v: Any) -> str:
        return _choice(v, ("debug", "info", "warning", "error"), "a log level")

    @field_validator("enabled_workflow_types", mode="before")
    @classmethod
    def _workflow_types(cls, v: Any) -> list[str]:
        if not isinstance(v, list):
            raise _fail(f"expected a list of workflow types, got {_type_name(v)}")
        out: list[str] = []
        for item in v:
            name = _choice(item, WORKFLOW_TYPES, "a workflow type")
            if name not in out:
                out.append(name)
        if not out:
            raise _fail(f"must list at least one of {', '.join(WORKFLOW_TYPES)}")
        return out

    @field_validator("env_forward_allowlist", mode="before")
    @classmethod
    def _allowlist(cls, v: Any) -> list[str]:
        if not isinstance(v, list):
            raise _fail(f"expected a list of environment variable names, got {_type_name(v)}")
        for item in v:
            if not isinstance(item, str) or not _ENV_NAME.fullmatch(item):
                raise _fail(f"{_show(item)} is not an environment variable name")
        return list(v)

    @model_validator(mode="after")
    def _credentials(self) -> AgentConfig:
        if self.oidc_token_file:
            for key in ("organization_name", "runner_pool_id"):
                if not getattr(self, key):
                    raise PydanticCustomError(
                        "config",
                        "{reason}",
                        {"key": key, "reason": "required when oidc_token_file is set"},
                    )
        elif self.token is None:
            raise PydanticCustomError(
                "config",
                "{reason}",
                {
                    "key": "token",
                    "reason": "not set: set token (PULUMI_AGENT_TOKEN), or oidc_token_file "
                    "with organization_name and runner_pool_id",
                },
            )
        if self.request_retry_max_wait < self.request_retry_wait:
            raise PydanticCustomError(
                "config",
                "{reason}",
                {
                    "key": "request_retry_max_wait",
                    "reason": f"{durations.format(self.request_retry_max_wait)} is shorter than "
                    f"request_retry_wait ({durations.format(self.request_retry_wait)})",
                },
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
    "process_job_user",
)
ALL_KEYS = tuple(AgentConfig.model_fields)
REFERENCE_KEYS = tuple(k for k in ALL_KEYS if k not in EXTENSION_KEYS)
_LIST_SEPARATORS = {"enabled_workflow_types": ",", "env_forward_allowlist": None}
for _key in _ECS_LISTS:
    _LIST_SEPARATORS[f"ecs.{_key}"] = None  # space-separated, as the docs say


def env_var(key: str) -> str:
    """The environment variable that overrides `key`."""
    return ENV_PREFIX + key.upper()


# --- validation with one-line errors ----------------------------------------------------


def _unknown_key_reason(key: Any, known: tuple[str, ...] = ALL_KEYS) -> str:
    if not isinstance(key, str):
        return "keys must be strings"
    import difflib  # error paths only

    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f'unknown key; did you mean "{close[0]}"?' if close else "unknown key"


def _is_text(value: Any) -> bool:
    if not isinstance(value, str):
        return True  # not a string: the schema judges it
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _origin(origins: dict[str, str], key: str, default_source: str) -> str:
    return origins.get(key) or origins.get(key.split(".", 1)[0]) or default_source


def _leaves(key: str, value: Any) -> list[tuple[str, Any]]:
    """(dotted key, value) of every scalar in a value: what the UTF-8 check looks at."""
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in _leaves(f"{key}.{k}", v)]
    if isinstance(value, list):
        return [(key, v) for v in value]
    return [(key, value)]


def _validate(data: dict, origins: dict[str, str], default_source: str) -> AgentConfig:
    for key in data:
        if key not in ALL_KEYS and key not in IGNORED_KEYS:
            raise ConfigError(
                _origin(origins, str(key), default_source), str(key), _unknown_key_reason(key)
            )
    ecs = data.get("ecs")
    if isinstance(ecs, dict):
        for key in ecs:
            if key not in ECS_KEYS:
                where = _origin(origins, f"ecs.{key}", default_source)
                raise ConfigError(where, f"ecs.{key}", _unknown_key_reason(key, ECS_KEYS))
    values = {k: v for k, v in data.items() if k in ALL_KEYS and v is not None}
    for key, value in values.items():
        # Lone surrogates (undecodable bytes in an environment variable, or a YAML "\ud800")
        # are not text: pydantic cannot even render its error about them.
        for leaf, v in _leaves(key, value):
            if not _is_text(v):
                where = _origin(origins, leaf, default_source)
                raise ConfigError(where, leaf, "not valid UTF-8 text")
    try:
        return AgentConfig(**values)
    except ValidationError as exc:
        err = exc.errors(include_url=False, include_input=False)[0]
        ctx = err.get("ctx") or {}
        loc = err.get("loc") or ()
        key = str(ctx.get("key") or (".".join(str(x) for x in loc) if loc else "config"))
        reason = ctx.get("reason") or err.get("msg", "invalid value")
        if key in SECRET_KEYS and not ctx.get("reason"):
            reason = "invalid value (value not shown)"
        raise ConfigError(_origin(origins, key, default_source), key, reason) from None


def validate_mapping(data: dict, source: str = "<config>") -> AgentConfig:
    """Validate a mapping of reference keys (e.g. from the Ansible action plugin)."""
    if not isinstance(data, dict):
        raise ConfigError(
            source, None, f"top level must be a mapping of settings, got {_type_name(data)}"
        )
    return _validate(data, {}, source)


# --- files, discovery and the environment --------------------------------------------------


@dataclass(frozen=True)
class LoadedConfig:
    config: AgentConfig
    source: str | None  # the file that was read, or None (defaults + environment only)
    origins: dict[str, str] = field(default_factory=dict)  # key -> file path or env var name
    searched: tuple[str, ...] = ()  # where discovery looked, in order
    # (level, message) for the operator, logged once at start (`run`) or shown by `check`:
    # a legacy-named file that lost to the new name, keys that have no effect here.
    notices: tuple[tuple[str, str], ...] = ()


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys instead of silently keeping the last one."""


def _mapping_no_duplicates(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False):
    seen: set = set()
    for key_node, _value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, str) and key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key if isinstance(key, str) else id(key_node))
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_no_duplicates
)


def read_file(path: Path) -> dict:
    """Read and parse one config file into a mapping; ConfigError on any problem."""
    name = str(path)
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise ConfigError(name, None, "cannot read: is a directory") from None
    except OSError as exc:
        raise ConfigError(name, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(name, None, f"not valid UTF-8 (byte offset {exc.start})") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or "cannot parse"
        where = f"line {mark.line + 1}" if mark is not None else "yaml"
        raise ConfigError(name, where, f"invalid YAML: {problem}") from None
    if data is None:
        raise ConfigError(name, None, "the file is empty (expected settings such as token: ...)")
    if not isinstance(data, dict):
        raise ConfigError(
            name, None, f"top level must be a mapping of settings, got {_type_name(data)}"
        )
    return data


def candidate_dirs(
    *,
    cwd: str | Path | None = None,
    home: str | Path | None = None,
    etc: str | Path = "/etc",
    exe_dir: str | Path | None = None,
) -> list[Path]:
    """Discovery order of the reference: current dir, home, /etc, the executable's dir; a
    directory that is one of the earlier ones (cwd == $HOME, a symlink) is looked at once."""
    dirs = [
        Path(cwd) if cwd is not None else Path.cwd(),
        Path(home) if home is not None else Path.home(),
        Path(etc),
        Path(exe_dir) if exe_dir is not None else Path(sys.argv[0] or ".").resolve().parent,
    ]
    out: list[Path] = []
    seen: set[str] = set()
    for d in dirs:
        key = os.path.realpath(d)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def candidate_paths(**dirs: Any) -> list[Path]:
    """Every file discovery looks for, in order: the current name in each directory, then the
    legacy name in each. The current name wins wherever it is, as with upstream's 2.x agent."""
    found = candidate_dirs(**dirs)
    return [d / name for name in (CONFIG_FILE_NAME, LEGACY_CONFIG_FILE_NAME) for d in found]


def env_overlay(env: os._Environ | dict) -> tuple[dict, dict[str, str]]:
    """The PULUMI_AGENT_<KEY> values for known keys, parsed into file-like values.

    Variables that are not config keys (PULUMI_AGENT_IMAGE, PULUMI_AGENT_CONFIG, ...) belong to
    other parts of the agent and are ignored here. Empty variables count as unset.
    """
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    keys = [k for k in ALL_KEYS if k != "ecs"] + [f"ecs.{k}" for k in ECS_KEYS]  # no version
    for key in keys:
        name = env_var(key.replace(".", "_"))  # ecs.cluster: PULUMI_AGENT_ECS_CLUSTER
        raw = env.get(name)
        if raw is None or raw == "":
            continue
        if key in _LIST_SEPARATORS:
            sep = _LIST_SEPARATORS[key]
            value: Any = [p.strip() for p in raw.split(sep) if p.strip()]
        else:
            value = raw
        if key.startswith("ecs."):
            values.setdefault("ecs", {})[key[4:]] = value
        else:
            values[key] = value
        origins[key] = name
    return values, origins


def load_config(
    path: str | Path | None = None,
    *,
    env: os._Environ | dict | None = None,
    cwd: str | Path | None = None,
    home: str | Path | None = None,
    exe_dir: str | Path | None = None,
    etc: str | Path = "/etc",
) -> LoadedConfig:
    """Find and read the config file, overlay PULUMI_AGENT_* variables, validate."""
    env = os.environ if env is None else env
    searched: tuple[str, ...] = ()
    notices: list[tuple[str, str]] = []
    if path is None and env.get(ENV_PREFIX + "CONFIG"):
        path = env[ENV_PREFIX + "CONFIG"]
    if path is not None:
        chosen: Path | None = Path(path)
    else:
        candidates = candidate_paths(cwd=cwd, home=home, etc=etc, exe_dir=exe_dir)
        searched = tuple(str(p) for p in candidates)
        existing = [p for p in candidates if p.is_file()]
        chosen = existing[0] if existing else None
        legacy = [p for p in existing if p.name == LEGACY_CONFIG_FILE_NAME]
        if chosen is not None and chosen.name == CONFIG_FILE_NAME and legacy:
            notices.append(
                (
                    "warning",
                    f"{legacy[0]}: not read: {chosen} (the current file name) wins over the "
                    f"legacy {LEGACY_CONFIG_FILE_NAME}; merge the two and remove the legacy one",
                )
            )

    data: dict = {}
    origins: dict[str, str] = {}
    default_source = CONFIG_FILE_NAME
    if chosen is not None:
        data = read_file(chosen)
        default_source = str(chosen)
        origins = {str(k): str(chosen) for k in data}
    elif not env.get(env_var("token")) and not env.get(env_var("oidc_token_file")):
        raise ConfigError(
            CONFIG_FILE_NAME,
            None,
            f"no config file found (looked in: {', '.join(searched)}) and "
            f"{env_var('token')} is not set",
        )
    overlay, env_origins = env_overlay(env)
    merged = {**data, **overlay}
    if isinstance(data.get("ecs"), dict) and "ecs" in overlay:
        merged["ecs"] = {**data["ecs"], **overlay["ecs"]}  # per setting, the environment wins
    elif "ecs" in data and "ecs" in overlay:
        merged["ecs"] = data["ecs"]  # not a mapping: its error is the one to report
    origins.update(env_origins)
    cfg = _validate(merged, origins, default_source)
    for key, why in INERT_KEYS.items():
        if key in merged:
            notices.append(("info", f"{key}: has no effect here: {why}"))
    for name, why in INERT_ENV.items():
        if env.get(name):
            notices.append(("info", f"{name}: has no effect here: {why}"))
    return LoadedConfig(
        config=cfg,
        source=str(chosen) if chosen is not None else None,
        origins={k: origins.get(k, "default") for k in ALL_KEYS},
        searched=searched,
        notices=tuple(notices),
    )


# --- rendering ------------------------------------------------------------------------------


def _render(key: str, value: Any, reveal_secrets: bool) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value() if reveal_secrets else "***"
    if isinstance(value, timedelta):
        return durations.format(value)
    if value is None:
        return ""
    if isinstance(value, list):
        return list(value)
    if isinstance(value, BaseModel):  # the ecs block
        return value.model_dump()
    return value


def to_document(
    cfg: AgentConfig, *, reveal_secrets: bool = False, include_defaults: bool = False
) -> dict:
    """The reference keys (+ extensions that differ from their defaults) as a YAML-ready dict.

    include_defaults=True also lists extensions left at their defaults (for `check`).
    """
    doc: dict[str, Any] = {}
    for key in ALL_KEYS:
        value = getattr(cfg, key)
        default = AgentConfig.model_fields[key].default
        if key in EXTENSION_KEYS and not include_defaults and value == default:
            continue
        doc[key] = _render(key, value, reveal_secrets)
    return doc
