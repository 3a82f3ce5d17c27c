"""The published wire, as data: JSON Schemas transcribed from Pulumi's OpenAPI spec and REST docs
(schemas/*.json, each citing its source) and the table of every route the real service is known
to serve, documented [SPEC]/[DOC] or observed on the wire of the real agent [RE]
(shared/reference/upstream-agent.md, section 4.1; docs/protocol.md).

`check_request` and `check_response` say what is wrong with one exchange (a list of problems, []
when none). Answers of our own emulator are checked against *closed* schemas: an object may not
carry a property the published schema does not name, so that no client of the emulator (the
agent, the agent_pool module) can come to rely on a field the real service does not send.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SCHEMAS = Path(__file__).parent / "schemas"
PREFIX = "urn:wfa-conformance:"


def load_schemas() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(SCHEMAS.glob("*.json"))}


def closed(schema: object) -> object:
    """`schema` with `additionalProperties: false` on every object schema that names its
    properties and says nothing about others."""
    schema = copy.deepcopy(schema)

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def _registry(schemas: dict[str, dict]) -> Registry:
    return Registry().with_resources(
        (s["$id"], Resource.from_contents(s)) for s in schemas.values()
    )


SCHEMA_DOCS = load_schemas()
OPEN = _registry(SCHEMA_DOCS)
CLOSED = _registry({k: closed(v) for k, v in SCHEMA_DOCS.items()})


def problems(name: str, instance: object, *, strict: bool) -> list[str]:
    """What `instance` gets wrong against schema `name` (closed when `strict`)."""
    registry = CLOSED if strict else OPEN
    schema = registry.contents(PREFIX + name)
    validator = Draft202012Validator(schema, registry=registry)
    return [
        f"{name}: {'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}"
        for e in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    ]


# --- the routes -------------------------------------------------------------------------------

BINARY = "binary"  # a response that is not JSON (the executor)
EMPTY = "empty"  # no body (204)
ANY = "any"  # JSON, shape not published


@dataclass(frozen=True)
class Route:
    method: str
    template: str
    source: str  # SPEC, DOC or RE: where the route is known from
    auth: str  # "pool" (pool or runner access token), "job", "access", "none"
    request: str | None = None  # schema name of the JSON body, None: not published (any/none)
    responses: dict[int, str] = field(default_factory=dict)  # status -> schema name/BINARY/...
    json_body: bool = False  # the spec declares application/json as the request content type

    @property
    def pattern(self) -> re.Pattern:
        return re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", self.template) + "$")


# The whole of what the real service is known to serve to an agent, and the pool REST API.
ROUTES = (
    # Agent bootstrap and polling.
    Route("POST", "/api/oauth/token", "SPEC", "none", "TokenExchangeRequest",
          {200: "TokenExchangeGrantResponse"}, json_body=True),
    Route("GET", "/api/background-activities/token", "RE", "pool", None, {200: ANY}),
    Route("POST", "/api/background-activities/configuration", "RE", "pool", None,
          {200: "BackgroundActivityConfigurations"}),
    Route("POST", "/api/background-activities/worker/lease/acquire", "RE", "pool", None,
          {204: EMPTY, 200: ANY}),
    Route("GET", "/api/deployments/poll", "SPEC", "pool", None,
          {200: "AgentWorkflowDefinition", 204: EMPTY, 403: ANY}),
    Route("POST", "/api/agent-workflows/deployment", "RE", "pool", None, {200: ANY}),
    Route("POST", "/api/agent-workflows/{agentJobID}/check", "RE", "pool", None, {200: ANY}),
    Route("GET", "/api/deployments/{deploymentId}/status", "SPEC", "pool", None,
          {200: "JobStatus"}),
    # [RE] HappyPumi's middleware lets only a pool token fetch it; 304 to If-None-Match [ASSUMED].
    Route("GET", "/api/deployments/executor", "SPEC", "pool", None, {200: BINARY, 304: EMPTY}),
    # Job-scoped: the runner's calls, with the claim's job token.
    Route("GET", "/api/workflow/jobs/{jobID}", "RE", "job", None, {200: "JobDefinition"}),
    Route("PATCH", "/api/workflow/jobs/{jobID}/{stepIndex}/status", "RE", "job",
          "UpdateStepStatusRequest", {200: ANY}),
    Route("POST", "/api/workflow/jobs/{jobID}/{stepIndex}/logs", "RE", "job",
          "AppendStepLogsRequest", {200: ANY}),
    Route("POST", "/api/workflow/jobs/{jobID}/heartbeat", "RE", "job", None, {200: ANY}),
    # Pool administration (the agent_pool module).
    Route("GET", "/api/orgs/{orgName}/agent-pools", "SPEC", "access", None,
          {200: "ListAgentPoolsResponse"}),
    Route("POST", "/api/orgs/{orgName}/agent-pools", "SPEC", "access",
          "CreateOrgAgentPoolRequest", {200: "CreateAccessTokenResponse"}, json_body=True),
    Route("GET", "/api/orgs/{orgName}/agent-pools/{poolId}", "SPEC", "access", None,
          {200: "AgentPoolDetail"}),
    Route("PATCH", "/api/orgs/{orgName}/agent-pools/{poolId}", "SPEC", "access",
          "CreateOrgAgentPoolRequest", {200: "PatchOrgAgentPoolResponse"}, json_body=True),
    Route("DELETE", "/api/orgs/{orgName}/agent-pools/{poolId}", "SPEC", "access", None,
          {204: EMPTY}),
)  # fmt: skip


def route_of(method: str, path: str) -> Route | None:
    for route in ROUTES:
        if route.method == method and route.pattern.match(path):
            return route
    return None


def check_request(
    method: str, path: str, headers: dict[str, str], body: bytes, *, strict: bool = True
) -> list[str]:
    """What is wrong with one request to the service (a real agent's or module's)."""
    where = f"{method} {path}"
    route = route_of(method, path.split("?", 1)[0])
    if route is None:
        return [f"{where}: no such route on the real service (not in the spec nor observed)"]
    found = []
    auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
    if route.auth != "none" and not re.fullmatch(r"token \S+", auth):
        found.append(f"{where}: Authorization is not 'token <token>'")
    if route.auth == "none" and auth:
        found.append(f"{where}: sends credentials to an anonymous route")
    ctype = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
    if route.json_body and ctype.split(";")[0].strip() != "application/json":
        found.append(f"{where}: Content-Type {ctype!r}, the spec declares application/json")
    if route.request is not None:
        try:
            data = json.loads(body)
        except ValueError:
            return [*found, f"{where}: the body is not JSON"]
        found += [f"{where}: {p}" for p in problems(route.request, data, strict=strict)]
    return found


def check_response(
    method: str, path: str, status: int, body: bytes, *, strict: bool = True
) -> list[str]:
    """What is wrong with one answer of the service (our emulator's)."""
    where = f"{method} {path} -> {status}"
    route = route_of(method, path.split("?", 1)[0])
    if route is None:
        return [f"{method} {path}: no such route on the real service"]
    if status >= 400:
        return []  # error bodies are not published (the emulator's are {"error": ...})
    expected = route.responses.get(status)
    if expected is None:
        return [f"{where}: a status the record does not have for this route"]
    if expected == EMPTY:
        return [] if not body else [f"{where}: a body on an empty answer"]
    if expected == BINARY:
        return [] if body else [f"{where}: no payload"]
    try:
        data = json.loads(body)
    except ValueError:
        return [f"{where}: the body is not JSON"]
    if expected == ANY:
        return []
    return [f"{where}: {p}" for p in problems(expected, data, strict=strict)]
