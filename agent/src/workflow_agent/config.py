"""Agent configuration: the reference keys, discovery, the PULUMI_AGENT_* overlay, one-line errors.

`AgentConfig` does no I/O; `load_config` reads the file and the environment. Every problem is a
`ConfigError` whose text is one line, `<file or env var>: <key>: <reason>`, and never holds a
secret value.

Files written for upstream's agent load unchanged: both of its file names (the legacy one of
the 1.x agents too), every key of its docs, sample and drafts (`INERT_KEYS`: accepted, checked,
and reported as having no effect here), and its older value forms (a bare `token_expiration` is
seconds).

This module is the public face (the agent, the CLI and the collection's `agent_config` action
import from here); the parts live in `workflow_agent._config`, one job each:
errors (ConfigError, one-line messages) → fields (value coercion, field types) → model
(AgentConfig) → validate (mapping → AgentConfig) → load (files, discovery, environment) and
render (AgentConfig → document).
"""

from __future__ import annotations

# Callers holding only this module (the collection's action plugin and its tests) format
# durations with it.
from workflow_agent import durations
from workflow_agent._config.errors import ConfigError
from workflow_agent._config.fields import DURATION_EXAMPLES, parse_bool
from workflow_agent._config.load import (
    CONFIG_FILE_NAME,
    ENV_PREFIX,
    LEGACY_CONFIG_FILE_NAME,
    LoadedConfig,
    candidate_dirs,
    candidate_paths,
    env_overlay,
    env_var,
    load_config,
    read_file,
)
from workflow_agent._config.model import (
    ALL_KEYS,
    DEPLOY_TARGETS,
    ECS_KEYS,
    EXTENSION_KEYS,
    IGNORED_KEYS,
    INERT_ENV,
    INERT_KEYS,
    REFERENCE_KEYS,
    SECRET_KEYS,
    WORKFLOW_TYPES,
    AgentConfig,
    EcsConfig,
)
from workflow_agent._config.render import to_document
from workflow_agent._config.validate import validate_mapping

__all__ = [
    "ALL_KEYS",
    "CONFIG_FILE_NAME",
    "DEPLOY_TARGETS",
    "DURATION_EXAMPLES",
    "ECS_KEYS",
    "ENV_PREFIX",
    "EXTENSION_KEYS",
    "IGNORED_KEYS",
    "INERT_ENV",
    "INERT_KEYS",
    "LEGACY_CONFIG_FILE_NAME",
    "REFERENCE_KEYS",
    "SECRET_KEYS",
    "WORKFLOW_TYPES",
    "AgentConfig",
    "ConfigError",
    "EcsConfig",
    "LoadedConfig",
    "candidate_dirs",
    "durations",
    "candidate_paths",
    "env_overlay",
    "env_var",
    "load_config",
    "parse_bool",
    "read_file",
    "to_document",
    "validate_mapping",
]
