"""The calls upstream's agent makes before it polls (docs/protocol.md, "Job runtime"):
`GET /api/background-activities/token`, then `POST /api/background-activities/configuration`,
whose answer is a JSON array of `{kind, interval, canChangeInterval, concurrency, enabled,
agentPoolRegistrationEnabled, agentPools}` [RE]. The agent claims a workflow type only when its
own config enables it and the service does not disable it for this agent's pool.

[ASSUMED] where the record is silent: `kind` takes the workflow type names; a type the answer
does not mention stays as configured; `agentPools` limits a type to the pools it lists (this
agent knows its pool only from `runner_pool_id`, in OIDC mode: its id, or its name); the worker
token is not used (this agent leases with the pool's credentials). A service that does not
answer these calls (an older or partial implementation) leaves the configured types, with a
warning.
"""

from __future__ import annotations

import logging
from typing import Any

from workflow_agent.client import Client
from workflow_agent.config import AgentConfig
from workflow_agent.errors import ServiceError

log = logging.getLogger(__name__)


def workflow_types(client: Client, cfg: AgentConfig) -> list[str]:
    """The workflow types this agent claims, after the bootstrap calls."""
    configured = list(cfg.enabled_workflow_types)
    try:
        # Past the breaker: a service that is down at start must not pause the first polls.
        client.call(
            "GET", "/api/background-activities/token", route="bg_token", bypass_breaker=True
        )
        reply = client.call(
            "POST",
            "/api/background-activities/configuration",
            route="bg_configuration",
            bypass_breaker=True,
        )
    except ServiceError as exc:
        log.warning("bootstrap: %s; claiming the configured workflow types", exc)
        return configured
    disabled, why = disabled_types(reply.data, cfg.runner_pool_id)
    if why:
        log.warning("bootstrap: %s; claiming the configured workflow types", why)
        return configured
    kinds = [t for t in configured if t not in disabled]
    for t in configured:
        if t in disabled:
            log.info("bootstrap: the service does not enable %s for this agent: %s", t, disabled[t])
    if not kinds:
        log.warning("bootstrap: the service enables none of %s for this agent", configured)
    return kinds


def disabled_types(data: Any, pool_id: str) -> tuple[dict[str, str], str]:
    """The types the configuration answer turns off for `pool_id` (type -> why), or the reason
    the answer cannot be used."""
    if not isinstance(data, list):
        return {}, "the activity configuration is not a JSON array"
    off: dict[str, str] = {}
    for n, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("kind"), str):
            return {}, f"the activity configuration's item {n} has no kind"
        kind = item["kind"]
        if item.get("enabled", True) is False:
            off[kind] = "disabled"
            continue
        pools = item.get("agentPools") or []
        pools = [p for p in pools if isinstance(p, dict)] if isinstance(pools, list) else []
        # runner_pool_id names the pool by its id; a name is taken too, as the service does.
        names = {p.get(k) for p in pools for k in ("id", "name")}
        if pool_id and pools and pool_id not in names:
            off[kind] = f"pool {pool_id} is not among its agent pools"
    return off, ""
