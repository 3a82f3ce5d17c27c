"""The transcribed schemas themselves: valid JSON Schema, each naming its source, and strict
enough to catch the shapes that are not the published ones (negative controls: the checks of
the other files here can fail)."""

from __future__ import annotations

import pytest
from conformance import ROUTES, SCHEMA_DOCS, check_request, check_response, problems
from jsonschema import Draft202012Validator

POOL = {
    "created": 1767225600,
    "id": "4b1c7a3e-2d7f-4c39-9d6e-0f4f0c8a2b11",
    "name": "linux",
    "description": "ci",
    "lastSeen": 0,
    "status": "offline",
    "isDefault": False,
}


@pytest.mark.parametrize("name", sorted(SCHEMA_DOCS))
def test_every_schema_is_valid_and_cites_its_source(name):
    schema = SCHEMA_DOCS[name]
    Draft202012Validator.check_schema(schema)
    comment = schema["$comment"]
    assert "OpenAPI spec" in comment or "[RE]" in comment, name
    assert "api-evangelist/pulumi" in comment or "viniciusmiguel/HappyPumi" in comment, name


def test_every_route_names_known_schemas():
    named = {r.request for r in ROUTES} | {s for r in ROUTES for s in r.responses.values()}
    assert named - {None, "any", "empty", "binary"} <= set(SCHEMA_DOCS)
    assert len({(r.method, r.template) for r in ROUTES}) == len(ROUTES)


def test_a_published_pool_passes_and_the_old_emulator_shape_does_not():
    assert problems("AgentPool", POOL, strict=True) == []
    assert problems("AgentPool", {**POOL, "lastDeployment": 1767229200}, strict=True) == []
    old = {**POOL, "created": "2026-01-01T00:00:00.000Z", "lastSeen": None}
    found = problems("AgentPool", old, strict=True)
    assert any("created" in p and "not of type 'integer'" in p for p in found), found
    assert any("lastSeen" in p for p in found), found
    no_seen = {k: v for k, v in POOL.items() if k != "lastSeen"}
    assert any(
        "'lastSeen' is a required property" in p
        for p in problems("AgentPool", no_seen, strict=True)
    )


def test_closed_schemas_refuse_fields_the_spec_does_not_name():
    detail = {**{k: POOL[k] for k in ("created", "id", "name", "description")}, "agents": []}
    assert problems("AgentPoolDetail", detail, strict=True) == []
    extra = {**detail, "status": "online"}  # a summary field, not in AgentPoolDetail
    assert problems("AgentPoolDetail", extra, strict=False) == []
    assert problems("AgentPoolDetail", extra, strict=True) != []
    agent = {"version": "1", "platform": "linux", "hostname": "h", "ip": "1", "pid": "2",
             "lastSeen": 3, "status": "online", "instance": "x"}  # fmt: skip
    assert problems("AgentPoolDetail", {**detail, "agents": [agent]}, strict=True) != []


def test_requests_outside_the_record_are_named():
    job = "/api/workflow/jobs/job-1"
    auth = {"Authorization": "token t"}
    found = check_request("PATCH", f"{job}/status", auth, b'{"status": "succeeded"}')
    assert found == [f"PATCH {job}/status: no such route on the real service (not in the spec "
                     "nor observed)"]  # fmt: skip
    assert check_request("PATCH", f"{job}/1/status", auth, b'{"status": "succeeded"}') == []
    assert check_request("PATCH", f"{job}/1/status", auth, b'{"status": "done"}') != []
    extra = b'{"status": "failed", "reason": "x"}'  # a field the runner does not send
    assert check_request("PATCH", f"{job}/1/status", auth, extra) != []
    assert check_request("GET", "/api/deployments/poll", {"Authorization": "Bearer t"}, b"")
    form = b"grant_type=x&subject_token=y"
    ctype = {"Content-Type": "application/x-www-form-urlencoded"}
    assert len(check_request("POST", "/api/oauth/token", ctype, form)) == 2
    pool = {**auth, "Content-Type": "application/json"}
    half = b'{"description": "only"}'
    assert check_request("PATCH", "/api/orgs/o/agent-pools/p", pool, half) != []


def test_answers_outside_the_record_are_named():
    assert check_response("GET", "/api/deployments/d/status", 200, b'"running"') == []
    assert check_response("GET", "/api/deployments/d/status", 200, b'"canceled"') != []
    assert check_response("GET", "/api/deployments/poll", 204, b"") == []
    assert check_response("GET", "/api/deployments/poll", 401, b"{}") == []  # errors: any
    assert check_response("GET", "/api/deployments/poll", 200, b'{"jobID": "j"}') != []


def test_log_lines_need_rfc3339_times():
    line = {"offset": 0, "lines": [{"t": "2026-01-02T03:04:05.123Z", "l": "x"}]}
    assert problems("AppendStepLogsRequest", line, strict=True) == []
    line["lines"][0]["t"] = "yesterday"
    assert problems("AppendStepLogsRequest", line, strict=True) != []
