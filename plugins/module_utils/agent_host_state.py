# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host side of ``agent_host_info``: one look at a host in one round trip.

The action plugin (plugins/action/agent_host_info.py) sends this file's source to the host as
``<python> -c <source> <request as JSON>``, once per candidate interpreter until one is usable,
without Ansible's module wrapper: the cheapest round trip there is, and a host whose Python
Ansible would not pick is still looked at. Nothing here imports Ansible, and nothing runs on
import; only the standard library, on any Python 3.7 or later (RHEL 9's and macOS's own 3.9
too).

It reports this interpreter (the agent's Python is chosen from it), what the host already has
(listings, stat-like facts of files, group members, the first 4 KiB of the files in
``reads``), which wanted paths and which wanted users the host does not match (type, owner,
group, mode, content sha1, link target), the systemd units not in their wanted states, and
the health of local agent instances. When in doubt an expectation counts as unmet: the caller
then runs the ordinary module, which decides.
"""

from __future__ import absolute_import, division, print_function

import contextlib
import grp
import hashlib
import json
import os
import platform
import pwd
import re
import stat
import subprocess
import sys
import urllib.request

__metaclass__ = type

TYPES = {stat.S_IFDIR: "directory", stat.S_IFREG: "file", stat.S_IFLNK: "link"}


def owner_names(st):
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    return owner, group


def sha1(path):
    digest = hashlib.sha1()  # noqa: S324 - a content comparison, as Ansible's copy does
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


def describe(path):
    """What ansible.builtin.stat (sha1 checksum, following links) says of a path."""
    try:
        st = os.stat(path)
    except OSError:
        return {"exists": False}
    owner, group = owner_names(st)
    out = {
        "exists": True,
        "isreg": stat.S_ISREG(st.st_mode),
        "isdir": stat.S_ISDIR(st.st_mode),
        "mode": f"{stat.S_IMODE(st.st_mode):04o}",
        "uid": st.st_uid,
        "gid": st.st_gid,
        "pw_name": owner,
        "gr_name": group,
    }
    if out["isreg"]:
        with contextlib.suppress(OSError):
            out["checksum"] = sha1(path)
    return out


def path_differs(want):
    """Whether a path is not as wanted: {path, state: directory|file|link|absent, owner, group,
    mode, sha1, src}. Directories and files are followed through symlinks, like file/copy do."""
    path = want["path"]
    try:
        st = os.lstat(path) if want["state"] in ("link", "absent") else os.stat(path)
    except OSError:
        return want["state"] != "absent"
    if want["state"] == "absent":
        return True
    if TYPES.get(stat.S_IFMT(st.st_mode)) != want["state"]:
        return True
    if want["state"] == "link":
        return os.readlink(path) != want["src"]
    owner, group = owner_names(st)
    if want.get("owner") not in (None, owner) or want.get("group") not in (None, group):
        return True
    if want.get("mode") is not None and f"{stat.S_IMODE(st.st_mode):04o}" != want["mode"]:
        return True
    if want.get("sha1") is not None:
        try:
            return sha1(path) != want["sha1"]
        except OSError:
            return True
    return False


def user_differs(want):
    """{name, group, shell, home, comment}: whether the user is missing or set otherwise."""
    try:
        entry = pwd.getpwnam(want["name"])
        primary = grp.getgrgid(entry.pw_gid).gr_name
    except KeyError:
        return True
    have = (primary, entry.pw_shell, entry.pw_dir, entry.pw_gecos)
    return have != (want["group"], want["shell"], want["home"], want["comment"])


def group_members(name):
    """The group's supplementary members, or None when there is no such group."""
    try:
        return sorted(grp.getgrnam(name).gr_mem)
    except KeyError:
        return None


def listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def systemctl(args):
    """systemctl's output; without systemctl at all, an empty failed run (every unit differs)."""
    try:
        return subprocess.run(["systemctl"] + args, capture_output=True, text=True, check=False)
    except OSError as exc:
        return subprocess.CompletedProcess(args, 127, "", str(exc))


def systemd(spec):
    """Instances systemd knows (`pattern`), and the units in `units` not in the wanted state."""
    out = {"listed": [], "differ": []}
    # No match or no systemd: an empty listing, which is the answer.
    run = systemctl(
        ["list-units", "--all", "--plain", "--no-legend", "--type=service", spec["pattern"]]
    )
    out["listed"] = [line.split()[0] for line in run.stdout.splitlines() if line.strip()]
    units = spec.get("units") or []
    if not units:
        return out
    # Units systemd does not know are still shown, as not-found.
    show = systemctl(
        ["show", "-p", "Id", "-p", "ActiveState", "-p", "UnitFileState", "--"]
        + [u["name"] for u in units]
    )
    seen = {}
    for block in show.stdout.split("\n\n"):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if "Id" in props:
            seen[props["Id"]] = props
    for unit in units:
        props = seen.get(unit["name"], {})
        active = props.get("ActiveState", "")
        enabled = props.get("UnitFileState", "")
        # What systemd_service would change: started = active/activating, stopped = neither
        # (nor deactivating); enabled/disabled exactly (anything else: let the module decide).
        if unit["started"]:
            ok_active = active in ("active", "activating")
        else:
            ok_active = active in ("inactive", "failed")
        ok_enabled = enabled == ("enabled" if unit["enabled"] else "disabled")
        if show.returncode != 0 or not (ok_active and ok_enabled):
            out["differ"].append(unit["name"])
    return out


def health(port):
    """What agent_info would say of an instance, from its /healthz and /metrics: healthy, its
    name and slots. Anything unexpected counts as not healthy (the role then asks agent_info)."""
    base = f"http://127.0.0.1:{port}"
    out = {"url": base, "healthy": False, "status": "unreachable", "error": None, "instance": None}
    out["slots"] = None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    try:
        with opener.open(base + "/healthz", timeout=5) as resp:
            body = json.loads(resp.read().decode("utf-8"))
        out["status"] = body["status"]
        out["healthy"] = resp.status == 200 and body["status"] == "healthy"
        with opener.open(base + "/metrics", timeout=5) as resp:
            text = resp.read().decode("utf-8")
        name = re.search(r'^workflow_agent_info\{[^}]*\binstance="([^"]*)"', text, re.M)
        slots = re.search(r"^workflow_agent_slots(?:\{\})? ([0-9.eE+]+)$", text, re.M)
        out["instance"] = name.group(1) if name else None
        out["slots"] = int(float(slots.group(1))) if slots else None
        if out["instance"] is None or out["slots"] is None:
            out["healthy"] = False
    except Exception as exc:  # noqa: BLE001 - any failure only means "ask agent_info"
        out["healthy"] = False
        out["error"] = str(exc)[:200]
    return out


AGENT_PYTHON = (3, 10)  # the oldest Python the agent runs on (agent/pyproject.toml)


def look(spec):
    """The report for one request (the keys of the module's options; all optional)."""
    out = {
        "python": "{}.{}".format(*sys.version_info[:2]),
        "ok": sys.version_info >= AGENT_PYTHON,
        "executable": sys.executable,
        "system": sys.platform,
        "machine": platform.machine(),
        "libc": platform.libc_ver()[1],
        "macos": platform.mac_ver()[0],
    }
    if spec:
        out["lists"] = {path: listdir(path) for path in spec.get("lists", [])}
        out["files"] = {path: describe(path) for path in spec.get("files", [])}
        out["paths_differ"] = [w["path"] for w in spec.get("paths", []) if path_differs(w)]
        out["users_differ"] = [u["name"] for u in spec.get("users", []) if user_differs(u)]
        out["groups"] = {name: group_members(name) for name in spec.get("groups", [])}
        out["reads"] = {}
        for path in spec.get("reads", []):
            try:
                with open(path, encoding="utf-8") as fh:
                    out["reads"][path] = fh.read(4096)
            except (OSError, ValueError):
                out["reads"][path] = None
        if spec.get("systemd"):
            out["systemd"] = systemd(spec["systemd"])
        out["health"] = [health(port) for port in spec.get("health", [])]
    return out


def main():
    sys.stdout.write(json.dumps(look(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {})) + "\n")


if __name__ == "__main__":
    main()
