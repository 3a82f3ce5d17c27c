"""Module tests (in modules/ and action/) run a module's main() with given arguments on every
ansible-core that meta/runtime.yml claims: patch_module_args is new in 2.19; before it, modules
read basic._ANSIBLE_ARGS."""

from __future__ import annotations

import contextlib
import json

import pytest


@pytest.fixture
def module_args(monkeypatch):
    """A context manager: `with module_args({...}): module.main()`."""
    try:
        from ansible.module_utils.testing import patch_module_args
    except ImportError:  # ansible-core < 2.19
        from ansible.module_utils import basic

        @contextlib.contextmanager
        def patch_module_args(args):
            params = json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode()
            monkeypatch.setattr(basic, "_ANSIBLE_ARGS", params)
            yield

    return patch_module_args


@pytest.fixture
def run_main(monkeypatch, module_args):
    """`run_main(module, args)`: the module's main() with args; its exit_json or fail_json
    result (fail_json's with failed=True and msg)."""

    def run(module, args):
        captured = {}

        def leave(self, **result):
            captured.update(result)
            raise SystemExit(0)

        def fail(self, msg, **result):
            captured.update(result, msg=msg, failed=True)
            raise SystemExit(1)

        monkeypatch.setattr(module.AnsibleModule, "exit_json", leave)
        monkeypatch.setattr(module.AnsibleModule, "fail_json", fail)
        with module_args(args), pytest.raises(SystemExit):
            module.main()
        return captured

    return run
