"""The filters `ansible-doc -t filter -l` lists are the ones users are meant to call (issue 28):
each is a public API to keep stable. The roles' internals are not filters: the agent role's
plan (module_utils/agent_plan.py) runs in the agent_host_info action, the agent_k8s role's steps
(module_utils/k8s_*.py) in the internal k8s_plan action."""

from __future__ import annotations

import json
import os
import subprocess

from test_plugins_common import BIN, collections_path

PUBLIC = {"pool_plan", "fleet_plan", "fleet_summary", "prometheus_file_sd"}


def test_ansible_doc_lists_only_the_public_filters(tmp_path):
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(collections_path(tmp_path))}
    run = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "filter", "-l", "-j", "selfhosted.workflow_agent"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    listed = {name.rsplit(".", 1)[-1] for name in json.loads(run.stdout)}
    assert listed == PUBLIC
