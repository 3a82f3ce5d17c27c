"""The agent role's wanted host state (module_utils/agent_host.py)."""

from __future__ import annotations

import hashlib

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_host import (
    base_paths,
    expected,
    proxy_env,
)

PRESENT = [{"name": "1", "port": 8080}, {"name": "b", "port": 8081}]
BASE = {
    "user": "wfa",
    "group": "wfa",
    "config_dir": "/etc/wfa",
    "data_dir": "/var/lib/wfa",
}


def test_proxy_env_in_both_spellings_and_nothing_unset():
    assert proxy_env({"https": "http://p:3128", "no_proxy": "a,b", "http": ""}) == {
        "HTTPS_PROXY": "http://p:3128",
        "https_proxy": "http://p:3128",
        "NO_PROXY": "a,b",
        "no_proxy": "a,b",
    }
    assert proxy_env({}) == proxy_env(None) == {}


def test_systemd_paths_with_a_job_user_a_ca_and_the_environment_file():
    paths = base_paths(
        PRESENT,
        service_manager="systemd",
        job_user="wfa-job",
        ca_bundle="PEM\n",
        ca_path="/etc/wfa/ca.pem",
        env_path="/etc/wfa/environment",
        env_text="A=1\n",
        **BASE,
    )
    by_path = {p["path"]: p for p in paths}
    assert list(by_path) == [
        "/etc/wfa",
        "/var/lib/wfa",
        "/var/lib/wfa/1",
        "/var/lib/wfa/1/shared",
        "/var/lib/wfa/b",
        "/var/lib/wfa/b/shared",
        "/etc/wfa/ca.pem",
        "/etc/wfa/environment",
    ]
    assert by_path["/etc/wfa"] == {
        "path": "/etc/wfa",
        "state": "directory",
        "owner": "root",
        "group": "wfa",
        "mode": "0750",
    }
    # The job user reaches its work/ through the data directories: x only.
    assert {by_path[p]["mode"] for p in list(by_path)[1:6]} == {"0711"}
    assert by_path["/etc/wfa/ca.pem"]["sha1"] == hashlib.sha1(b"PEM\n").hexdigest()  # noqa: S324
    assert "PEM" not in str(paths)  # contents never go out, only their hash
    assert by_path["/etc/wfa/environment"]["mode"] == "0640"


def test_launchd_paths_without_a_job_user_or_ca():
    paths = base_paths(
        PRESENT[:1],
        service_manager="launchd",
        log_dir="/var/log/wfa",
        ca_path="/etc/wfa/ca.pem",
        **BASE,
    )
    assert [p["path"] for p in paths] == [
        "/etc/wfa",
        "/var/lib/wfa",
        "/var/lib/wfa/1",
        "/var/lib/wfa/1/shared",
        "/var/log/wfa",
        "/etc/wfa/ca.pem",
    ]
    assert paths[1]["mode"] == "0750"
    assert paths[-1] == {"path": "/etc/wfa/ca.pem", "state": "absent"}


SPEC = {
    "config_dir": "/etc/wfa",
    "install_dir": "/opt/wfa",
    "venv": "/opt/wfa/0.2.0",
    "unit": "wfa",
    "unit_path": "/etc/systemd/system/wfa@.service",
    "paths": [{"path": "/etc/wfa", "state": "directory"}],
    "present": PRESENT,
    "user_spec": {"name": "wfa"},
}


def test_state_absent_asks_for_discovery_only():
    assert expected("absent", "systemd", **SPEC) == {
        "lists": ["/etc/wfa", "/opt/wfa", "/opt/wfa/wheelhouse"],
        "systemd": {"pattern": "wfa@*", "units": []},
    }
    assert expected("absent", "launchd", launchd_dir="/Library/LaunchDaemons", **SPEC) == {
        "lists": ["/etc/wfa", "/opt/wfa", "/opt/wfa/wheelhouse", "/Library/LaunchDaemons"],
    }


def test_state_present_on_systemd():
    got = expected("present", "systemd", health=True, started=False, enabled=True, **SPEC)
    assert got["paths"][-1] == {
        "path": "/opt/wfa/current",
        "state": "link",
        "src": "/opt/wfa/0.2.0",
    }
    assert got["groups"] == ["docker"]
    assert got["reads"] == ["/opt/wfa/0.2.0/.wheelhouse"]
    assert got["health"] == [8080, 8081]
    assert got["files"] == [
        "/etc/systemd/system/wfa@.service",
        "/etc/wfa/1.yaml",
        "/etc/wfa/b.yaml",
    ]
    assert got["systemd"]["units"] == [
        {"name": "wfa@1.service", "started": False, "enabled": True},
        {"name": "wfa@b.service", "started": False, "enabled": True},
    ]


def test_the_job_user_and_its_home_are_looked_at_too():
    job = {"name": "wfa-job", "group": "wfa-job", "shell": "/x", "home": "/var/lib/wfa/job-home"}
    got = expected("present", "systemd", job_user_spec=job, **SPEC)
    assert got["users"] == [{"name": "wfa"}, job]
    assert got["paths"][-1] == {
        "path": "/var/lib/wfa/job-home",
        "state": "directory",
        "owner": "wfa-job",
        "group": "wfa-job",
        "mode": "0700",
    }
    assert expected("present", "systemd", **SPEC)["users"] == [{"name": "wfa"}]


def test_state_present_on_launchd_without_health():
    got = expected("present", "launchd", **SPEC)
    assert "systemd" not in got
    assert (got["groups"], got["health"]) == ([], [])
    assert got["files"] == ["/etc/wfa/1.yaml", "/etc/wfa/b.yaml"]
