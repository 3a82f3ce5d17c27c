"""The host side of agent_host_info (module_utils/agent_host_state.py), on this machine's real
files, users, groups and sockets; and run the way the action runs it (`python -c`)."""

from __future__ import annotations

import grp
import hashlib
import http.server
import inspect
import json
import os
import pwd
import subprocess
import sys
import threading

import pytest
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils import agent_host_state
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_host_state import (
    describe,
    group_members,
    health,
    listdir,
    look,
    path_differs,
    systemd,
    user_differs,
)

ME = pwd.getpwuid(os.getuid())
MY_GROUP = grp.getgrgid(os.getgid()).gr_name


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()  # noqa: S324 - what the module compares


@pytest.fixture()
def tree(tmp_path):
    (tmp_path / "dir").mkdir(mode=0o750)
    (tmp_path / "dir").chmod(0o750)
    (tmp_path / "file").write_bytes(b"hello\n")
    (tmp_path / "file").chmod(0o640)
    (tmp_path / "link").symlink_to(tmp_path / "dir")
    return tmp_path


def test_describe_is_what_stat_says(tree):
    got = describe(str(tree / "file"))
    assert got == {
        "exists": True,
        "isreg": True,
        "isdir": False,
        "mode": "0640",
        "uid": os.getuid(),
        "gid": os.getgid(),
        "pw_name": ME.pw_name,
        "gr_name": MY_GROUP,
        "checksum": sha1(b"hello\n"),
    }
    assert describe(str(tree / "link"))["isdir"] is True  # followed, like stat(follow=true)
    assert describe(str(tree / "missing")) == {"exists": False}


def want(path, state, **kw):
    return {"path": str(path), "state": state, **kw}


def test_paths_as_wanted_do_not_differ(tree):
    mine = {"owner": ME.pw_name, "group": MY_GROUP}
    assert not path_differs(want(tree / "dir", "directory", mode="0750", **mine))
    assert not path_differs(want(tree / "file", "file", mode="0640", sha1=sha1(b"hello\n"), **mine))
    assert not path_differs(want(tree / "link", "link", src=str(tree / "dir")))
    assert not path_differs(want(tree / "missing", "absent"))
    # Unset owner, group, mode and content mean "any".
    assert not path_differs(want(tree / "file", "file", owner=None, mode=None, sha1=None))


@pytest.mark.parametrize(
    ("name", "state", "extra"),
    [
        ("dir", "directory", {"mode": "0755"}),
        ("dir", "directory", {"owner": "no-such-owner-here"}),
        ("dir", "directory", {"group": "no-such-group-here"}),
        ("file", "file", {"sha1": sha1(b"other\n")}),
        ("file", "directory", {}),
        ("missing", "file", {}),
        ("link", "link", {"src": "/elsewhere"}),
        ("dir", "link", {"src": "/elsewhere"}),
        ("file", "absent", {}),
    ],
)
def test_paths_not_as_wanted_differ(tree, name, state, extra):
    assert path_differs(want(tree / name, state, **extra))


def test_a_directory_through_a_link_counts_as_the_directory(tree):
    assert not path_differs(want(tree / "link", "directory", mode="0750"))


def test_user():
    me = {
        "name": ME.pw_name,
        "group": MY_GROUP,
        "shell": ME.pw_shell,
        "home": ME.pw_dir,
        "comment": ME.pw_gecos,
    }
    assert not user_differs(me)
    assert user_differs({**me, "shell": "/bin/false-not-mine"})
    assert user_differs({**me, "name": "no-such-user-here"})


def test_groups_and_listings(tree):
    assert group_members("no-such-group-here") is None
    assert group_members(MY_GROUP) == sorted(grp.getgrnam(MY_GROUP).gr_mem)
    assert listdir(str(tree)) == ["dir", "file", "link"]
    assert listdir(str(tree / "missing")) == []


def test_without_systemctl_every_unit_differs(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no systemctl at all
    got = systemd(
        {
            "pattern": "workflow-agent@*",
            "units": [{"name": "workflow-agent@a.service", "started": True, "enabled": True}],
        }
    )
    assert got == {"listed": [], "differ": ["workflow-agent@a.service"]}
    assert systemd({"pattern": "workflow-agent@*", "units": []}) == {"listed": [], "differ": []}


class Agent(http.server.BaseHTTPRequestHandler):
    """A local stand-in for an instance's /healthz and /metrics (what the agent serves)."""

    metrics = 'workflow_agent_info{instance="a",version="0.1.0"} 1\nworkflow_agent_slots 2\n'

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path == "/healthz":
            body, kind = json.dumps({"status": "healthy"}), "application/json"
        else:
            body, kind = self.metrics, "text/plain"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture()
def agent_port():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Agent)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_health_of_a_healthy_instance_never_via_a_proxy(agent_port, monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    got = health(agent_port)
    assert got == {
        "url": f"http://127.0.0.1:{agent_port}",
        "healthy": True,
        "status": "healthy",
        "error": None,
        "instance": "a",
        "slots": 2,
    }


def test_health_without_its_metrics_is_not_healthy(agent_port, monkeypatch):
    monkeypatch.setattr(Agent, "metrics", "# nothing\n")
    got = health(agent_port)
    assert (got["status"], got["healthy"], got["instance"], got["slots"]) == (
        "healthy",
        False,
        None,
        None,
    )


def test_health_of_a_closed_port():
    server = http.server.HTTPServer(("127.0.0.1", 0), Agent)
    port = server.server_address[1]
    server.server_close()
    got = health(port)
    assert (got["healthy"], got["status"]) == (False, "unreachable")
    assert got["error"]


def test_look_reports_the_interpreter_and_only_what_was_asked(tree):
    bare = look({})
    assert bare["executable"] == sys.executable
    assert bare["ok"] is (sys.version_info >= agent_host_state.AGENT_PYTHON)
    assert "lists" not in bare
    got = look({"lists": [str(tree)], "reads": [str(tree / "file"), str(tree / "missing")]})
    assert got["lists"] == {str(tree): ["dir", "file", "link"]}
    assert got["reads"] == {str(tree / "file"): "hello\n", str(tree / "missing"): None}
    assert got["paths_differ"] == [] and got["users_differ"] == [] and "systemd" not in got


def test_runs_as_the_action_sends_it(tree):
    """`python -c <source> <request>`: the whole file, with nothing but the standard library."""
    me = {"name": ME.pw_name, "group": MY_GROUP, "shell": ME.pw_shell, "home": ME.pw_dir}
    users = [{**me, "comment": ME.pw_gecos}, {**me, "name": "no-such-user-here", "comment": ""}]
    request = {
        "paths": [want(tree / "dir", "directory", mode="0700")],
        "groups": [MY_GROUP],
        "users": users,
    }
    run = subprocess.run(
        [sys.executable, "-I", "-c", inspect.getsource(agent_host_state), json.dumps(request)],
        capture_output=True,
        text=True,
        check=True,
        cwd=str(tree),
    )
    report = json.loads(run.stdout)
    assert report["paths_differ"] == [str(tree / "dir")]
    assert MY_GROUP in report["groups"]
    assert report["users_differ"] == ["no-such-user-here"]
    assert report["python"] == "{}.{}".format(*sys.version_info[:2])
