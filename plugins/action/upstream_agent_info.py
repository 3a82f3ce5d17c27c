# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run upstream_agent_info on the host, then, on the controller, pick each install's config by
the agent's own discovery order and validate it with the agent's own schema (the path
agent_config uses: one source of truth for both)."""

from __future__ import absolute_import, division, print_function

import os
import pathlib
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils import _agent_schema
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils._agent_schema import (
    MASK,
    plain,
)

__metaclass__ = type

ARGUMENT_SPEC = {"exclude": {"type": "list", "elements": "str", "default": []}}


def load_schema():
    """The agent's schema and yaml; AnsibleActionFail saying why when they cannot be loaded."""
    try:
        return _agent_schema.load()
    except _agent_schema.SchemaUnavailable as exc:
        raise AnsibleActionFail("upstream_agent_info: %s" % exc) from None


def parse_text(schema, text, path):
    """The mapping the agent reads from a file with this text; AnsibleActionFail naming path."""
    fd, tmp = tempfile.mkstemp(prefix="upstream-agent-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        return schema.read_file(pathlib.Path(tmp))
    except schema.ConfigError as exc:
        raise AnsibleActionFail(describe_error(exc, path)) from None
    finally:
        os.unlink(tmp)


def describe_error(exc, path):
    where = "%s: " % exc.key if exc.key else ""
    return "upstream_agent_info: %s: %s%s" % (path, where, exc.reason)


def choose(schema, install):
    """(path or None, searched, notices): the file the agent in this unit reads."""
    found = install["candidates"]
    if install.get("config_option"):
        path = install["config_option"]
        if path not in found:
            raise AnsibleActionFail(
                "upstream_agent_info: %s: --config %s: no such file" % (install["unit"], path)
            )
        return path, [path], []
    dirs = install["dirs"]
    searched = [
        str(p)
        for p in schema.candidate_paths(cwd=dirs["cwd"], home=dirs["home"], exe_dir=dirs["exe_dir"])
    ]
    existing = [p for p in searched if p in found]
    notices = []
    chosen = existing[0] if existing else None
    legacy = [p for p in existing if os.path.basename(p) == schema.LEGACY_CONFIG_FILE_NAME]
    if chosen is not None and os.path.basename(chosen) == schema.CONFIG_FILE_NAME and legacy:
        notices.append(
            "%s: not read: %s (the current file name) wins over the legacy %s"
            % (legacy[0], chosen, schema.LEGACY_CONFIG_FILE_NAME)
        )
    return chosen, searched, notices


def adopt(schema, install, exclude):
    """The install's report (masked) and its adopted settings (real values)."""
    path, searched, notices = choose(schema, install)
    data = {}
    if path is not None:
        entry = install["candidates"][path]
        if entry["text"] is None:
            raise AnsibleActionFail("upstream_agent_info: %s: %s" % (path, entry["error"]))
        data = parse_text(schema, entry["text"], path)
    overlay, _origins = schema.env_overlay(install["environment"])
    if path is None and not overlay.get("token") and not overlay.get("oidc_token_file"):
        raise AnsibleActionFail(
            "upstream_agent_info: %s: no config file found (looked in: %s) and %s is not set in "
            "the unit" % (install["unit"], ", ".join(searched), schema.env_var("token"))
        )
    merged = dict(data)
    merged.update(overlay)
    try:
        cfg = schema.validate_mapping(merged, source=path or install["unit"])
    except schema.ConfigError as exc:
        raise AnsibleActionFail(describe_error(exc, path or install["unit"])) from None
    full = schema.to_document(cfg, reveal_secrets=True, include_defaults=True)
    settings, not_adopted = {}, {}
    for key in merged:
        if key in schema.INERT_KEYS or key in schema.IGNORED_KEYS:
            not_adopted[key] = "has no effect in this agent"
        elif key in exclude:
            not_adopted[key] = "set by the role for each instance"
        elif key in full and merged[key] is not None:
            settings[key] = full[key]
    masked = dict((k, MASK if k in schema.SECRET_KEYS and v else v) for k, v in settings.items())
    files = [install["unit_path"], install["dirs"]["exe_dir"]] + ([path] if path else [])
    report = {
        "unit": install["unit"],
        "unit_path": install["unit_path"],
        "command": install["command"],
        "executable": install["executable"],
        "user": install["user"],
        "working_directory": install["working_directory"],
        "kill_mode": install["kill_mode"],
        "active": install["active"],
        "enabled": install["enabled"],
        "config_file": path,
        "searched": searched,
        "notices": notices,
        "settings": masked,
        "not_adopted": not_adopted,
        "http_server_port": cfg.http_server_port,
        "files": files,
    }
    return report, settings


def adopt_all(schema, installs, exclude):
    """(reports, settings): every install's report, and the settings they all agree on."""
    reports, chosen, first = [], {}, None
    for install in installs:
        report, settings = adopt(schema, install, exclude)
        if first is None:
            first, chosen = report, settings
        elif settings != chosen:
            raise AnsibleActionFail(
                "upstream_agent_info: the upstream units %s (%s) and %s (%s) run with different "
                "settings; adopt one of them (disable the other) or set the settings in the "
                "inventory"
                % (first["unit"], first["config_file"], report["unit"], report["config_file"])
            )
        reports.append(report)
    return reports, chosen


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        schema, _yaml = load_schema()
        try:
            found = self._execute_module(
                module_name="selfhosted.workflow_agent.upstream_agent_info",
                module_args={"exclude": args["exclude"]},
                task_vars=task_vars,
            )
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        if found.get("failed"):
            result.update(failed=True, msg=found.get("msg", "upstream_agent_info failed"))
            return result
        installs = plain(found.get("installs") or [])
        reports, settings = adopt_all(schema, installs, set(args["exclude"]))
        result.update(changed=False, installs=reports, settings=settings)
        # The settings hold the pool token: hide this result from every callback.
        if any(settings.get(k) for k in schema.SECRET_KEYS):
            result["_ansible_no_log"] = True
        return result
