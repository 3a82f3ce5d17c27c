"""AgentConfig → the YAML-ready document of its keys (`check`, the Ansible action plugin)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel, SecretStr

from workflow_agent import durations
from workflow_agent._config.model import ALL_KEYS, EXTENSION_KEYS, AgentConfig


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
