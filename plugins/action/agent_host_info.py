# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""agent_host_info: one look at a host (plugins/modules/agent_host_info.py documents it).

The host side is plugins/module_utils/agent_host_state.py, sent as ``python -c`` with each
candidate interpreter in turn: one round trip per candidate and no module wrapper, which keeps
a converge that changes nothing as cheap as the rollout benchmark asks.
"""

from __future__ import absolute_import, division, print_function

import inspect
import json

from ansible.module_utils.six.moves import shlex_quote
from ansible.plugins.action import ActionBase
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils import (
    agent_host_state,
    agent_plan,
    agent_platform,
)

__metaclass__ = type

_PATH = {
    "path": {"type": "path", "required": True},
    "state": {"type": "str", "required": True, "choices": ["directory", "file", "link", "absent"]},
    "owner": {"type": "str"},
    "group": {"type": "str"},
    "mode": {"type": "str"},
    "sha1": {"type": "str"},
    "src": {"type": "path"},
}
_USER = {
    "name": {"type": "str", "required": True},
    "group": {"type": "str", "required": True},
    "shell": {"type": "str", "required": True},
    "home": {"type": "path", "required": True},
    "comment": {"type": "str", "required": True},
}
_UNIT = {
    "name": {"type": "str", "required": True},
    "started": {"type": "bool", "default": True},
    "enabled": {"type": "bool", "default": True},
}
ARGUMENT_SPEC = {
    "pythons": {"type": "list", "elements": "str", "default": []},
    "platform": {"type": "bool", "default": False},
    "role": {"type": "dict"},
    "need_agent_python": {"type": "bool", "default": True},
    "lists": {"type": "list", "elements": "path", "default": []},
    "files": {"type": "list", "elements": "path", "default": []},
    "reads": {"type": "list", "elements": "path", "default": []},
    "paths": {"type": "list", "elements": "dict", "default": [], "options": _PATH},
    "users": {"type": "list", "elements": "dict", "default": [], "options": _USER},
    "groups": {"type": "list", "elements": "str", "default": []},
    "systemd": {
        "type": "dict",
        "options": {
            "pattern": {"type": "str", "required": True},
            "units": {"type": "list", "elements": "dict", "default": [], "options": _UNIT},
        },
    },
    "health": {"type": "list", "elements": "int", "default": []},
}
REQUEST_KEYS = ("lists", "files", "reads", "paths", "users", "groups", "systemd", "health")
HOST_KEYS = ("python", "ok", "executable", "system", "machine", "libc", "macos")


def report_of(stdout):
    """The JSON report in the output (its last line that is a JSON object), or None."""
    for line in reversed((stdout or "").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                report = json.loads(line)
            except ValueError:
                return None
            return report if isinstance(report, dict) and "python" in report else None
    return None


def problems(tried, need_agent_python):
    """Why no candidate will do: none runs at all, or (when the agent needs one) none is 3.10+."""
    names = ", ".join(t["path"] for t in tried)
    ran = [t for t in tried if t["ran"]]
    if not ran:
        why = next((t["error"] for t in tried if t["error"]), "no output")
        return [
            "None of %s runs on this host (%s); install Python %s or later or set "
            "workflow_agent_python" % (names, why, "%d.%d" % agent_host_state.AGENT_PYTHON)
        ]
    if need_agent_python and not any(t["ok"] for t in ran):
        return [
            "The agent needs Python %s or later on the host; none of %s is one (found: %s). "
            "Install one (macOS: from python.org or Homebrew) or set "
            "workflow_agent_python"
            % ("%d.%d" % agent_host_state.AGENT_PYTHON, names, ", ".join(t["version"] for t in ran))
        ]
    return []


def host_source():
    return inspect.getsource(agent_host_state)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True  # it only looks
    _supports_async = False

    def _platform(self):
        """The platform, from one shell command (no Python needed)."""
        res = self._low_level_execute_command(agent_platform.SCRIPT)
        return agent_platform.parse_platform((res.get("stdout") or "").splitlines())

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        platform = self._platform() if args["platform"] else None
        role = args["role"]
        settings = None
        if role is not None:
            # The agent role's look: what to ask and which Pythons to try come from its plan.
            missing = [key for key in agent_plan.INPUTS if key not in role]
            if missing:
                result.update(failed=True, msg="role: missing %s" % ", ".join(missing))
                return result
            platform = platform or role.get("platform") or {}
            role = dict(role, check_mode=self._task.check_mode)
            if role.get("after") is not None:
                # After the configs and the build: the rest of the plan, from the earlier look
                # (the host is not asked again).
                result.update(
                    changed=False,
                    plan=agent_plan.plan(
                        role,
                        platform,
                        role.get("found") or {},
                        role.get("environment_sha1", ""),
                        after=role["after"],
                    ),
                )
                return result
            settings = agent_plan.settings(role, platform, role.get("environment_sha1", ""))
            args = dict(
                args, pythons=settings["pythons"], need_agent_python=role["state"] == "present"
            )
            args.update(agent_plan.request(role, settings))
        if platform is not None:
            result["platform"] = platform
        if not args["pythons"] or (settings is not None and not platform.get("supported")):
            # Only the platform was asked for, or the role's platform is one it cannot serve.
            result.update(changed=False, host={}, state={}, tried=[], problems=[])
            if settings is not None:
                result["plan"] = agent_plan.plan(
                    role, platform, {}, role.get("environment_sha1", "")
                )
            return result
        request = {key: args[key] for key in REQUEST_KEYS if args[key]}
        source = host_source()
        tried, reports = [], []
        for python in args["pythons"]:
            cmd = " ".join(
                shlex_quote(part) for part in (python, "-c", source, json.dumps(request))
            )
            res = self._low_level_execute_command(cmd)
            report = report_of(res.get("stdout")) if res.get("rc") == 0 else None
            output = (res.get("stderr") or res.get("stdout") or "").strip()[-300:]
            tried.append(
                {
                    "path": python,
                    "ran": report is not None,
                    "version": report["python"] if report else None,
                    "ok": bool(report and report["ok"]),
                    "error": None if report else output or "no report (rc %s)" % res.get("rc"),
                }
            )
            if report:
                reports.append(report)
                if report["ok"] or not args["need_agent_python"]:
                    break  # the first usable candidate is the answer
        chosen = next((r for r in reports if r["ok"]), {})
        state = chosen or (reports[0] if reports else {})
        state = {key: value for key, value in state.items() if key not in HOST_KEYS}
        result.update(
            changed=False,
            host={key: chosen[key] for key in HOST_KEYS if key in chosen},
            state=state,
            tried=tried,
            problems=problems(tried, args["need_agent_python"]),
        )
        if settings is not None:
            result["plan"] = agent_plan.plan(
                role, platform, state, role.get("environment_sha1", "")
            )
        return result
