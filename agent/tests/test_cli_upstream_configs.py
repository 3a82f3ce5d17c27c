"""The corpus of upstream-shaped configs in data/upstream/ through `workflow-agent check`: what
upstream's sample, docs (old and new), Helm draft and a black-box test of its real agent use
loads unchanged, and every key that has no effect here is named once, at info.

Beside data/bad/ (test_cli_bad_configs.py): the same CLI, run as a subprocess. A `.yaml` file is
given with --config or found by discovery under either file name; a `.env` file is the
environment alone. Each file's `# no effect:` line lists the keys `check` must report.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from workflow_agent.targets import _k8spod

UPSTREAM = Path(__file__).parent / "data" / "upstream"
YAML = sorted(UPSTREAM.glob("*.yaml"))
ENV = sorted(UPSTREAM.glob("*.env"))
TOKEN = "pul-UPSTREAMCORPUS0123456789abcdef"  # noqa: S105 - the corpus's fake token
COMMANDS = (
    "workflow-agent",
    "customer-managed-workflow-agent",
    "customer-managed-deployment-agent",
)


def run(args, *, env=None, cwd=None, command=None):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_AGENT_")}
    argv = [sys.executable, "-m", "workflow_agent"]
    if command is not None:
        argv = [str(Path(sys.executable).with_name(command))]
    return subprocess.run(
        [*argv, *args],
        capture_output=True,
        text=True,
        env={**clean, "HOME": str(cwd or "/nonexistent"), **(env or {})},
        cwd=cwd,
        timeout=120,
    )


def no_effect(path: Path) -> set[str]:
    for line in path.read_text().splitlines():
        if line.startswith("# no effect:"):
            return {k.strip() for k in line.split(":", 1)[1].split(",") if k.strip()}
    raise AssertionError(f"{path.name}: no '# no effect:' line")


def reported(stderr: str) -> set[str]:
    """The keys of the `info: <key>: has no effect here` lines; any other stderr line fails."""
    keys = set()
    for line in stderr.splitlines():
        assert line.startswith("info: ") and ": has no effect here: " in line, line
        keys.add(line[len("info: ") :].split(":", 1)[0])
    return keys


def env_file(path: Path) -> dict[str, str]:
    pairs = (x.split("=", 1) for x in path.read_text().splitlines() if x and x[0] != "#")
    return dict(pairs)


def test_corpus_covers_the_upstream_sources():
    names = {p.name for p in [*YAML, *ENV]}
    assert {
        "sample.yaml",
        "docs_reference.yaml",
        "legacy_reference.yaml",
        "helm_draft.env",
    } <= names
    assert len(names) >= 8


@pytest.mark.parametrize("path", YAML, ids=[p.name for p in YAML])
def test_upstream_file_passes_check(path, tmp_path):
    result = run(["check", "--config", str(path), "--format", "json"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert reported(result.stderr) == no_effect(path)
    assert TOKEN not in result.stdout + result.stderr


@pytest.mark.parametrize("path", ENV, ids=[p.name for p in ENV])
def test_upstream_environment_passes_check(path, tmp_path):
    result = run(["check"], env=env_file(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "# source: (no file: defaults and environment only)" in result.stdout
    assert reported(result.stderr) == no_effect(path)


def test_helm_draft_resources_are_read_as_one_cpu_and_4_gb():
    """The draft's numberCPUs: 1000 and memoryQuantity: 4000000000 (bytes and millicores),
    under the rule that also reads the Fargate notes' "4 = 4Gi" (test_k8spod.py)."""
    env = env_file(UPSTREAM / "helm_draft.env")
    assert _k8spod.requests_from_env(env) == ("1000m", "4000000000")


@pytest.mark.parametrize("name", ["pulumi-workflow-agent.yaml", "pulumi-deployment-agent.yaml"])
@pytest.mark.parametrize("command", COMMANDS)
def test_found_by_discovery_under_either_name_and_every_command_name(name, command, tmp_path):
    (tmp_path / name).write_text((UPSTREAM / "legacy_reference.yaml").read_text())
    result = run(["check"], cwd=tmp_path, command=command)
    assert result.returncode == 0, result.stderr
    assert f"# source: {tmp_path / name}" in result.stdout
