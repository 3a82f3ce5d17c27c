"""A mapping of settings → AgentConfig, or one ConfigError naming the key and where it came from."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from workflow_agent._config.errors import ConfigError, type_name
from workflow_agent._config.model import (
    ALL_KEYS,
    ECS_KEYS,
    IGNORED_KEYS,
    SECRET_KEYS,
    AgentConfig,
)


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


def validate(data: dict, origins: dict[str, str], default_source: str) -> AgentConfig:
    """`data` (file values overlaid with the environment's) as an AgentConfig; `origins` maps a
    key to the file or variable it came from, for the error."""
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
            source, None, f"top level must be a mapping of settings, got {type_name(data)}"
        )
    return validate(data, {}, source)
