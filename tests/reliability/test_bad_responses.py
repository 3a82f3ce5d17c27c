"""Malformed server responses never crash the agent: the poll is retried, or the job fails
cleanly, and the agent goes on to run the next job. The server is a small real HTTP server
(badserver.py) and the agent a real `workflow-agent run` process: no mocks.
"""

from __future__ import annotations

import gzip
import signal
import types

import pytest
from badserver import HUGE, Bad, BadServer, json_answer
from rel_harness import WAIT, AgentProcess, assert_no_crash, metric, parse_metrics, wait_for

TOKEN = "pul-badserver0123456789abcdef0123456789ab"
SETTINGS = {
    "polling_interval": "200ms",
    "job_status_loop_interval": "1s",
    "request_timeout": "2s",
    "request_retry_count": 1,
    "request_retry_wait": "100ms",
    "request_retry_max_wait": "200ms",
    "circuit_breaker_failures": 2,
    "circuit_breaker_timeout": "1s",
}
GOOD = {
    "image": {"reference": "local/none"},
    "timeout": "1m",
    "env": {},
    "steps": [{"name": "checkout", "run": ""}, {"name": "s", "run": "echo fine"}],
}

# Poll answers that are not a usable claim. Each must end as a failed poll (or, for those named
# in EMPTY, an empty one) after which the agent polls again. The "job" ids inside are never run.
EMPTY = {"json null", "bad retry-after", "negative retry-after", "redirect"}
BAD_POLLS = [
    Bad(
        200, b'{"jobID": "j-trunc", "jobTok', {"Content-Type": "application/json"}, name="truncated"
    ),
    json_answer({"jobID": 42, "jobToken": ["x"], "runID": {}}),
    json_answer({"jobID": "j-no-token"}),
    json_answer("a string"),
    json_answer([1, 2, 3]),
    Bad(200, b"null", name="json null"),
    Bad(200, b"\xff\xfe\x00garbage\x80", name="binary"),
    Bad(200, b"<html>oops</html>", {"Content-Type": "text/html"}, name="html"),
    Bad(200, b"not gzip at all", {"Content-Encoding": "gzip"}, name="bad gzip"),
    Bad(200, gzip.compress(b"{" * 1000), {"Content-Encoding": "gzip"}, name="gzip of junk"),
    Bad(200, b"x" * HUGE, name="huge with length"),
    Bad(200, b"y" * 65536, mode="chunked", name="huge chunked"),
    Bad(200, b'{"jobID": "j-slow"', mode="trickle-body", name="slow loris body"),
    Bad(mode="silent", name="silent"),
    Bad(mode="close", name="closed"),
    Bad(204, headers={"Retry-After": "soon"}, name="bad retry-after"),
    Bad(204, headers={"Retry-After": "-3"}, name="negative retry-after"),
    Bad(503, b"\x00\x01", headers={"Retry-After": "Wed, 99 Foo 2024"}, name="503 junk"),
    Bad(429, b"[", headers={"Retry-After": "1"}, name="429 junk"),
    Bad(302, headers={"Location": "http://127.0.0.1:9/elsewhere"}, name="redirect"),
    Bad(200, b"{}" + b" " * 10, {"Content-Length": "999"}, name="short body"),
]

# Job definitions that cannot be used: the job must be reported failed, with the reason in the
# log of step 1, the first step that cannot run.
BAD_DEFINITIONS = {
    "truncated": Bad(200, b'{"image": {"reference": "x"}, "steps": [', name="truncated"),
    "steps-string": json_answer({**GOOD, "steps": "make"}),
    "step-not-object": json_answer({**GOOD, "steps": [{}, "echo"]}),
    "env-number": json_answer({**GOOD, "env": {"A": 5}}),
    "env-bad-name": json_answer({**GOOD, "env": {"A B": "x"}}),
    "timeout-words": json_answer({**GOOD, "timeout": "forever"}),
    "step-timeout-number": json_answer(
        {**GOOD, "steps": [{}, {"name": "s", "run": "true", "timeout": 5}]}
    ),
    "image-number": json_answer({**GOOD, "image": 5}),
    "credentials-list": json_answer({**GOOD, "image": {"reference": "x", "credentials": []}}),
    "list": json_answer([GOOD]),
    "huge": Bad(200, b"z" * HUGE, name="huge"),
    "slow-loris": Bad(200, b'{"image": ', mode="trickle-body", name="slow loris"),
    "silent": Bad(mode="silent", name="silent"),
    "not-found": json_answer({"error": "gone"}, 404),
}


def bad_agent(server: BadServer, directory, name: str, **extra) -> AgentProcess:
    service = types.SimpleNamespace(pool_token=TOKEN, url=server.url)
    return AgentProcess(service, directory, name, **{**SETTINGS, **extra})


def stop_cleanly(agent: AgentProcess, server: BadServer) -> None:
    assert agent.proc.poll() is None, f"the agent died:\n{agent.stderr[-3000:]}"
    assert server.unknown() == []  # only routes the real service has
    agent.signal(signal.SIGTERM)
    assert agent.wait() == 0, agent.stderr[-3000:]
    assert_no_crash(agent)
    assert TOKEN not in agent.stderr


def test_bad_poll_answers_are_retried_and_the_next_job_runs(agents, tmp_path):
    with BadServer() as server:
        server.script("poll", *BAD_POLLS)
        # No retries: one answer per poll, so the poll outcomes can be counted exactly.
        agent = bad_agent(server, tmp_path, "polls", request_retry_count=0)
        agents.append(agent.start())
        wait_for(lambda: server.left("poll") == 0, timeout=WAIT * 2, what="bad polls used up")
        # Polling goes on after the last bad answer, and a good claim runs to the end.
        server.add_job("j-good", GOOD)
        wait_for(lambda: server.outcome("j-good"), timeout=WAIT, what="good job reported")
        assert server.outcome("j-good") == {"status": "succeeded"}
        assert server.logs[("j-good", "1")] == ["fine"]

        started = {r.path.split("/")[4] for r in server.seen("GET", "/api/workflow/jobs/")}
        assert started == {"j-good"}  # none of the broken claims was taken for a job
        samples = parse_metrics(agent.get("/metrics")[1])
        errors = metric(samples, "workflow_agent_polls_total", outcome="error")
        assert errors == len(BAD_POLLS) - len(EMPTY), agent.stderr[-3000:]
        assert metric(samples, "workflow_agent_polls_total", outcome="claimed") == 1
        stop_cleanly(agent, server)
    for line in ("malformed response", "response too large", "ReadTimeout"):
        assert line in agent.stderr


def test_bad_job_definitions_fail_their_job_cleanly(agents, tmp_path):
    with BadServer() as server:
        for job_id, answer in BAD_DEFINITIONS.items():
            server.add_job(job_id, answer)
        server.add_job("j-good", GOOD)
        agent = bad_agent(server, tmp_path, "definitions")
        agents.append(agent.start())
        wait_for(lambda: server.outcome("j-good"), timeout=WAIT * 3, what="last job reported")
        for job_id in BAD_DEFINITIONS:
            final = server.outcome(job_id)
            assert final is not None, f"{job_id}: no failed step"
            assert final["status"] == "failed", (job_id, final)
            why = ("cannot fetch the job definition: ", "refused the job definition: ")
            assert final["reason"].startswith(tuple("[workflow-agent] error: " + w for w in why))
            assert [r.path for r in server.seen("PATCH", f"/api/workflow/jobs/{job_id}/")] == [
                f"/api/workflow/jobs/{job_id}/1/status"
            ] * 2  # running, then failed: step 1, never step 0
        assert server.outcome("j-good") == {"status": "succeeded"}
        stop_cleanly(agent, server)


def test_a_bad_executor_answer_fails_its_job_with_one_line_and_the_next_job_runs(agents, tmp_path):
    """GET /api/deployments/executor answering 404, JSON or an HTML page: the deployment fails at
    step 1 with one line saying what came back; the agent goes on, and the next deployment (the
    route healthy again) runs."""
    answers = [
        json_answer({"error": "not found"}, 404),
        json_answer({"error": "nope"}),
        Bad(200, b"<html>sign in</html>", {"Content-Type": "text/html"}),
    ]
    with BadServer() as server:
        server.script("executor", *answers)
        ids = [f"j-exec-{n}" for n in range(len(answers))]
        for job_id in [*ids, "j-good"]:
            server.add_job(job_id, GOOD)
        agent = bad_agent(server, tmp_path, "executor")
        agents.append(agent.start())
        wait_for(lambda: server.outcome("j-good"), timeout=WAIT * 3, what="last job reported")
        reasons = [server.outcome(job_id)["reason"] for job_id in ids]
        assert "HTTP 404: not found" in reasons[0]
        assert "is not a Linux executable (HTTP 200, 17 bytes" in reasons[1]
        assert "is not a Linux executable (HTTP 200, 20 bytes starting b'<html>" in reasons[2]
        assert all(r.startswith("[workflow-agent] error: ") and "\n" not in r for r in reasons)
        assert server.outcome("j-good") == {"status": "succeeded"}
        stop_cleanly(agent, server)


@pytest.mark.parametrize(
    ("route", "answers"),
    [
        ("ack", [Bad(200, b"{", name="truncated"), Bad(mode="close")]),
        ("heartbeat", [Bad(200, b"x" * HUGE), Bad(mode="trickle-body", body=b"{")]),
        ("deployment_status", [json_answer({"status": 5}), json_answer([1]), Bad(200, b'"runn')]),
        ("step_status", [Bad(200, b"[1,"), json_answer({"ok": [None]})]),
        (
            "logs",
            [
                Bad(200, b'{"offset": "seven"}', after_work=True),
                Bad(200, b"{", after_work=True),
                Bad(200, b'{"offset": -40}', after_work=True),
            ],
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_bad_answers_while_a_job_runs_do_not_lose_it(agents, tmp_path, route, answers):
    """Each answer hits one call of a running job (one job per answer): the job goes on, or the
    call is retried, and every job ends reported succeeded with all of its output."""
    with BadServer() as server:
        server.script(route, *answers)
        definition = {**GOOD, "steps": [{}, {"name": "s", "run": "echo one; sleep 2.5; echo two"}]}
        ids = [f"j-{i}" for i in range(len(answers))]
        for job_id in ids:
            server.add_job(job_id, definition)
        agent = bad_agent(server, tmp_path, route)
        agents.append(agent.start())
        wait_for(
            lambda: all(server.outcome(j) for j in ids), timeout=WAIT * 2, what="jobs reported"
        )
        assert server.left(route) == 0
        for job_id in ids:
            assert server.outcome(job_id) == {"status": "succeeded"}
            assert server.logs[(job_id, "1")] == ["one", "two"]
        stop_cleanly(agent, server)


def polls_again(server, what: str) -> None:
    """A second poll arrives within 60 s: the bad answer to the first did not park the agent."""
    wait_for(lambda: len(server.seen("GET", "/api/deployments/poll")) >= 2, timeout=60, what=what)


def test_slow_loris_headers_do_not_stall_polling(agents, tmp_path):
    """A server that trickles its response headers, a byte at a time but each byte within the
    read timeout, must not hold a poll beyond request_timeout (2s here). httpx's timeouts are
    per socket read, so the client puts one deadline on each whole attempt; without it this poll
    would wait until the headers end (~14 h at this pace). The wait below is 30 times
    request_timeout."""
    with BadServer() as server:
        server.script("poll", Bad(200, b"{}", mode="trickle-headers", every=0.5))
        agent = bad_agent(server, tmp_path, "loris", request_retry_count=0)
        agents.append(agent.start())
        wait_for(lambda: server.left("poll") == 0, what="the slow answer started")
        polls_again(server, "a poll after the slow loris (request_timeout is 2s)")
        stop_cleanly(agent, server)


def test_server_text_is_logged_without_control_characters(agents, tmp_path):
    """Text from the server (error bodies, step names) reaches the agent's log as printable
    text: no terminal escape sequences or NUL bytes that a hostile or broken server could plant
    in an operator's terminal (logsetup escapes them in every message)."""
    with BadServer() as server:
        server.script(
            "poll",
            Bad(503, b"\x1b[2J\x1b[31mred\x00alert\x07"),
            Bad(400, json_answer({"error": "\x1b]0;owned\x07 bad"}).body),
        )
        server.add_job(
            "j-esc", {**GOOD, "steps": [{}, {"name": "\x1b[5mstep\x1b[0m", "run": "true"}]}
        )
        agent = bad_agent(server, tmp_path, "escapes", request_retry_count=0)
        agents.append(agent.start())
        wait_for(lambda: server.outcome("j-esc"), what="the job reported")
        assert server.outcome("j-esc") == {"status": "succeeded"}
        assert agent.stderr.count("poll failed") >= 2
        stop_cleanly(agent, server)
    raw = agent.stderr_path.read_bytes()
    controls = sorted(
        {chr(b) for b in raw if b < 32 and b not in (9, 10)}
        | ({"\x7f"} & set(raw.decode(errors="replace")))
    )
    assert controls == [], f"control characters in the agent's log: {controls}"


def test_a_huge_retry_after_on_an_empty_poll_does_not_stop_polling(agents, tmp_path):
    """`Retry-After` on an empty poll replaces polling_interval; a broken server's absurd value
    (about three years here) must not park the agent."""
    with BadServer() as server:
        server.script("poll", Bad(204, headers={"Retry-After": "99999999"}))
        agent = bad_agent(server, tmp_path, "retry-after", request_retry_count=0)
        agents.append(agent.start())
        wait_for(lambda: server.left("poll") == 0, what="the answer used")
        polls_again(server, "a poll after the huge Retry-After")
        stop_cleanly(agent, server)
