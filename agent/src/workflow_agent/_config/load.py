"""Finding and reading the config file, the PULUMI_AGENT_* overlay, notices for the operator."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from workflow_agent._config.errors import ConfigError, type_name
from workflow_agent._config.model import ALL_KEYS, ECS_KEYS, INERT_ENV, INERT_KEYS, AgentConfig
from workflow_agent._config.validate import validate

CONFIG_FILE_NAME = "pulumi-workflow-agent.yaml"
# The name before upstream's 2.0 rename (customer-managed-deployment-agent 1.x): still found.
LEGACY_CONFIG_FILE_NAME = "pulumi-deployment-agent.yaml"
ENV_PREFIX = "PULUMI_AGENT_"
# How list settings are split in the environment (None: on whitespace, as the docs say).
_LIST_SEPARATORS = {
    "enabled_workflow_types": ",",
    "env_forward_allowlist": None,
    "ecs.subnets": None,
    "ecs.security_groups": None,
}


def env_var(key: str) -> str:
    """The environment variable that overrides `key`."""
    return ENV_PREFIX + key.upper()


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
            name, None, f"top level must be a mapping of settings, got {type_name(data)}"
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
    cfg = validate(merged, origins, default_source)
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
