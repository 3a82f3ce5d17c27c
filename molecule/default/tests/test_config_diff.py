"""issue 16: `--check --diff` shows a config change, never the token (no blanket no_log).

The scenario's own converge, in check mode at -vvv, with another polling_interval: the diff
shows the new value, and the pool token appears nowhere in the output.
"""

import os
import pathlib
import re
import subprocess
import sys

from wfa_testlib import EPHEMERAL, INVENTORY, hosts

testinfra_hosts = hosts()
CONVERGE = pathlib.Path(__file__).parents[2] / "shared/converge.yml"


def test_check_diff_shows_a_changed_polling_interval_and_no_token(pool_token):
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(EPHEMERAL / "ansible.cfg"),
        "ANSIBLE_FORCE_COLOR": "0",  # Molecule forces colour, which wins over NOCOLOR
        "ANSIBLE_NOCOLOR": "1",
    }
    cmd = [
        str(pathlib.Path(sys.executable).parent / "ansible-playbook"),
        *("-i", INVENTORY, str(CONVERGE), "--check", "--diff", "-vvv"),
        *("-e", "workflow_agent_polling_interval=7s"),
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, check=False)
    output = re.sub(r"\x1b\[[0-9;]*m", "", run.stdout + run.stderr)
    assert run.returncode == 0, output[-3000:]
    lines = output.splitlines()
    assert "+polling_interval: 7s" in lines, output[-3000:]
    assert "-polling_interval: 1s" in lines, output[-3000:]
    assert pool_token not in output
