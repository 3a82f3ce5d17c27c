"""The corpus of bad configs in data/bad/ through `workflow-agent check` and `run` (the command
services start): exit 2, one line naming the file, no secret, nothing written.

Each file's first line says what the message must contain (`# expect: ...`). The real CLI runs
as a subprocess, so a traceback or a stray second line would show.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

BAD = Path(__file__).parent / "data" / "bad"
CORPUS_TOKEN = "pul-BADCORPUS0123456789abcdef"
FILES = sorted(BAD.glob("*.yaml.bad"))
SPECIAL = {"empty.yaml.bad": "the file is empty"}


def agent(command, *args, env=None, cwd=None):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_AGENT_")}
    return subprocess.run(
        [sys.executable, "-m", "workflow_agent", command, *args],
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
        cwd=cwd,
        timeout=120,
    )


def check(*args, env=None):
    return agent("check", *args, env=env)


def expected(path: Path) -> str:
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    if first.startswith("# expect: "):
        return first[len("# expect: ") :]
    return SPECIAL[path.name]


def test_corpus_is_big_enough():
    assert len(FILES) >= 30


@pytest.mark.parametrize("command", ["check", "run"])
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_bad_config_exits_2_with_one_clear_line(path, command, tmp_path):
    result = agent(command, "--config", str(path), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{path}: ")
    assert expected(path) in lines[0]
    assert "Traceback" not in result.stderr
    assert CORPUS_TOKEN not in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written, no job dir, no state


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda d: d, "cannot read: is a directory"),
        (lambda d: d / "missing.yaml", "cannot read: No such file or directory"),
        (lambda d: _write(d / "latin1.yaml", b"token: caf\xe9\n"), "not valid UTF-8"),
    ],
)
def test_unreadable_files(tmp_path, make, reason):
    path = make(tmp_path)
    result = check("--config", str(path))
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{path}: {reason}")


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_bad_env_var_names_the_variable(tmp_path):
    good = tmp_path / "ok.yaml"
    good.write_text(f"token: {CORPUS_TOKEN}\n")
    result = check("--config", str(good), env={"PULUMI_AGENT_POLLING_INTERVAL": "soon"})
    assert result.returncode == 2
    assert result.stderr == (
        'PULUMI_AGENT_POLLING_INTERVAL: polling_interval: "soon" is not a duration '
        "(examples: 30s, 1m, 1h30m)\n"
    )


def test_undecodable_env_bytes_name_the_variable(tmp_path):
    """Bytes that are not UTF-8 reach os.environ as lone surrogates: one clear line, too."""
    good = tmp_path / "ok.yaml"
    good.write_text(f"token: {CORPUS_TOKEN}\n")
    # fsdecode/fsencode round-trip: the child gets the raw byte 0xff in its environment.
    result = check(
        "--config",
        str(good),
        env={"PULUMI_AGENT_SERVICE_URL": os.fsdecode(b"https://api.example/\xff")},
    )
    assert result.returncode == 2
    assert result.stderr == "PULUMI_AGENT_SERVICE_URL: service_url: not valid UTF-8 text\n"
