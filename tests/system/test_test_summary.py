"""The closing line of `make test` (scripts/test.sh, scripts/junit_total.py) never hides a failed
stage: a stage that failed before any case ran (the cluster build failed; a prerequisite of its
make target failed) is named, and counted, so that the line CI reads, `N passed, N failed`,
reads failed whenever make test exits non-zero. The summary it reads is written by the real
scripts/stage.sh."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# What CI reads of the closing line.
CI_COUNTS = re.compile(r"(\d+) passed, (\d+) failed")


def env_for(state: pathlib.Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "VERBOSE", "WFA_GO_BUILDS")}
    env["WORKFLOW_AGENT_STATE"] = str(state)
    return env


def stage(state: pathlib.Path, name: str, *args: str) -> int:
    return subprocess.run(
        ["bash", ROOT / "scripts/stage.sh", name, *args],
        env=env_for(state),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    ).returncode


def record(state: pathlib.Path, name: str, command: str) -> str:
    """A stage command whose one case (report NAME.xml) passes or fails with `command`."""
    report = state / "junit" / f"{name}.xml"
    return f"{sys.executable} {ROOT}/scripts/verdict.py record {report} {name} -- {command}"


def closing_line(state: pathlib.Path, exit_code: int = 0) -> str:
    proc = subprocess.run(
        [sys.executable, ROOT / "scripts/junit_total.py", "--summary", state / "summary"]
        + ["--exit-code", str(exit_code), state / "junit"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.count("\n") == 1, proc.stdout
    return proc.stdout.rstrip("\n")


def ci_failed(line: str) -> int:
    m = CI_COUNTS.search(line)
    assert m, line
    return int(m[2])


def test_all_green_is_the_plain_line(tmp_path):
    assert stage(tmp_path, "units", "--", record(tmp_path, "units", "true")) == 0
    assert closing_line(tmp_path) == "tests: 1 passed, 0 failed, 0 skipped"


def test_a_stage_that_failed_before_its_cases_is_named_and_counted(tmp_path):
    assert stage(tmp_path, "units", "--", record(tmp_path, "units", "true")) == 0
    why = "the cluster build failed (kube: exit 1, log: /var/tmp/x/logs/build-kube.log)"
    assert stage(tmp_path, "k8s", "--failed", why) == 1
    summary = (tmp_path / "summary").read_text()
    assert "k8s       FAIL: the cluster build failed (kube: exit 1" in summary
    line = closing_line(tmp_path, exit_code=1)
    assert line == (
        "tests: 1 passed, 1 failed, 0 skipped; 1 stage failed (k8s: the cluster build failed)"
    )


def test_failed_cases_a_stage_names_are_not_counted_twice(tmp_path):
    command = record(tmp_path, "molecule", "false")
    assert stage(tmp_path, "molecule", "--require", "molecule.xml", "--", command) == 1
    assert stage(tmp_path, "lint", "--", "exit 1") == 1  # no report: counts as one case
    line = closing_line(tmp_path, exit_code=1)
    assert line == "tests: 0 passed, 2 failed, 0 skipped; 2 stages failed (molecule, lint)"


def test_a_failed_run_that_no_stage_explains_still_reads_failed(tmp_path):
    assert stage(tmp_path, "units", "--", record(tmp_path, "units", "true")) == 0
    line = closing_line(tmp_path, exit_code=1)
    assert line == "tests: 1 passed, 1 failed, 0 skipped; make test exited 1"


FAKE_MAKE = """#!/usr/bin/env bash
# make for test.sh: every stage passes with one case of its own, except $FAKE_FAIL_BEFORE, whose
# make fails before its stage runs (as a failed prerequisite would).
target=${{@: -1}}
[ "$target" = bootstrap ] && exit 0
[ "$target" = "${{FAKE_FAIL_BEFORE:-}}" ] && {{ echo "make: *** [$target] Error 2" >&2; exit 2; }}
report=$WORKFLOW_AGENT_STATE/junit/$target.xml
exec bash {root}/scripts/stage.sh "$target" -- \\
  "{python} {root}/scripts/verdict.py record $report $target -- true"
"""


@pytest.mark.parametrize(
    ("fail_before", "expected"),
    [
        (
            "",
            "{passed} passed, 1 failed, 0 skipped; 1 stage failed (k8s: the cluster build failed)",
        ),
        (
            "molecule",
            "{passed} passed, 2 failed, 0 skipped; 2 stages failed "
            "(molecule: make molecule failed before the stage ran, k8s: the cluster build failed)",
        ),
        (  # bench-smoke runs in the background, beside deploy and builds
            "bench-smoke",
            "{passed} passed, 2 failed, 0 skipped; 2 stages failed "
            "(bench-smoke: make bench-smoke failed before the stage ran, "
            "k8s: the cluster build failed)",
        ),
    ],
    ids=["build-failed", "and-a-prerequisite", "and-the-background-stage"],
)
def test_test_sh_closing_line_names_the_stages_that_failed_without_cases(
    tmp_path, fail_before, expected
):
    """scripts/test.sh end to end, with a stand-in `make` and no Go build started
    (WFA_GO_BUILDS=""), so that the k8s stage's builds are missing, as when they failed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "make").write_text(FAKE_MAKE.format(root=ROOT, python=sys.executable))
    (bin_dir / "make").chmod(0o755)
    env = env_for(tmp_path / "state")
    env.update(PATH=f"{bin_dir}:{env['PATH']}", WFA_GO_BUILDS="", FAKE_FAIL_BEFORE=fail_before)
    proc = subprocess.run(
        ["bash", ROOT / "scripts/test.sh"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    last = proc.stdout.splitlines()[-1]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    summary = (tmp_path / "state/summary").read_text()
    # Each stage that passed ran its one case; bootstrap has none.
    passed = len(re.findall(r"^(?!bootstrap )\S+ +PASS in ", summary, re.MULTILINE))
    assert passed >= 7, summary  # lint sanity units pytest galaxy molecule deploy builds, at least
    assert last == "tests: " + expected.format(passed=passed), proc.stdout + proc.stderr
    assert ci_failed(last) > 0
    assert "kube: not built by this run" in summary
