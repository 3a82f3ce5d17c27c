# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: agent_paths
short_description: Put a list of directories and small files in place in one module run
version_added: 0.6.0
author: selfhosted.workflow_agent maintainers (@selfhosted)
description:
  - Makes each entry of O(paths) a directory, a file with the given content, or absent, with
    its owner, group and mode, in the order given, in one module run on the host.
  - The C(agent) role uses it for the agent's directories, the CA bundle, the service
    environment and the job user's home, where a loop of M(ansible.builtin.file) and
    M(ansible.builtin.copy) tasks would cost a module run per path.
  - A file is written to a temporary file beside it and renamed into place, so a reader sees
    the old content or the new, never a part.
  - Directories missing above an entry are made with the default mode and owner, as
    M(ansible.builtin.file) does.
options:
  paths:
    description: The paths, in order (a parent before what is in it).
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Absolute path.
        type: path
        required: true
      state:
        description: What the path must be.
        type: str
        choices: [directory, file, absent]
        required: true
      owner:
        description: Owner (name or id); left as it is when not given.
        type: str
      group:
        description: Group (name or id); left as it is when not given.
        type: str
      mode:
        description: Octal mode as a string, for example V(0750); left as it is when not given.
        type: str
      content:
        description:
          - The file's content (O(paths[].state=file) only, and required there). Never logged
            or shown in a diff, since it may hold credentials (a proxy URL).
        type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - selfhosted.workflow_agent.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: partial
    details:
      - The diff shows each changed path's state, owner, group and mode, never a file's content.
  idempotent:
    support: full
  platform:
    platforms: posix
seealso:
  - module: ansible.builtin.file
  - module: ansible.builtin.copy
"""

EXAMPLES = r"""
- name: The agent's directories and its service environment
  selfhosted.workflow_agent.agent_paths:
    paths:
      - path: /etc/workflow-agent
        state: directory
        owner: root
        group: workflow-agent
        mode: "0750"
      - path: /var/lib/workflow-agent
        state: directory
        owner: workflow-agent
        group: workflow-agent
        mode: "0750"
      - path: /etc/workflow-agent/environment
        state: file
        owner: root
        group: workflow-agent
        mode: "0640"
        content: "HTTPS_PROXY=http://proxy.example:3128\n"
      - {path: /etc/workflow-agent/ca-bundle.pem, state: absent}
"""

RETURN = r"""
paths:
  description: Each entry's path and whether it changed, in the order given.
  returned: always
  type: list
  elements: dict
  sample: [{path: /etc/workflow-agent, state: directory, changed: false}]
files_changed:
  description: Whether a file's content, or a file's existence, changed (not only attributes).
  returned: always
  type: bool
"""

import hashlib  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.common.text.converters import to_bytes, to_native  # noqa: E402

PATH_SPEC = {
    "path": {"type": "path", "required": True},
    "state": {"type": "str", "required": True, "choices": ["directory", "file", "absent"]},
    "owner": {"type": "str"},
    "group": {"type": "str"},
    "mode": {"type": "str"},
    "content": {"type": "str", "no_log": True},
}


def _kind(path):
    if os.path.isdir(path):
        return "directory"
    return "file" if os.path.exists(path) else "absent"


def _sha1(path):
    digest = hashlib.sha1()  # noqa: S324 - a content comparison, as the look's sha1
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(65536), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _attrs(module, entry, path):
    return module.load_file_common_arguments(
        {"path": path, "owner": entry["owner"], "group": entry["group"], "mode": entry["mode"]}
    )


def _write(module, entry, path, content):
    """The content beside the file, with its owner and mode, renamed over it."""
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        os.makedirs(parent)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=parent)
    try:
        os.fchmod(fd, 0o600)  # nobody reads it before its owner and mode are set
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
        module.set_fs_attributes_if_different(_attrs(module, entry, tmp), True)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _one(module, entry, diff):
    """(changed, file changed) for one entry; its diff (state, owner, group, mode) in ``diff``.
    A symlink is followed, as ansible.builtin.file does, except to remove it."""
    path, state = entry["path"], entry["state"]
    if state == "absent":  # a link itself, never what it points to
        kind = "link" if os.path.islink(path) else _kind(path)
        diff["before"]["state"], diff["after"]["state"] = kind, state
        if kind == "absent":
            return False, False
        if not module.check_mode:
            if kind == "directory":
                shutil.rmtree(path)
            else:
                os.unlink(path)
        return True, True
    path = os.path.realpath(path)
    kind = _kind(path)
    diff["before"]["state"], diff["after"]["state"] = kind, state
    if kind not in ("absent", state):
        module.fail_json(
            msg="agent_paths: %s is a %s, not a %s: move it away first"
            % (entry["path"], kind, state)
        )
    if state == "directory":
        made = kind == "absent"
        if made and module.check_mode:
            return True, False
        if made:
            os.makedirs(path)
        return module.set_fs_attributes_if_different(_attrs(module, entry, path), made, diff), False
    content = to_bytes(entry["content"], errors="surrogate_or_strict")
    if kind == "absent" or _sha1(path) != hashlib.sha1(content).hexdigest():  # noqa: S324
        if not module.check_mode:
            _write(module, entry, path, content)
        return True, True
    return module.set_fs_attributes_if_different(_attrs(module, entry, path), False, diff), False


def main():
    module = AnsibleModule(
        argument_spec={
            "paths": {"type": "list", "elements": "dict", "required": True, "options": PATH_SPEC}
        },
        supports_check_mode=True,
    )
    for entry in module.params["paths"]:
        if not os.path.isabs(entry["path"]):
            module.fail_json(
                msg="agent_paths: paths[].path must be absolute, got %r" % entry["path"]
            )
        if (entry["content"] is None) == (entry["state"] == "file"):
            module.fail_json(
                msg="agent_paths: %s: content is required with state=file, and only there"
                % entry["path"]
            )
    results, changed, files_changed = [], False, False
    # Only the paths that change, keyed by path: the diff of a run that changes nothing is empty.
    diff = {"before": {}, "after": {}}
    for entry in module.params["paths"]:
        one_diff = {"before": {}, "after": {}}
        try:
            one, content = _one(module, entry, one_diff)
        except (OSError, IOError) as exc:
            module.fail_json(
                msg="agent_paths: %s: %s" % (entry["path"], to_native(exc)), paths=results
            )
        results.append({"path": entry["path"], "state": entry["state"], "changed": one})
        changed, files_changed = changed or one, files_changed or content
        if one:
            diff["before"][entry["path"]] = one_diff["before"]
            diff["after"][entry["path"]] = one_diff["after"]
    module.exit_json(changed=changed, files_changed=files_changed, paths=results, diff=diff)


if __name__ == "__main__":
    main()
