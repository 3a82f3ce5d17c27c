"""agent_pool through real ansible-playbook against the real emulator's pool REST API.

Agents that join a pool are real `workflow-agent run` processes using the token the module
created.
"""

from __future__ import annotations

import socket
import stat

import yaml
from agent_harness import REPO
from test_plugins_common import run_play


def documented_return() -> dict:
    """The module's RETURN documentation, as ansible-doc reads it."""
    source = (REPO / "plugins/modules/agent_pool.py").read_text()
    text = source.split('RETURN = r"""', 1)[1].split('"""', 1)[0]
    return yaml.safe_load(text)


def pool_task(emu, name="builders", task_name="pool", **options):
    args = {
        "service_url": emu.url,
        "access_token": "{{ access_token }}",
        "organization": emu.org,
        "name": name,
        **options,
    }
    return {"name": task_name, "selfhosted.workflow_agent.agent_pool": args}


def play(emu, tmp_path, tasks, token, **kw):
    return run_play(tmp_path, tasks, variables={"access_token": token}, **kw)


def pools_named(emu, name):
    return [p for p in emu.admin("GET", "/admin/pools").json()["pools"] if p["name"] == name]


def test_create_with_token_file_then_idempotent(emu, tmp_path):
    access = emu.access_token(emu.org)
    dest = tmp_path / "builders.token"
    task = pool_task(emu, description="Linux builders", token_dest=str(dest))

    run = play(emu, tmp_path / "1", [task], access)
    assert run.rc == 0, run.output
    res = run["pool"]
    assert res["changed"] is True and res["created"] is True
    assert "token" not in res and res["token_dest"] == str(dest)
    assert res["pool"]["name"] == "builders"
    assert res["pool"]["description"] == "Linux builders"
    assert res["online"] == 0
    token = dest.read_text().strip()
    assert token.startswith("pul-")
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    assert token not in run.output and access not in run.output
    [made] = pools_named(emu, "builders")
    assert made["id"] == res["pool"]["id"]

    again = play(emu, tmp_path / "2", [task], access)
    assert again.rc == 0, again.output
    assert again["pool"]["changed"] is False and again["pool"]["created"] is False
    assert again["pool"]["pool"]["id"] == res["pool"]["id"]
    assert dest.read_text().strip() == token
    assert len(pools_named(emu, "builders")) == 1


def test_check_mode_creates_nothing(emu, tmp_path):
    access = emu.access_token(emu.org)
    run = play(emu, tmp_path, [pool_task(emu, name="dry")], access, check=True)
    assert run.rc == 0, run.output
    assert run["pool"]["changed"] is True and run["pool"]["created"] is True
    assert "token" not in run["pool"]
    assert pools_named(emu, "dry") == []


def test_description_update(emu, tmp_path):
    access = emu.access_token(emu.org)
    emu.create_pool("docs", description="old")
    run = play(emu, tmp_path / "1", [pool_task(emu, name="docs", description="new")], access)
    assert run.rc == 0, run.output
    assert run["pool"]["changed"] is True and run["pool"]["created"] is False
    assert run["pool"]["pool"]["description"] == "new"
    assert pools_named(emu, "docs")[0]["description"] == "new"
    again = play(emu, tmp_path / "2", [pool_task(emu, name="docs", description="new")], access)
    assert again["pool"]["changed"] is False


def test_returned_token_lets_agents_join_and_the_gate_counts_them(emu, make_agent, tmp_path):
    access = emu.access_token(emu.org)
    run = play(emu, tmp_path / "1", [pool_task(emu, name="fleet")], access)
    assert run.rc == 0, run.output
    token = run["pool"]["token"]  # no token_dest: returned once (a real play would use no_log)
    assert token.startswith("pul-")

    a = make_agent("a", token=token).start()
    b = make_agent("b", token=token).start()
    gate = pool_task(emu, name="fleet", wait_for_online=2, wait_timeout=120, wait_delay=0.5)
    run = play(emu, tmp_path / "2", [gate], access)
    assert run.rc == 0, run.output
    res = run["pool"]
    assert res["changed"] is False and "token" not in res
    assert res["online"] == 2
    pids = sorted(str(agent.proc.pid) for agent in (a, b))
    assert sorted(x["pid"] for x in res["pool"]["agents"]) == pids
    assert {x["status"] for x in res["pool"]["agents"]} == {"online"}

    # The RETURN docs describe exactly what comes back: the published AgentPoolDetail.
    doc = documented_return()["pool"]["contains"]
    assert set(res["pool"]) == set(doc)
    for agent in res["pool"]["agents"]:
        assert set(agent) == set(doc["agents"]["contains"])
        assert isinstance(agent["lastSeen"], int)
    assert isinstance(res["pool"]["created"], int)

    short = pool_task(emu, name="fleet", wait_for_online=3, wait_timeout=2, wait_delay=0.5)
    run = play(emu, tmp_path / "3", [short], access)
    assert run.rc != 0
    msg = run["pool"]["msg"]
    assert msg.startswith("only 2 of 3 agents online in pool 'fleet' after 2s (online: ")
    host = socket.gethostname()
    assert all(f"{host}/{pid}" in msg for pid in pids)


def test_delete_needs_force_while_in_use(emu, tmp_path):
    access = emu.access_token(emu.org)
    pool = emu.create_pool("busy")
    emu.admin("PATCH", "/admin/pools/busy", {"stacks": ["acme/app/prod"]})

    run = play(emu, tmp_path / "1", [pool_task(emu, name="busy", state="absent")], access)
    assert run.rc != 0
    msg = run["pool"]["msg"]
    assert "HTTP 400" in msg and "acme/app/prod" in msg and "set force: true" in msg
    assert pools_named(emu, "busy")

    check = play(
        emu,
        tmp_path / "2",
        [pool_task(emu, name="busy", state="absent", force=True)],
        access,
        check=True,
    )
    assert check["pool"]["changed"] is True and pools_named(emu, "busy")

    run = play(
        emu, tmp_path / "3", [pool_task(emu, name="busy", state="absent", force=True)], access
    )
    assert run.rc == 0, run.output
    assert run["pool"]["changed"] is True
    assert pools_named(emu, "busy") == []
    assert pool["token"] not in run.output

    again = play(emu, tmp_path / "4", [pool_task(emu, name="busy", state="absent")], access)
    assert again.rc == 0 and again["pool"]["changed"] is False


def test_existing_pool_without_its_token_file_is_a_clear_error(emu, tmp_path):
    access = emu.access_token(emu.org)
    emu.create_pool("old")
    dest = tmp_path / "old.token"
    run = play(emu, tmp_path / "1", [pool_task(emu, name="old", token_dest=str(dest))], access)
    assert run.rc != 0
    assert "pool 'old' already exists and token_dest " + str(dest) in run["pool"]["msg"]
    assert not dest.exists()


def test_bad_access_token_and_wrong_org(emu, tmp_path):
    run = play(emu, tmp_path / "1", [pool_task(emu)], "not-a-real-token", verbose=3)
    assert run.rc != 0
    assert "the access token was rejected (HTTP 401)" in run.output
    assert "not-a-real-token" not in run.output  # no_log on access_token, even at -vvv

    other = emu.access_token("someone-else")
    run = play(emu, tmp_path / "2", [pool_task(emu)], other)
    assert run.rc != 0
    assert f"may not manage pools of organization {emu.org} (HTTP 403)" in run["pool"]["msg"]


def test_unreachable_service_is_one_message(emu, tmp_path):
    task = pool_task(emu)
    task["selfhosted.workflow_agent.agent_pool"]["service_url"] = "http://127.0.0.1:9"
    run = play(emu, tmp_path, [task], "x")
    assert run.rc != 0
    assert run["pool"]["msg"].startswith("cannot connect to http://127.0.0.1:9/api/orgs/")
