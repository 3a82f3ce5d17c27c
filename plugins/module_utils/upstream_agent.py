# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Find installs of Pulumi's customer-managed agent on a systemd host (host side, no I/O here
beyond what the callers pass in, so the unit tests drive it with plain strings).

An upstream install is a systemd unit whose ExecStart runs ``customer-managed-workflow-agent``
(2.x) or ``customer-managed-deployment-agent`` (1.x), as upstream's AMI unit
(``agent-images/packer/deployment_agent.service_ubuntu``) does. What the agent in that unit
would read as its config is decided on the controller, by the agent's own discovery order
(``workflow_agent.config.candidate_paths``): this side only reports the unit's directories and
the files of both config names in them.
"""

from __future__ import absolute_import, division, print_function

import os
import posixpath
import shlex

__metaclass__ = type

COMMANDS = ("customer-managed-workflow-agent", "customer-managed-deployment-agent")
# Both names, the current one first (the agent's CONFIG_FILE_NAME and LEGACY_CONFIG_FILE_NAME).
CONFIG_NAMES = ("pulumi-workflow-agent.yaml", "pulumi-deployment-agent.yaml")
# Where systemd loads unit files from, highest precedence first.
UNIT_DIRS = (
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
)
# systemd's fixed search path for an ExecStart command without a slash.
EXEC_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
# ExecStart= prefixes (systemd.service(5), "Command lines").
EXEC_PREFIXES = "@-:+!|"


class UnitError(Exception):
    """A unit file that cannot be read as an upstream install; str() is one line."""


def parse_unit(text):
    """The [Service] settings of a unit file: {name: [values in order]} (continuation lines
    joined, comments dropped; an empty assignment resets the list, as systemd does)."""
    section = None
    out = {}
    logical = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if pending:
            line = pending + " " + line
            pending = ""
        elif not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        logical.append(line)
    if pending:
        logical.append(pending)
    for line in logical:
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section != "Service" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        key, value = key.strip(), value.strip()
        if value == "":
            out[key] = []
        else:
            out.setdefault(key, []).append(value)
    return out


def exec_argv(value):
    """ExecStart's argv, its prefixes removed; UnitError when it cannot be split."""
    value = value.lstrip(EXEC_PREFIXES)
    try:
        argv = shlex.split(value)
    except ValueError as exc:
        raise UnitError(
            "ExecStart=%s: cannot be split into arguments (%s)" % (value, exc)
        ) from None
    return argv


def upstream_command(argv):
    """The upstream command name that argv runs, or None."""
    if not argv:
        return None
    name = posixpath.basename(argv[0])
    return name if name in COMMANDS else None


def explicit_config(argv):
    """The path of ``--config PATH`` / ``--config=PATH`` (our agent's extension), or None."""
    for i, arg in enumerate(argv[1:], start=1):
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config="):
            return arg[len("--config=") :]
    return None


def environment(values):
    """Environment= assignments as a dict (later ones win), as systemd splits them."""
    env = {}
    for value in values:
        try:
            words = shlex.split(value)
        except ValueError:
            continue
        for word in words:
            if "=" in word:
                key, val = word.split("=", 1)
                env[key] = val
    return env


def resolve_executable(path, exists):
    """An ExecStart command as systemd finds it (absolute, or on its fixed search path)."""
    if "/" in path:
        return path
    for d in EXEC_PATH:
        candidate = posixpath.join(d, path)
        if exists(candidate):
            return candidate
    return path


def working_directory(values, home):
    """The unit's current directory: WorkingDirectory= (a leading '-' only makes a missing one
    non-fatal; '~' is the user's home), or '/' without one, as systemd sets it."""
    if not values:
        return "/"
    value = values[-1].lstrip("-")
    if value == "~":
        return home
    return value or "/"


def describe(name, path, text, home_of, exists, realpath=os.path.realpath):
    """What an upstream unit is, or None when its ExecStart runs something else.

    ``home_of(user)`` is the user's home directory; ``exists(path)`` and ``realpath(path)``
    look at the host. The directories are real paths, as the agent compares them.
    """
    service = parse_unit(text)
    starts = service.get("ExecStart") or []
    if not starts:
        return None
    argv = exec_argv(starts[0])
    command = upstream_command(argv)
    if command is None:
        return None
    user = (service.get("User") or ["root"])[-1]
    home = home_of(user)
    executable = resolve_executable(argv[0], exists)
    cwd = working_directory(service.get("WorkingDirectory"), home)
    option = explicit_config(argv)
    return {
        "unit": name,
        "unit_path": path,
        "command": command,
        "executable": executable,
        "argv": argv,
        "user": user,
        "home": home,
        "working_directory": cwd,
        "kill_mode": (service.get("KillMode") or ["control-group"])[-1],
        "environment": environment(service.get("Environment") or []),
        "config_option": option if option is None else posixpath.join(cwd, option),
        # Where the agent looks: cwd, home, /etc, the binary's (resolved) directory.
        "dirs": {
            "cwd": realpath(cwd),
            "home": realpath(home),
            "exe_dir": posixpath.dirname(realpath(executable)),
        },
    }


def candidate_files(install):
    """Every file the controller may choose from: both names in each directory, and --config."""
    files = []
    for d in (install["dirs"]["cwd"], install["dirs"]["home"], "/etc", install["dirs"]["exe_dir"]):
        for name in CONFIG_NAMES:
            path = posixpath.join(d, name)
            if path not in files:
                files.append(path)
    if install["config_option"] and install["config_option"] not in files:
        files.append(install["config_option"])
    return files
