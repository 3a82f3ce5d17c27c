# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent role's wanted state of a host: what its look at the host (the agent_host_info
module) is asked, and the proxy environment of the instances.

Pure functions with no Ansible imports (the ``agent_proxy_env``, ``agent_base_paths`` and
``agent_host_expected`` filters are their face):

- ``base_paths``: the directories and files the role puts in place before it writes the
  configs. The config directory is root's (0750 to the agent's group); the data directory and
  each instance's (and its ``shared/``) are the agent's, 0711 with a job user (it reaches its
  job's ``work/`` in them and lists nothing), else 0750; launchd adds the log directory. The CA
  bundle is root's 0644 (only a hash of its content goes out) or absent; systemd adds the
  service environment file (0640 to the agent's group: proxy URLs may carry credentials).
- ``expected``: discovery for both states (the listings of the config and install directories,
  the wheelhouse, the LaunchDaemons directory, the instance units), and with state present the
  wanted paths, user, groups, files, health ports and unit states.
- ``proxy_env``: HTTP(S)_PROXY and NO_PROXY in both spellings (Python honours both, curl in
  jobs only lowercase).
"""

from __future__ import absolute_import, division, print_function

import hashlib

__metaclass__ = type


def proxy_env(proxy):
    """``workflow_agent_proxy`` ({http, https, no_proxy}) -> environment variables."""
    env = {}
    for key in ("http", "https", "no_proxy"):
        value = (proxy or {}).get(key) or ""
        if value:
            name = key if key == "no_proxy" else key + "_proxy"
            env[name.upper()] = value
            env[name] = value
    return env


def _sha1(text):
    return hashlib.sha1(text.encode("utf-8")).hexdigest()  # noqa: S324 - as copy compares


def base_paths(
    present,
    user,
    group,
    config_dir,
    data_dir,
    service_manager,
    job_user="",
    log_dir="",
    ca_bundle="",
    ca_path="",
    root_group="root",
    env_path="",
    env_text="",
):
    data_mode = "0711" if job_user else "0750"
    owned = {"state": "directory", "owner": user, "group": group, "mode": data_mode}
    out = [
        {"path": config_dir, "state": "directory", "owner": "root", "group": group, "mode": "0750"},
        dict(owned, path=data_dir),
    ]
    for instance in present:
        for sub in ("", "/shared"):
            out.append(dict(owned, path="%s/%s%s" % (data_dir, instance["name"], sub)))
    if service_manager == "launchd":
        out.append(
            {"path": log_dir, "state": "directory", "owner": user, "group": group, "mode": "0750"}
        )
    if ca_bundle:
        out.append(
            {
                "path": ca_path,
                "state": "file",
                "owner": "root",
                "group": root_group,
                "mode": "0644",
                "sha1": _sha1(ca_bundle),
            }
        )
    else:
        out.append({"path": ca_path, "state": "absent"})
    if service_manager == "systemd":
        out.append(
            {
                "path": env_path,
                "state": "file",
                "owner": "root",
                "group": group,
                "mode": "0640",
                "sha1": _sha1(env_text),
            }
        )
    return out


def expected(
    state,
    service_manager,
    config_dir,
    install_dir,
    venv,
    unit,
    unit_path,
    paths,
    present,
    user_spec,
    launchd_dir="",
    health=False,
    started=True,
    enabled=True,
    job_user_spec=None,
):
    """The options of the role's agent_host_info call (see there). ``job_user_spec``: the
    process target's job user, whose home (0700, its own) is looked at too."""
    systemd = service_manager == "systemd"
    spec = {"lists": [config_dir, install_dir, install_dir + "/wheelhouse"]}
    if not systemd:
        spec["lists"].append(launchd_dir)
    if systemd:
        spec["systemd"] = {"pattern": unit + "@*", "units": []}
    if state != "present":
        return spec
    job = [job_user_spec] if job_user_spec else []
    job_home = [
        {
            "path": j["home"],
            "state": "directory",
            "owner": j["name"],
            "group": j["group"],
            "mode": "0700",
        }
        for j in job
    ]
    spec.update(
        paths=list(paths)
        + [{"path": install_dir + "/current", "state": "link", "src": venv}]
        + job_home,
        users=[user_spec] + job,
        groups=["docker"] if systemd else [],
        reads=[venv + "/.wheelhouse"],
        health=[i["port"] for i in present] if health else [],
        files=([unit_path] if systemd else [])
        + ["%s/%s.yaml" % (config_dir, i["name"]) for i in present],
    )
    if systemd:
        spec["systemd"]["units"] = [
            {"name": "%s@%s.service" % (unit, i["name"]), "started": started, "enabled": enabled}
            for i in present
        ]
    return spec
