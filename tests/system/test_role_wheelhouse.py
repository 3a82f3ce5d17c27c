"""The agent role's controller-side wheelhouse builder: pins, markers and platform tags.

The full build (pip downloading real wheels) runs in every Molecule scenario; these tests cover
the decisions that make a wheelhouse right for a target that is not the controller, offline.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[2]
FILES = REPO / "roles" / "agent" / "files"
spec = importlib.util.spec_from_file_location("build_wheelhouse", FILES / "build_wheelhouse.py")
bw = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bw)

PINS = FILES / "wheelhouse-constraints.txt"
# The platform arguments of a Debian 12 x86_64 host.
DEBIAN12_X86 = ["--system", "linux", "--machine", "x86_64", "--python", "3.11", "--libc", "2.36"]


def env(python="3.11", system="linux", machine="x86_64"):
    return bw.marker_env(system, machine, python)


def test_pins_follow_the_target_python():
    assert bw.read_pins(str(PINS), env("3.10"))["python-dateutil"] == "3.0.0"
    assert bw.read_pins(str(PINS), env("3.12"))["python-dateutil"] == "4.0.0"


def test_pins_agree_with_the_dev_constraints():
    """Where the dev environment pins a package too, the hosts get the same version (3.11)."""
    dev = {}
    for line in (REPO / "requirements" / "constraints.txt").read_text().splitlines():
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if m:
            dev[bw.canonicalize_name(m.group(1))] = m.group(2)
    pins = bw.read_pins(str(PINS), env("3.11"))
    differ = {n: (v, dev[n]) for n, v in pins.items() if n in dev and dev[n] != v}
    assert differ == {}


def test_every_agent_dependency_is_pinned():
    project = tomllib.loads((REPO / "agent" / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + sum(project["optional-dependencies"].values(), [])
    pins = bw.read_pins(str(PINS), env())
    missing = {bw.canonicalize_name(bw.Requirement(d).name) for d in deps} - set(pins)
    assert missing == set()


@pytest.mark.parametrize(
    "system, machine, libc, macos, first, also",
    [
        ("linux", "x86_64", "2.36", "", "manylinux_2_36_x86_64", "manylinux2014_x86_64"),
        ("linux", "arm64", "2.35", "", "manylinux_2_35_aarch64", "manylinux_2_17_aarch64"),
        ("darwin", "arm64", "", "14.2", "macosx_14_0_arm64", None),
    ],
)
def test_platform_tags(system, machine, libc, macos, first, also):
    tags = bw.platform_tags(system, machine, libc, macos)
    assert tags[0] == first
    if also:
        assert also in tags


def test_musl_is_refused_clearly():
    with pytest.raises(bw.BuildError, match="glibc 2.17 or later"):
        bw.platform_tags("linux", "x86_64", "", "")


def test_markers_are_evaluated_for_the_target_not_the_controller():
    req = bw.Requirement('exceptiongroup>=1; python_version < "3.11"')
    assert bw.wanted(req, set(), env("3.10"))
    assert not bw.wanted(req, set(), env("3.11"))
    docker = bw.Requirement('docker>=7; extra == "docker"')
    assert bw.wanted(docker, {"docker"}, env())
    assert not bw.wanted(docker, set(), env())


def test_wrong_version_is_one_clear_line(tmp_path, capsys):
    rc = bw.main(
        [
            "--source",
            str(REPO / "agent"),
            "--constraints",
            str(PINS),
            "--cache",
            str(tmp_path),
            "--version",
            "0.0.0-not-this",
            *DEBIAN12_X86,
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1
    assert err.count("\n") == 1 and "is version" in err and "not 0.0.0-not-this" in err


def test_not_an_agent_source_is_one_clear_line(tmp_path, capsys):
    rc = bw.main(
        [
            "--source",
            str(tmp_path),
            "--constraints",
            str(PINS),
            "--cache",
            str(tmp_path / "c"),
            *DEBIAN12_X86,
        ]
    )
    assert rc == 1
    assert "is not the agent's source" in capsys.readouterr().err
