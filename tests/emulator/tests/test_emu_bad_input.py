"""Bad input on every route gets a 4xx with a JSON error, never a 5xx.

The route list comes from the app itself, so a new route is covered without editing this file.
"""

import itertools

import httpx
import pytest
from emu_helpers import STEPS, Agent
from workflow_emulator.app import Settings, create_app

ROUTES = [(r.path, sorted(r.methods - {"HEAD"})) for r in create_app(Settings("x")).routes]
BODIES = [
    None,
    b"",
    b"{",
    b"[]",
    b"null",
    b'"text"',
    b"\xff\xfe\x00",
    b"1e999999",
    b'{"status": 5, "offset": "x", "lines": 7, "jobID": [], "deploymentID": {}, "steps": {},'
    b' "name": null, "kinds": "x", "advance": "y", "reason": 3, "pools": "y", "org": "a b",'
    b' "expires_in": "z", "claims": [], "stacks": "s", "description": 1, "count": true}',
    b'{"lines": [{"t": "yesterday", "l": 1}], "offset": -1, "status": "exploded"}',
    b"grant_type=x&subject_token=%ff",
]
CONTENT_TYPES = [None, "application/json", "application/x-www-form-urlencoded", "text/plain"]


@pytest.fixture
def world(emu):
    """Real ids and tokens to put in paths and headers."""
    emu.create_job(STEPS)
    emu.create_deployment(f"{emu.org}/p/s", {"url": "git://x/r"})
    agent = Agent(emu, hostname="fuzz")
    claim = agent.claim()
    deployment = agent.claim()
    stack_token = agent.job(deployment).definition().json()["env"]["PULUMI_ACCESS_TOKEN"]
    agent.close()
    pool = emu.create_pool("fuzz-pool", org="fuzz-org")
    return {
        "claim": claim,
        "params": {
            "deployment_id": [claim["deploymentID"], "dep-unknown", "%00", "a" * 300],
            "job_id": [claim["jobID"], "job-unknown", "..", "%2F"],
            "step": ["1", "99", "-1", "x", "1.5", "9" * 30],
            "org": ["fuzz-org", "bad org", "x" * 200, "default"],
            "pool_id": [pool["id"], "nope"],
            "pool": [pool["id"], "default", "nope"],
        },
        "right": {
            "/api/workflow/jobs": f"token {claim['jobToken']}",
            "/api/stand-in/backend": f"token {stack_token['secret']}",
            "/api/orgs": f"token {emu.admin_token}",
            "/admin": f"Bearer {emu.admin_token}",
            "/api": f"token {emu.pool_token}",
            "/": None,
        },
    }


def _paths(template: str, params: dict) -> list[str]:
    names = [n for n in params if "{" + n + "}" in template]
    out = []
    for values in itertools.product(*(params[n] for n in names)):
        path = template
        for n, v in zip(names, values, strict=True):
            path = path.replace("{" + n + "}", v)
        out.append(path)
    return out


def _right_auth(world, template: str) -> str | None:
    for prefix, auth in world["right"].items():
        if template.startswith(prefix):
            return auth
    return None


def _check(resp: httpx.Response, what: str) -> None:
    assert resp.status_code < 500, f"{what} -> {resp.status_code} {resp.text[:200]}"
    if resp.status_code >= 400:
        body = resp.json()
        assert isinstance(body.get("error"), str) and body["error"], what


def test_every_route_every_bad_input_is_4xx_json(emu, world):
    client = httpx.Client(base_url=emu.url, timeout=30)
    sent = 0
    # Reset and delete last: they succeed with an empty body and would wipe the world early.
    order = sorted(ROUTES, key=lambda r: (r[0] == "/admin/reset", r[0].startswith("/api/orgs")))
    for template, methods in order:
        right = _right_auth(world, template)
        paths = _paths(template, world["params"])
        # Wrong, malformed and missing credentials, and a method the route does not have.
        for auth, method in itertools.product(
            [None, "token pul-wrong", "Basic Zm9vOmJhcg==", "token", "Bearer " + "x" * 5000],
            [*methods, "PUT"],
        ):
            headers = {"Authorization": auth} if auth else {}
            resp = client.request(method, paths[0], headers=headers, content=b"{")
            _check(resp, f"{method} {paths[0]} auth={auth and auth[:12]}")
            sent += 1
        # Right credentials, bad bodies, odd path parameters.
        # Each body once per path and method, the Content-Types taking turns.
        bodies = list(zip(BODIES, itertools.cycle(CONTENT_TYPES)))
        for path, method, (body, ctype) in itertools.product(paths, methods, bodies):
            headers = {"Authorization": right} if right else {}
            if ctype:
                headers["Content-Type"] = ctype
            if method == "DELETE" and path.startswith("/api/orgs") and body is not None:
                continue  # a DELETE body means nothing; one pass is enough
            resp = client.request(method, path, headers=headers, content=body)
            _check(resp, f"{method} {path} body={body!r:.40} ctype={ctype}")
            sent += 1
    client.close()
    assert sent > 1000
    log = emu.log_path.read_text(errors="replace")
    assert "Traceback" not in log and "internal error" not in log


@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("bad_json", 400),
        ("unknown_job", 404),
        ("wrong_pool_token", 403),  # on the poll: the one error the spec lists
        ("wrong_job_token", 401),
        ("log_offset_gap", 409),
        ("bad_admin_args", 400),
        ("unknown_route", 404),
        ("wrong_method", 405),
        ("oversized_body", 413),
    ],
)
def test_named_bad_inputs(emu, world, case, status):
    claim = world["claim"]
    jobs = f"{emu.url}/api/workflow/jobs/{claim['jobID']}"
    job_auth = {"Authorization": f"token {claim['jobToken']}"}
    pool_auth = {"Authorization": f"token {emu.pool_token}"}
    requests = {
        "bad_json": ("PATCH", f"{jobs}/1/status", job_auth, b'{"status": '),
        "unknown_job": ("GET", f"{emu.url}/api/workflow/jobs/job-nope", job_auth, None),
        "wrong_pool_token": (
            "GET",
            f"{emu.url}/api/deployments/poll",
            {"Authorization": "token pul-not-a-real-token"},
            None,
        ),
        "wrong_job_token": ("GET", jobs, {"Authorization": f"token {emu.pool_token}"}, None),
        "log_offset_gap": (
            "POST",
            f"{jobs}/1/logs",
            job_auth,
            b'{"offset": 3, "lines": [{"t": "2026-01-01T00:00:00Z", "l": "x"}]}',
        ),
        "bad_admin_args": (
            "POST",
            f"{emu.url}/admin/jobs",
            {"Authorization": f"Bearer {emu.admin_token}"},
            b'{"steps": []}',
        ),
        "unknown_route": ("GET", f"{emu.url}/api/nothing/here", pool_auth, None),
        "wrong_method": ("DELETE", f"{emu.url}/api/deployments/poll", pool_auth, None),
        "oversized_body": (
            "POST",
            f"{emu.url}/api/agent-workflows/deployment",
            pool_auth,
            b" " * (9 * 1024 * 1024),
        ),
    }
    method, url, headers, body = requests[case]
    resp = httpx.request(method, url, headers=headers, content=body, timeout=60)
    assert resp.status_code == status, resp.text
    assert resp.json()["error"]


@pytest.mark.parametrize(
    "job",
    [
        {},
        {"steps": "echo"},
        {"steps": [{"name": "a"}]},
        {"steps": [{"name": "", "run": "x"}]},
        {"steps": [{"name": "a", "run": "x", "shell": "bash"}]},
        {"steps": [{"name": "a", "run": "x", "timeout": "soon"}]},
        {"steps": [{"name": "a", "run": "x", "timeout": 0}]},
        {"steps": STEPS, "type": "build"},
        {"steps": STEPS, "pool": "nope"},
        {"steps": STEPS, "env": {"1BAD": "x"}},
        {"steps": STEPS, "env": {"A": 1}},
        {"steps": STEPS, "env": {"A": {"secret": 1}}},
        {"steps": STEPS, "env": ["A=1"]},
        {"steps": STEPS, "image": ""},
        {"steps": STEPS, "image": {"reference": "x", "credentials": {"username": "u"}}},
        {"steps": STEPS, "image": {"ref": "x"}},
        {"steps": STEPS, "timeout": "-1h"},
        {"steps": STEPS, "timeout": True},
        {"steps": STEPS, "count": 0},
        {"steps": STEPS, "count": 10001},
        {"steps": STEPS, "os": ""},
        {"steps": STEPS, "unknown": 1},
    ],
)
def test_bad_admin_jobs_are_400(emu, job):
    resp = emu.admin("POST", "/admin/jobs", job)
    assert resp.status_code in (400, 404), resp.text
    assert resp.json()["error"]
    assert emu.stats()["jobs"] == {}


@pytest.mark.parametrize(
    ("method", "path", "kw"),
    [
        ("GET", "/admin/jobs", {"params": {"status": "done"}}),
        ("GET", "/admin/jobs", {"params": {"type": "build"}}),
        ("GET", "/admin/jobs", {"params": {"pool": "nope"}}),
        ("GET", "/admin/agents", {"params": {"online_within": "soon"}}),
        ("GET", "/admin/agents", {"params": {"online_within": "-1"}}),
        ("GET", "/admin/agents", {"params": {"pool": "nope"}}),
        ("POST", "/admin/clock", {"json": {"advance": -5}}),
        ("POST", "/admin/clock", {"json": {"advance": "1h"}}),
        ("POST", "/admin/pools", {"json": {"name": "p", "token": "secret"}}),
        ("POST", "/admin/pools", {"json": {"name": "p", "org": "no spaces"}}),
        ("POST", "/admin/pools", {"json": {"name": "default"}}),
        ("PATCH", "/admin/pools/default", {"json": {"stacks": "a"}}),
        ("PATCH", "/admin/pools/default", {"json": {"token": "x"}}),
        ("POST", "/admin/oidc/mint", {"json": {"expires_in": "1h"}}),
        ("POST", "/admin/oidc/mint", {"json": {"claims": []}}),
        ("POST", "/admin/oidc/mint", {"json": {"org": "a b"}}),
        ("POST", "/admin/access-tokens", {"json": {"org": "a b"}}),
        ("POST", "/admin/reset", {"json": {"pools": "yes"}}),
        ("POST", "/admin/jobs/job-nope/cancel", {}),
        ("GET", "/admin/jobs/job-nope", {}),
    ],
)
def test_bad_admin_args(emu, method, path, kw):
    resp = emu.admin(method, path, **kw)
    assert 400 <= resp.status_code < 500, resp.text
    assert resp.json()["error"]


def test_admin_needs_the_admin_token(emu):
    for auth in ({}, {"Authorization": f"token {emu.pool_token}"}, {"Authorization": "Bearer no"}):
        resp = httpx.get(f"{emu.url}/admin/stats", headers=auth, timeout=30)
        assert resp.status_code == 401 and resp.json()["error"]
