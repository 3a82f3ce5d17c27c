"""The bad-config corpus (agent/tests/data/bad/) through `workflow-agent run`: exit 2, one line on
stderr naming the file, no traceback, no token, nothing started. agent/tests/test_cli_bad_configs.py
proves the same for `check`; `run` is the command services start, so it gets the corpus too.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from rel_harness import REPO, agent_command

BAD = REPO / "agent" / "tests" / "data" / "bad"
FILES = sorted(BAD.glob("*.yaml.bad"))
CORPUS_TOKEN = "pul-BADCORPUS0123456789abcdef"


def expected(path: Path) -> str:
    """The corpus's own annotation (`# expect: ...` on line 1); the empty file has none."""
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    return first[len("# expect: ") :] if first.startswith("# expect: ") else "the file is empty"


def test_the_corpus_is_there():
    assert len(FILES) >= 30


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_run_with_a_bad_config_exits_2_with_one_line(path, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_AGENT_")}
    result = subprocess.run(
        [*agent_command(), "--config", str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{path}: ")
    assert expected(path) in lines[0]
    assert "Traceback" not in result.stderr
    assert CORPUS_TOKEN not in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written, no job dir, no state
