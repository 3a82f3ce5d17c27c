# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate an agent config with the agent's own schema on the controller, write it via copy.

The schema is the agent source vendored in this collection, loaded by
module_utils/_agent_schema.py (the one source of truth).
"""

from __future__ import absolute_import, division, print_function

import base64
import math
import re

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.hashing import checksum_s
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils import _agent_schema
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils._agent_schema import (
    MASK,
    plain,
)

__metaclass__ = type

HEADER = (
    "# Workflow agent configuration, written by Ansible (selfhosted.workflow_agent.agent_config).\n"
    "# Local changes are overwritten on the next run.\n"
)
CHANGED_MASK = "*** changed"

ARGUMENT_SPEC = {
    "dest": {"type": "path", "required": True},
    "config": {"type": "dict", "required": True},
    "owner": {"type": "str"},
    "group": {"type": "str"},
    "mode": {"type": "raw", "default": "0600"},
    "backup": {"type": "bool", "default": False},
    "current": {"type": "dict"},
}

# Pool tokens look like pul-<hex>; mask any that a file might hold, whatever its key.
_POOL_TOKEN = re.compile(r"pul-[A-Za-z0-9_-]+")


def octal_mode(mode):
    """'0600', '600' or 384 as stat reports modes ('0600'); None for anything else."""
    if isinstance(mode, bool):
        return None
    if isinstance(mode, int):
        return "%04o" % mode
    if isinstance(mode, str) and re.fullmatch(r"[0-7]{3,4}", mode):
        return "%04o" % int(mode, 8)
    return None


def load_schema():
    """The agent's schema and yaml; AnsibleActionFail saying why when they cannot be loaded."""
    try:
        return _agent_schema.load()
    except _agent_schema.SchemaUnavailable as exc:
        raise AnsibleActionFail("agent_config: %s" % exc) from None


def validate(schema, config):
    """The validated AgentConfig; AnsibleActionFail naming the key on a bad value."""
    try:
        return schema.validate_mapping(config, source="config")
    except schema.ConfigError as exc:
        where = "config.%s" % exc.key if exc.key else "config"
        raise AnsibleActionFail("agent_config: %s: %s" % (where, exc.reason)) from None


def render(schema, yaml, cfg, given_keys, reveal_secrets):
    """The file's text: the given keys, normalized, in the schema's order, under the header."""
    full = schema.to_document(cfg, reveal_secrets=True, include_defaults=True)
    doc = {}
    for key in schema.ALL_KEYS:
        if key not in given_keys:
            continue
        value = full[key]
        if key in schema.SECRET_KEYS and not reveal_secrets and value != "":
            value = MASK
        doc[key] = value
    body = yaml.safe_dump(
        doc, sort_keys=False, default_flow_style=False, allow_unicode=True, width=4096
    )
    return HEADER + body


def secret_values(schema, yaml, cfg, text):
    """Secret strings to hide: the new ones from cfg and any found in the current file."""
    found = []
    for key in schema.SECRET_KEYS:
        value = getattr(cfg, key, None)
        if value is not None:
            found.append(value.get_secret_value())
    old = {}
    if text:
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError:
            loaded = None
        if isinstance(loaded, dict):
            old = loaded
    for key in schema.SECRET_KEYS:
        if isinstance(old.get(key), str):
            found.append(old[key])
    # Longest first, so a secret that contains another is replaced whole.
    return sorted(set(s for s in found if s), key=len, reverse=True), old


def mask_text(text, secrets, secret_keys, placeholder=MASK):
    """Hide every secret value, every `<secret key>:` line and anything shaped like a token."""
    for secret in secrets:
        text = text.replace(secret, placeholder)
    for key in secret_keys:
        text = re.sub(
            r"(?m)^([ \t]*%s[ \t]*:[ \t]*)\S.*$" % re.escape(key),
            lambda m: m.group(1) + "'" + placeholder + "'",
            text,
        )
    return _POOL_TOKEN.sub("pul-" + MASK, text)


def masked_diff(schema, yaml, cfg, given_keys, before_text, dest):
    """A diff of the file, before and after, with secrets masked (and a changed one marked)."""
    secrets, old = secret_values(schema, yaml, cfg, before_text)
    after_doc = schema.to_document(cfg, reveal_secrets=True, include_defaults=True)
    token_changed = any(
        key in given_keys and str(old.get(key, "")) != after_doc.get(key, "")
        for key in schema.SECRET_KEYS
        if before_text is not None
    )
    before = "" if before_text is None else mask_text(before_text, secrets, schema.SECRET_KEYS)
    after = render(schema, yaml, cfg, given_keys, reveal_secrets=False)
    if token_changed:
        for key in schema.SECRET_KEYS:
            after = re.sub(
                r"(?m)^(%s: )'\*\*\*'$" % re.escape(key), r"\1'%s'" % CHANGED_MASK, after
            )
    return {
        "before": before,
        "after": after,
        "before_header": dest if before_text is not None else "%s (absent)" % dest,
        "after_header": dest,
    }


class ActionModule(ActionBase):
    TRANSFERS_FILES = True
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        dest = args["dest"]
        config = plain(args["config"])

        schema, yaml = load_schema()
        cfg = validate(schema, config)
        given = set(k for k, v in config.items() if v is not None and k in schema.ALL_KEYS)
        text = render(schema, yaml, cfg, given, reveal_secrets=True)
        effective = schema.to_document(cfg, reveal_secrets=False, include_defaults=True)

        try:
            before = None
            known = args["current"]
            if known and known.get("exists") and self._matches(known, text, args):
                # The caller has just seen the file as wanted: nothing to ask the host.
                current = known
            else:
                current = self._stat_remote(dest, task_vars)
            if current is not None and self._matches(current, text, args):
                # At most one round trip for a file that is already as wanted.
                changed, backup_file = False, None
            elif current is None and self._task.check_mode:
                # Nothing to compare with, and owner/group/directory may not exist yet on a
                # fresh host: predict the new file without asking copy.
                changed, backup_file = True, None
            else:
                if current is not None and self._task.diff:
                    before = self._read_remote(dest, task_vars)
                changed, backup_file = self._write(args, text, task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)

        # The drain timeout in seconds, as the agent reads it: units and process managers
        # (TimeoutStopSec, terminationGracePeriodSeconds) need a number, not a Go duration.
        drain = int(math.ceil(cfg.drain_timeout.total_seconds()))
        result.update(changed=changed, dest=dest, config=effective, drain_timeout_seconds=drain)
        if backup_file:
            result["backup_file"] = backup_file
        if changed and self._task.diff:
            before_text = None if before is None else before.decode("utf-8", "replace")
            if before_text != text:
                result["diff"] = masked_diff(schema, yaml, cfg, given, before_text, dest)
        return result

    def _stat_remote(self, dest, task_vars):
        """stat of dest (followed, with its sha1), or None when it does not exist."""
        res = self._execute_module(
            module_name="ansible.legacy.stat",
            module_args={
                "path": dest,
                "follow": True,
                "get_checksum": True,
                "checksum_algorithm": "sha1",
                "get_mime": False,
                "get_attributes": False,
            },
            task_vars=task_vars,
        )
        if res.get("failed"):
            raise AnsibleActionFail("agent_config: cannot read %s: %s" % (dest, res.get("msg", "")))
        st = res.get("stat") or {}
        return st if st.get("exists") else None

    @staticmethod
    def _matches(st, text, args):
        """Whether the file already has this content, mode, owner and group (anything this
        cannot judge, such as a symbolic mode, counts as a difference: copy then decides)."""
        if not st.get("isreg") or st.get("checksum") != checksum_s(text):
            return False
        want = octal_mode(args["mode"])
        if want is None or st.get("mode") != want:
            return False
        for key, name_key, id_key in (("owner", "pw_name", "uid"), ("group", "gr_name", "gid")):
            given = args[key]
            if given is not None and str(given) not in (st.get(name_key), str(st.get(id_key))):
                return False
        return True

    def _read_remote(self, dest, task_vars):
        """The current file's bytes, or None when it does not exist (check-mode safe)."""
        res = self._execute_module(
            module_name="ansible.legacy.slurp", module_args={"src": dest}, task_vars=task_vars
        )
        if res.get("failed"):
            msg = str(res.get("msg", ""))
            if msg.startswith("File not found"):
                return None
            raise AnsibleActionFail("agent_config: cannot read %s: %s" % (dest, msg))
        return base64.b64decode(res["content"])

    def _write(self, args, text, task_vars):
        """Hand the rendered text to the copy action (atomic write, owner, mode, check mode)."""
        new_task = self._task.copy()
        new_task.args = {
            "dest": args["dest"],
            "content": text,
            "mode": args["mode"],
            "backup": args["backup"],
            "follow": True,
        }
        for key in ("owner", "group"):
            if args[key] is not None:
                new_task.args[key] = args[key]
        # The content holds the token: keep it out of copy's diff, invocation and logs.
        new_task.no_log = True
        new_task.diff = False
        copy_action = self._shared_loader_obj.action_loader.get(
            "ansible.legacy.copy",
            task=new_task,
            connection=self._connection,
            play_context=self._play_context,
            loader=self._loader,
            templar=self._templar,
            shared_loader_obj=self._shared_loader_obj,
        )
        res = copy_action.run(task_vars=task_vars)
        if res.get("failed"):
            raise AnsibleActionFail(
                "agent_config: cannot write %s: %s" % (args["dest"], res.get("msg", "copy failed"))
            )
        return bool(res.get("changed")), res.get("backup_file")
