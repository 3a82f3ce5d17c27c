"""testing.GitServer (a git daemon serving the test programs), testing.PROGRAMS and
testing.pulumi_bin_dirs: what deployment tests build on."""

import os
import subprocess

import pytest
from workflow_emulator.testing import (
    PROGRAMS,
    EmulatorError,
    GitServer,
    PulumiMissing,
    pulumi_bin_dirs,
)


def clone(url: str, dest, *args: str) -> str:
    subprocess.run(["git", "clone", "--quiet", *args, url, str(dest)], check=True, timeout=60)
    return subprocess.run(
        ["git", "-C", str(dest), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_the_programs_are_served_over_git(tmp_path):
    with GitServer() as git:
        url = git.add("programs", PROGRAMS)
        assert url == f"git://127.0.0.1:{git.port}/programs"
        head = clone(url, tmp_path / "a", "--depth", "1", "--branch", "main")
        for name in ("base", "app", "broken", "gate"):
            served = (tmp_path / "a" / name / "Pulumi.yaml").read_text()
            assert served == (PROGRAMS / name / "Pulumi.yaml").read_text()
        # The same files make the same commit: a fixed author and date.
        assert git.add("again", PROGRAMS) and clone(git.url("again"), tmp_path / "b") == head


def test_a_new_commit_replaces_the_files(tmp_path):
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "old.txt").write_text("1")
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "new.txt").write_text("2")
    with GitServer() as git:
        git.add("r", tmp_path / "v1")
        git.add("r", tmp_path / "v2")
        git.add("r", tmp_path / "v1", branch="other")
        clone(git.url("r"), tmp_path / "main")
        assert sorted(os.listdir(tmp_path / "main")) == [".git", "new.txt"]
        clone(git.url("r"), tmp_path / "other", "--branch", "other")
        assert sorted(os.listdir(tmp_path / "other")) == [".git", "old.txt"]


def test_an_unknown_repository_is_git_s_own_error(tmp_path):
    with GitServer() as git:
        res = subprocess.run(
            ["git", "clone", git.url("nope"), str(tmp_path / "x")],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    assert res.returncode != 0 and "nope" in res.stderr


def test_a_taken_port_is_one_clear_error():
    with GitServer() as first, pytest.raises(EmulatorError, match="git daemon did not start"):
        GitServer(port=first.port).__enter__()


def test_pulumi_bin_dirs_names_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("WFA_PULUMI_BIN_DIR", str(tmp_path))
    with pytest.raises(PulumiMissing, match="no pulumi and no pulumi-language-yaml in"):
        pulumi_bin_dirs()
    for name in ("pulumi", "pulumi-language-yaml"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    assert pulumi_bin_dirs() == [str(tmp_path)]
