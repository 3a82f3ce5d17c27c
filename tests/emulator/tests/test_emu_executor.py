"""GET /api/deployments/executor: served to the pool token only [RE], cached by ETag, and
broken on demand for the agent's bad-input tests."""

import hashlib

import httpx
import pytest
from emu_helpers import STEPS
from workflow_emulator.executor import default_content

PATH = "/api/deployments/executor"


def test_the_pool_token_gets_the_stand_in_with_its_etag(emu, agent):
    got = agent.http.get(PATH)
    assert got.status_code == 200
    assert got.content == default_content() and got.content.startswith(b"#!")
    assert got.headers["content-type"] == "application/octet-stream"
    assert got.headers["etag"] == '"' + hashlib.sha256(got.content).hexdigest() + '"'
    assert emu.executor() == {
        "etag": got.headers["etag"],
        "size": len(got.content),
        "fetches": {"200": 1, "304": 0},
    }


def test_a_job_token_a_wrong_token_or_none_is_refused(emu, agent):
    emu.create_job(STEPS)
    claim = agent.claim()
    url = emu.url + PATH
    for headers in (
        {"Authorization": f"token {claim['jobToken']}"},
        {"Authorization": "token pul-not-a-pool-token"},
        {},
    ):
        refused = httpx.get(url, headers=headers, timeout=30)
        assert refused.status_code == 403
        assert "served to agent pools only" in refused.json()["error"]
    assert emu.executor()["fetches"] == {"200": 0, "304": 0}


def test_if_none_match_gets_304_until_the_service_copy_changes(emu, agent):
    etag = agent.http.get(PATH).headers["etag"]
    same = agent.http.get(PATH, headers={"If-None-Match": etag})
    assert same.status_code == 304 and same.content == b"" and same.headers["etag"] == etag
    # A list, a weak tag and a stale tag, as RFC 9110 has them.
    assert agent.http.get(PATH, headers={"If-None-Match": f'"x", W/{etag}'}).status_code == 304
    new = emu.set_executor(b"#!/bin/sh\necho v2\n")
    assert new["etag"] != etag
    fresh = agent.http.get(PATH, headers={"If-None-Match": etag})
    assert fresh.status_code == 200 and fresh.content == b"#!/bin/sh\necho v2\n"
    assert fresh.headers["etag"] == new["etag"]
    assert emu.executor()["fetches"] == {"200": 2, "304": 2}
    assert emu.set_executor()["etag"] == etag  # an empty body restores the shipped stand-in


def test_reset_restores_the_executor_and_its_counts(emu, agent):
    emu.set_executor(b"#!/bin/sh\n")
    agent.http.get(PATH)
    emu.reset()
    view = emu.executor()
    assert view["fetches"] == {"200": 0, "304": 0} and view["size"] == len(default_content())


@pytest.mark.parametrize(
    ("fault", "status", "ctype", "start"),
    [
        ("404", 404, "application/json", b'{"error"'),
        ("json", 200, "application/json", b"{"),
        ("html", 200, "text/html", b"<!DOCTYPE html>"),
    ],
)
def test_a_broken_route_answers_what_the_fault_says(emu, agent, fault, status, ctype, start):
    emu.faults(executor=fault)
    got = agent.http.get(PATH)
    assert got.status_code == status
    assert got.headers["content-type"].startswith(ctype) and got.content.startswith(start)
    assert "etag" not in got.headers
    emu.faults()
    assert agent.http.get(PATH).content == default_content()


def test_an_unknown_executor_fault_is_refused(emu):
    resp = emu.admin("POST", "/admin/faults", {"executor": "garbage"})
    assert resp.status_code == 400
    assert resp.json()["error"] == "executor must be null or one of 404, json, html"
