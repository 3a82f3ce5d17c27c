"""Helpers for the plugin tests: run the collection's modules through real ansible-playbook.

The collection is this repository, reached through a symlink at
<tmp>/collections/ansible_collections/selfhosted/workflow_agent. Secrets reach the play through
a 0600 vars file, never argv. (No tests here; the test_plugins_*.py files import this.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PLAYBOOK_TIMEOUT = 600  # seconds: a generous deadline for a loaded 2-core machine


@dataclass
class PlayRun:
    rc: int
    stdout: str
    stderr: str
    results: dict = field(default_factory=dict)  # task name -> localhost's result

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def __getitem__(self, task_name: str) -> dict:
        return self.results[task_name]


def collections_path(base: Path) -> Path:
    root = base / "collections"
    link = root / "ansible_collections" / "selfhosted" / "workflow_agent"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(REPO)
    return root


def run_play(
    base: Path,
    tasks: list[dict],
    *,
    variables: dict | None = None,
    check: bool = False,
    diff: bool = False,
    verbose: int = 0,
    env: dict | None = None,
) -> PlayRun:
    """Run `tasks` on localhost. Without `verbose`, results come back parsed (json callback)."""
    base.mkdir(parents=True, exist_ok=True)
    play = [{"name": "plugins", "hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    playbook = base / "play.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False))
    vars_file = base / "vars.json"
    vars_file.write_text(json.dumps(variables or {}))
    vars_file.chmod(0o600)
    cmd = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook)]
    cmd += ["-e", "@" + str(vars_file)]
    if check:
        cmd.append("--check")
    if diff:
        cmd.append("--diff")
    if verbose:
        cmd.append("-" + "v" * verbose)
    run_env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(collections_path(base)),
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_LOCAL_TEMP": str(base / "ansible-local"),
        "ANSIBLE_REMOTE_TEMP": str(base / "ansible-remote"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_STDOUT_CALLBACK": "default" if verbose else "ansible.posix.json",
        **(env or {}),
    }
    proc = subprocess.run(
        cmd,
        cwd=base,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=PLAYBOOK_TIMEOUT,
        check=False,
    )
    run = PlayRun(proc.returncode, proc.stdout, proc.stderr)
    if not verbose:
        try:
            report = json.loads(proc.stdout)
        except ValueError:
            raise AssertionError(f"no JSON report (rc {proc.returncode}):\n{run.output}") from None
        for play_report in report["plays"]:
            for task in play_report["tasks"]:
                run.results[task["task"]["name"]] = task["hosts"]["localhost"]
    return run
