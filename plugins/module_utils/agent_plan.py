# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent role's plan for one host: the one place that decides what changes on it.

Pure functions with no Ansible imports. The role's look (the agent_host_info action, given the
role's variables as ``role``) calls ``request`` to know what to ask the host, looks, and
returns ``plan(inputs, platform, look)``; the role's tasks read ``plan.*`` and act.

Owners, modes and paths of everything the role puts on a host are declared here once:

- the config directory is root's, 0750 to the agent's group; the data directory and each
  instance's (and its ``shared/``) are the agent's, 0711 with a job user (it reaches its job's
  ``work/`` in them and lists nothing), else 0750; launchd adds the log directory;
- the CA bundle is root's 0644 (only a hash of its content goes out) or absent; systemd adds
  the service environment file (0640 to the agent's group: proxy URLs may carry credentials);
- each instance's config is root's, 0640 to the agent's group (the agent cannot rewrite it);
- the systemd template unit is root's 0644; the job user's home is its own, 0700;
- the install (versions, wheelhouses) is root's, 0755 and 0644.
"""

from __future__ import absolute_import, division, print_function

import hashlib
import json
import re

from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.agent_instances import (
    instance_plan,
)

__metaclass__ = type

UNIT = "workflow-agent"
# Per OS family of a supported platform (module_utils/agent_platform.py says which are).
FAMILIES = {
    "Debian": {
        "service_manager": "systemd",
        "python_candidates": ["/usr/bin/python3"],
        "nologin": "/usr/sbin/nologin",
        "root_group": "root",
        "launchd_dir": "",
        "launchctl": "",
    },
    "Darwin": {
        "service_manager": "launchd",
        # /usr/bin/python3 (Command Line Tools) is 3.9: prefer python.org's and Homebrew's.
        "python_candidates": [
            "/Library/Frameworks/Python.framework/Versions/Current/bin/python3",
            "/opt/homebrew/bin/python3",
            "/usr/local/bin/python3",
            "/usr/bin/python3",
        ],
        "nologin": "/usr/bin/false",
        "root_group": "wheel",
        "launchd_dir": "/Library/LaunchDaemons",
        "launchctl": "/bin/launchctl",
    },
}
NO_FAMILY = {
    "service_manager": "none",
    "python_candidates": [],
    "nologin": "",
    "root_group": "root",
    "launchd_dir": "",
    "launchctl": "",
}
# The role's variables the plan reads (workflow_agent_<name>); the action checks them.
INPUTS = (
    "state",
    "service_state",
    "service_enabled",
    "user",
    "group",
    "config_dir",
    "data_dir",
    "install_dir",
    "log_dir",
    "ca_bundle",
    "instances",
    "http_port_base",
    "config",
    "version",
    "job_user",
    "launchd_label",
    "python",
    "pip_index_url",
)
REMOVED_PIP_INDEX = (
    "workflow_agent_pip_index_url is no longer supported: hosts install the agent only from the "
    "controller's wheelhouse (--no-index --require-hashes), never from a package index; unset "
    "it, and set workflow_agent_controller_index_url for the controller's downloads instead"
)


def _sha1(text):
    return hashlib.sha1(text.encode("utf-8")).hexdigest()  # noqa: S324 - as copy compares


def family(platform):
    return FAMILIES.get((platform or {}).get("os_family"), NO_FAMILY)


def instance_paths(inputs, fam, name):
    """Where one instance's files are: its config, work directory (and its ``shared/``), and on
    launchd its LaunchDaemon and log."""
    out = {
        "config_path": "%s/%s.yaml" % (inputs["config_dir"], name),
        "data_path": "%s/%s" % (inputs["data_dir"], name),
        "shared_path": "%s/%s/shared" % (inputs["data_dir"], name),
    }
    if fam["service_manager"] == "launchd":
        out["plist_path"] = "%s/%s.%s.plist" % (fam["launchd_dir"], inputs["launchd_label"], name)
        out["log_path"] = "%s/%s.log" % (inputs["log_dir"], name)
    return out


def settings(inputs, platform, env_sha1=""):
    """Everything derived from the variables and the platform alone (no look needed)."""
    fam = family(platform)
    systemd = fam["service_manager"] == "systemd"
    instances = instance_plan(
        inputs["instances"],
        port_base=inputs["http_port_base"],
        config=inputs["config"],
        version=inputs["version"],
    )
    present = [dict(i, **instance_paths(inputs, fam, i["name"])) for i in instances["present"]]
    user, group = inputs["user"], inputs["group"]
    config_dir, data_dir = inputs["config_dir"], inputs["data_dir"]
    install_dir = inputs["install_dir"]
    job_user = inputs["job_user"] if systemd else ""
    job_home = data_dir + "/job-home"
    owned = {
        "state": "directory",
        "owner": user,
        "group": group,
        "mode": "0711" if job_user else "0750",
    }
    paths = [
        {"path": config_dir, "state": "directory", "owner": "root", "group": group, "mode": "0750"},
        dict(owned, path=data_dir),
    ]
    for instance in present:
        paths += [
            dict(owned, path=instance["data_path"]),
            dict(owned, path=instance["shared_path"]),
        ]
    if fam["service_manager"] == "launchd":
        paths.append(dict(owned, path=inputs["log_dir"], mode="0750"))
    ca_path = config_dir + "/ca-bundle.pem"
    if inputs["ca_bundle"]:
        paths.append(
            {
                "path": ca_path,
                "state": "file",
                "owner": "root",
                "group": fam["root_group"],
                "mode": "0644",
                "sha1": _sha1(inputs["ca_bundle"]),
                "content": "ca_bundle",
            }
        )
    else:
        paths.append({"path": ca_path, "state": "absent"})
    env_path = config_dir + "/environment"
    if systemd:
        paths.append(
            {
                "path": env_path,
                "state": "file",
                "owner": "root",
                "group": group,
                "mode": "0640",
                "sha1": env_sha1,
                "content": "environment",
            }
        )
    venv = "%s/%s" % (install_dir, inputs["version"])
    return {
        "service_manager": fam["service_manager"],
        "pythons": [inputs["python"]] if inputs["python"] else fam["python_candidates"],
        "root_group": fam["root_group"],
        "launchd_dir": fam["launchd_dir"],
        "launchctl": fam["launchctl"],
        "unit": UNIT,
        "unit_file": {
            "path": "/etc/systemd/system/%s@.service" % UNIT,
            "owner": "root",
            "group": "root",
            "mode": "0644",
        },
        "config_file": {"owner": "root", "group": group, "mode": "0640"},
        # LaunchDaemons: their environment may hold proxy credentials.
        "plist_file": {"owner": "root", "group": fam["root_group"], "mode": "0600"},
        # The runtime drop-in (/run) that gives an adopted upstream unit our stop timeout.
        "dropin_file": {"owner": "root", "group": "root", "dir_mode": "0755", "mode": "0644"},
        # The versions and wheelhouses: root's, readable by all (the agent runs them).
        "install": {
            "wheelhouse_dir": install_dir + "/wheelhouse",
            "owner": "root",
            "group": fam["root_group"],
            "dir_mode": "0755",
            "file_mode": "0644",
        },
        "env_path": env_path,
        "ca_path": ca_path,
        "version": inputs["version"],
        "venv": venv,
        "current": install_dir + "/current",
        # Without their config, which may hold a token (the look's result is printed with -v):
        # config_index says where in workflow_agent_instances it is.
        "instances": [
            dict(
                {k: v for k, v in entry.items() if k != "config"},
                config_index=index if "config" in entry else None,
            )
            for index, entry in enumerate(instances["instances"])
        ],
        "managed_keys": instances["managed_keys"],
        "present": present,
        "paths": paths,
        "user": {
            "name": user,
            "group": group,
            "shell": fam["nologin"],
            "home": data_dir,
            "comment": "Workflow agent",
        },
        # The process target's job user (systemd hosts only: the agent switches with setpriv).
        "job_user": job_user,
        "job_home": {
            "path": job_home,
            "state": "directory",
            "owner": job_user,
            "group": job_user,
            "mode": "0700",
        },
        "job_user_spec": {
            "name": job_user,
            "group": job_user,
            "shell": fam["nologin"],
            "home": job_home,
            "comment": "Workflow agent jobs",
        }
        if job_user
        else None,
        "health_wanted": inputs["service_state"] == "started"
        and len(present) > 0
        and not inputs.get("check_mode", False),
        "problems": instances["problems"]
        + ([REMOVED_PIP_INDEX] if inputs.get("pip_index_url") else []),
    }


_REQUEST_PATH_KEYS = ("path", "state", "owner", "group", "mode", "sha1", "src")


def request(inputs, s):
    """What the look asks the host (agent_host_info's options), for settings ``s``: the
    listings and units for both states, and with state present the wanted paths, users,
    groups, files, health ports and unit states."""
    systemd = s["service_manager"] == "systemd"
    install_dir, config_dir = inputs["install_dir"], inputs["config_dir"]
    spec = {"lists": [config_dir, install_dir, install_dir + "/wheelhouse"]}
    if not systemd:
        spec["lists"].append(s["launchd_dir"])
    if systemd:
        spec["systemd"] = {"pattern": s["unit"] + "@*", "units": []}
    if inputs["state"] != "present":
        return spec
    present = s["present"]
    job = [s["job_user_spec"]] if s["job_user_spec"] else []
    wanted = s["paths"] + [{"path": s["current"], "state": "link", "src": s["venv"]}]
    wanted += [s["job_home"]] if job else []
    spec.update(
        paths=[{k: p[k] for k in _REQUEST_PATH_KEYS if k in p} for p in wanted],
        users=[s["user"]] + job,
        groups=["docker"] if systemd else [],
        reads=[s["venv"] + "/.wheelhouse"],
        health=[i["port"] for i in present] if s["health_wanted"] else [],
        files=([s["unit_file"]["path"]] if systemd else []) + [i["config_path"] for i in present],
    )
    if systemd:
        spec["systemd"]["units"] = [
            {
                "name": "%s@%s.service" % (s["unit"], i["name"]),
                "started": inputs["service_state"] == "started",
                "enabled": bool(inputs["service_enabled"]),
            }
            for i in present
        ]
    return spec


def _existing(inputs, s, found, configured):
    """The instances the host has before this run: configs, LaunchDaemons and systemd units."""
    lists = found.get("lists") or {}
    names = list(configured)
    plist = re.compile(r"^%s\.(.*)\.plist$" % re.escape(inputs["launchd_label"]))
    for name in lists.get(s["launchd_dir"], []) if s["launchd_dir"] else []:
        m = plist.match(name)
        if m:
            names.append(m.group(1))
    unit = re.compile(r"^%s@(\S+)\.service$" % re.escape(s["unit"]))
    for name in (found.get("systemd") or {}).get("listed", []):
        m = unit.match(name)
        if m:
            names.append(m.group(1))
    return sorted(set(names))


def plan(inputs, platform, found, env_sha1="", after=None):
    """The plan for one host: ``settings`` plus what the look ``found`` (its ``state``) says
    must change. ``found`` is {} when there was no look (unsupported platform). With ``after``
    (the results of the configs and the build), also ``converge``: what changes after them."""
    s = settings(inputs, platform, env_sha1)
    present_names = [i["name"] for i in s["present"]]
    differ = set(found.get("paths_differ") or [])
    users_differ = set(found.get("users_differ") or [])
    configured = [
        n[: -len(".yaml")]
        for n in (found.get("lists") or {}).get(inputs["config_dir"], [])
        if n.endswith(".yaml")
    ]
    existing = _existing(inputs, s, found, configured)
    remove = (
        existing
        if inputs["state"] != "present"
        else [n for n in existing if n not in present_names]
    )
    fam = family(platform)
    job_home = s["job_home"]["path"]
    health = found.get("health") or []
    listed = set((found.get("systemd") or {}).get("listed") or [])
    s.update(
        configured=configured,
        existing=existing,
        # Uninstalling removes every instance; otherwise those no longer wanted.
        remove=remove,
        # Their files: LaunchDaemon, config, work directory and log.
        remove_paths=[
            path
            for name in remove
            for key, path in sorted(instance_paths(inputs, fam, name).items())
            if key != "shared_path"
        ],
        # The base is the user and the paths, but not `current` (the install's) nor the job
        # user's home (the job user's).
        base_todo=inputs["user"] in users_differ or bool(differ - {s["current"], job_home}),
        job_user_todo=bool(s["job_user"]) and (s["job_user"] in users_differ or job_home in differ),
        paths_todo=[p for p in s["paths"] if p["path"] in differ],
        # The instances a restart may concern: on systemd those whose unit systemd had loaded
        # at the look (a running one always is; the first converge has none, so its handlers
        # ask systemd about nothing); launchd's are checked by their own tasks.
        restartable=[
            i
            for i in s["present"]
            if fam["service_manager"] != "systemd"
            or "%s@%s.service" % (s["unit"], i["name"]) in listed
        ],
        # The look found every instance healthy, each answering with its own name.
        seen_healthy=len(health) == len(present_names)
        and all(h.get("healthy") for h in health)
        and [h.get("instance") for h in health] == present_names,
    )
    if after is not None:
        s["converge"] = converge(inputs, s, found, after)
    return s


def _built(after):
    """This host's wheelhouse (build_wheelhouse.py's manifest), from this batch's builds or an
    earlier batch's hosts; None when none was built (its task skipped by tags)."""
    args = after.get("build_args")
    for res in after.get("builds") or []:
        if res.get("item") == args and res.get("stdout"):
            return json.loads(res["stdout"])
    for manifest in after.get("built_before") or []:
        if manifest and manifest.get("build_args") == args:
            return manifest
    return None


def converge(inputs, s, found, after):
    """What changes after the configs are written and the wheelhouse is built, for plan ``s``
    and what the look ``found``. ``after``: ``configs_changed`` (whether a config was written),
    ``deploy_targets`` (the configs'), ``build_args``, ``builds`` (the build task's results),
    ``built_before`` (earlier batches' wheelhouses), ``unit_sha1`` (the unit file this run
    would write) and ``upstream`` (upstream's installs to adopt, C(active) and C(enabled))."""
    install_dir = inputs["install_dir"]
    systemd = s["service_manager"] == "systemd"
    built = _built(after)
    wheelhouse = None
    if built is not None:
        # The environment archive (build_wheelhouse.py), kept on the host so that a reinstall
        # of the same build copies nothing; its name is the build's key.
        wheelhouse = dict(
            built,
            build_args=after.get("build_args"),
            host_archive="%s/wheelhouse/%s" % (install_dir, built["archive"]),
        )
    targets = after.get("deploy_targets") or []
    lists = found.get("lists") or {}
    differ = found.get("paths_differ") or []
    todo = []
    members = (found.get("groups") or {}).get("docker") or []
    if "docker" in targets and systemd and inputs["user"] not in members:
        todo.append("docker")
    if (
        built is not None
        and (found.get("reads") or {}).get(s["venv"] + "/.wheelhouse") != built["key"]
    ):
        todo.append("install")
    if s["current"] in differ:
        todo.append("current")
    if systemd:
        have = (found.get("files") or {}).get(s["unit_file"]["path"]) or {}
        want = s["unit_file"]
        if not (
            have.get("isreg")
            and (have.get("pw_name"), have.get("gr_name"), have.get("mode"))
            == (want["owner"], want["group"], want["mode"])
            and have.get("checksum") == after.get("unit_sha1")
        ):
            todo.append("unit")
    else:
        todo.append("launchd")  # its template tasks compare the LaunchDaemons
    # What the host has of installs that this run does not keep (removed after the restarts).
    unused = []
    if built is not None:
        keep = {s["venv"], s["current"], s["install"]["wheelhouse_dir"]}
        keep.add(wheelhouse["host_archive"])
        have = ["%s/%s" % (install_dir, n) for n in lists.get(install_dir, [])]
        have += [
            "%s/wheelhouse/%s" % (install_dir, n)
            for n in lists.get(install_dir + "/wheelhouse", [])
        ]
        unused = [p for p in have if p not in keep]
    upstream = after.get("upstream") or []
    # Upstream's units to stop once ours are healthy: the running ones, then the enabled ones.
    switch = [u for u in upstream if u.get("active")]
    switch += [u for u in upstream if not u.get("active") and u.get("enabled")]
    if inputs["service_state"] != "started" or not s["present"]:
        switch = []
    # Whether this run may restart or start an instance (launchd: always assumed).
    touched = (
        not systemd
        or s["base_todo"]
        or bool(s["remove"])
        or bool(after.get("configs_changed"))
        or bool(todo)
    )
    health_check = s["health_wanted"] and (touched or not s["seen_healthy"])
    states_differ = bool((found.get("systemd") or {}).get("differ"))
    return {
        "wheelhouse": wheelhouse,
        "install_key": built["key"] if built is not None else None,
        # files/install_env.py's argument (the task adds check mode): which archive, checked
        # against which sha256, becomes which version's venv, recorded with which key.
        "install": {
            "archive": wheelhouse["host_archive"],
            "sha256": built["archive_sha256"],
            "venv": s["venv"],
            "key": built["key"],
        }
        if "install" in todo
        else None,
        "todo": todo,
        "unused": unused,
        "switch": switch,
        # Ask the instances for their health after this run (also when a unit was started).
        "health_check": health_check,
        # Anything to install, restart, start, check, switch or remove: else converge.yml is
        # skipped whole.
        "todo_any": touched or health_check or states_differ or bool(unused) or bool(switch),
    }
