"""logship: per-step offsets, batching, the 409 expectedOffset rule, redaction, no lost lines.

The service is scripted at the transport (agent_helpers.Script): a response that is lost after
the service stored the batch cannot be produced on purpose with a real server.
"""

import time

import httpx
import pytest
from agent_helpers import Script, make_client, ok
from workflow_agent.clock import Clock, FakeClock
from workflow_agent.logship import MAX_LINE, LogShipper, rfc3339
from workflow_agent.redaction import Redactor


def shipper(script, batch_lines=3, redact=None):
    client = make_client(script, FakeClock(), request_retry_count=0)
    return LogShipper(
        client, "job-1", "jobtok", 2, redact=redact or Redactor(), batch_lines=batch_lines
    )


def lines_of(body):
    return [entry["l"] for entry in body["lines"]]


def test_batches_carry_increasing_offsets():
    script = Script(ok({}))
    s = shipper(script)
    for i in range(7):
        s.add(f"line {i}")
    assert s.flush() is True
    bodies = script.bodies()
    assert [b["offset"] for b in bodies] == [0, 3, 6]
    assert [lines_of(b) for b in bodies] == [
        ["line 0", "line 1", "line 2"],
        ["line 3", "line 4", "line 5"],
        ["line 6"],
    ]
    assert script.paths == ["POST /api/workflow/jobs/job-1/2/logs"] * 3
    assert script.requests[0].headers["Authorization"] == "token jobtok"
    assert s.offset == 7 and s.pending == 0


def test_server_offset_in_the_answer_is_adopted():
    script = Script(ok({"offset": 10}))
    s = shipper(script)
    s.add("x")
    s.flush()
    assert s.offset == 10


@pytest.mark.parametrize("offset", [-40, "seven", True, 2**31, None, [3]])
def test_an_offset_that_is_no_line_count_is_a_bad_answer_and_the_batch_is_resent(offset):
    """The batch landed, but the answer's offset is nonsense: it is not adopted; the resend's
    409 (expectedOffset = what was sent) settles that the batch landed."""
    script = Script(
        ok({"offset": offset}),
        ok({"error": "offset", "expectedOffset": 2}, status=409),
        ok({"offset": 3}),
    )
    s = shipper(script)
    s.add("a")
    s.add("b")
    assert s.flush() is False  # not known to be delivered: still queued
    assert s.pending == 2 and s.offset == 0
    assert s.flush() is True
    s.add("c")
    s.flush()
    assert [b["offset"] for b in script.bodies()] == [0, 0, 2]
    assert s.offset == 3 and s.dropped == 0


def test_lines_queued_after_a_lost_answer_are_stored_once():
    """The first try landed but its answer was lost (a 503 from a proxy, a timeout), and lines
    came meanwhile: the resend's 409 says how many landed, and only the rest is sent."""
    script = Script(
        ok(status=503),
        ok({"error": "offset", "expectedOffset": 2}, status=409),
        ok({"offset": 4}),
    )
    s = shipper(script, batch_lines=10)
    s.add("a")
    s.add("b")
    assert s.flush() is False
    s.add("c")
    s.add("d")
    assert s.flush() is True
    assert [(b["offset"], lines_of(b)) for b in script.bodies()] == [
        (0, ["a", "b"]),
        (0, ["a", "b", "c", "d"]),
        (2, ["c", "d"]),
    ]
    assert s.offset == 4 and s.pending == 0 and s.dropped == 0


def test_when_the_rest_fails_the_landed_lines_are_not_sent_again():
    script = Script(
        ok({"error": "offset", "expectedOffset": 1}, status=409),
        ok(status=503),
        ok({"offset": 3}),
    )
    s = shipper(script, batch_lines=10)
    for line in "abc":
        s.add(line)
    assert s.flush() is False
    assert s.pending == 2 and s.offset == 1
    assert s.flush() is True
    assert [(b["offset"], lines_of(b)) for b in script.bodies()] == [
        (0, ["a", "b", "c"]),
        (1, ["b", "c"]),
        (1, ["b", "c"]),
    ]
    assert s.offset == 3


def test_an_answer_without_an_offset_counts_the_lines_sent():
    script = Script(ok({}), ok({"ok": True}))
    s = shipper(script)
    s.add("a")
    s.flush()
    s.add("b")
    s.flush()
    assert [b["offset"] for b in script.bodies()] == [0, 1]
    assert s.offset == 2


def test_409_for_a_batch_that_already_landed_counts_as_delivered():
    script = Script(ok({"error": "offset", "expectedOffset": 2}, status=409), ok({}))
    s = shipper(script)
    s.add("a")
    s.add("b")
    assert s.flush() is True
    s.add("c")
    s.flush()
    assert [b["offset"] for b in script.bodies()] == [0, 2]
    assert s.offset == 3 and s.dropped == 0


def test_409_with_another_offset_resends_the_batch_there():
    script = Script(ok({"error": "gap", "expectedOffset": 5}, status=409), ok({}))
    s = shipper(script)
    s.add("a")
    s.flush()
    assert [(b["offset"], lines_of(b)) for b in script.bodies()] == [(0, ["a"]), (5, ["a"])]
    assert s.offset == 6


def test_transient_failures_keep_lines_queued_until_delivered():
    script = Script(ok(status=503), httpx.ConnectError("down"), ok({}))
    s = shipper(script)
    s.add("a")
    assert s.flush() is False
    s.add("b")
    assert s.flush() is False
    assert s.pending == 2
    assert s.flush() is True
    assert lines_of(script.bodies()[-1]) == ["a", "b"]
    assert script.bodies()[-1]["offset"] == 0 and s.offset == 2


def test_refused_batches_are_dropped_and_counted():
    script = Script(ok({"error": "job finished"}, status=410), ok({}))
    s = shipper(script)
    s.add("a")
    assert s.flush() is True
    assert s.dropped == 1 and s.offset == 0


def test_close_ships_the_rest_and_gives_up_cleanly():
    script = Script(ok({}))
    s = shipper(script)
    s.add("last")
    s.close()
    assert lines_of(script.bodies()[0]) == ["last"]
    down = Script(ok(status=503))
    s = shipper(down)
    s.add("x")
    s.close()
    assert s.dropped == 1 and s.pending == 0


def test_lines_are_redacted_timestamped_and_bounded():
    script = Script(ok({}))
    s = shipper(script, redact=Redactor(["hunter22"]))
    s.add("password=hunter22\r\n")
    s.add("y" * (MAX_LINE + 10))
    s.flush()
    entries = script.bodies()[0]["lines"]
    assert entries[0]["l"] == "password=[secret]"
    assert entries[1]["l"].endswith(" [line truncated]") and len(entries[1]["l"]) < MAX_LINE + 20
    assert entries[0]["t"] == rfc3339(FakeClock().time())


def test_rfc3339():
    assert rfc3339(0.25) == "1970-01-01T00:00:00.250Z"


def test_background_flush_thread_ships_while_running():
    script = Script(ok({}))
    s = shipper(script, batch_lines=2)
    s.clock = Clock()  # the flusher thread waits on a real clock
    s.start()
    try:
        s.add("a")
        s.add("b")  # a full batch wakes the flusher
        deadline = time.monotonic() + 30
        while not script.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [lines_of(b) for b in script.bodies()] == [["a", "b"]]  # shipped before close()
    finally:
        s.close()


def test_an_outage_cannot_exhaust_memory_and_the_loss_is_said():
    script = Script(ok(status=503))
    s = shipper(script, batch_lines=10)
    s.max_pending = 5
    for i in range(8):
        s.add(f"l{i}")
    assert s.pending == 5 and s.dropped == 3
    script.answers = [ok({})]
    assert s.flush()
    s.add("after")
    s.flush()
    shipped = [line for b in script.bodies() if b for line in lines_of(b)]
    assert shipped[-7:] == [
        "l0",
        "l1",
        "l2",
        "l3",
        "l4",
        "[workflow-agent] 3 lines lost: the service was unreachable",
        "after",
    ]
