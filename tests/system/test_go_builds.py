"""A fresh machine's Go builds, rehearsed: each build's resolution step (everything before its
compile) against an empty module cache, offline.

The module proxy is the project's own module cache (its download directory, as a file:// proxy),
filled by the builds that ran before (scripts/go-builds.sh), and there is no fallback to the
network. A build script that reads a module it did not download first (as build-prometheus.sh
once read `go list -m -f {{.Dir}}`, empty on a cold cache) fails here in seconds, where a fresh
machine failed after a 28-minute compile. GOSUMDB is off, but go.sum still verifies every module.
The `builds` stage runs this after the builds (make builds); the pytest stage leaves it out.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GO_BUILDS = ROOT / "scripts/go-builds.sh"
BUILD_GO_TOOL = ROOT / "scripts/build-go-tool.sh"
# A hang guard, not a measure: a resolve from the file proxy takes seconds to a minute here.
TIMEOUT = 600


def golib(expr: str) -> str:
    """A value as scripts/golib.sh sets it (the caches' places are defined there only)."""
    return subprocess.run(
        ["bash", "-c", f". scripts/golib.sh && echo {expr}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def builds() -> list[str]:
    out = subprocess.run(
        ["bash", GO_BUILDS, "list"], capture_output=True, text=True, check=True
    ).stdout
    return [line.split()[0] for line in out.splitlines()]


def rmtree(path: pathlib.Path) -> None:
    # Go writes its module cache read-only.
    subprocess.run(["chmod", "-R", "u+w", path], check=False)
    shutil.rmtree(path, ignore_errors=True)


def offline_env(tmp: pathlib.Path, proxy: pathlib.Path, **extra: str) -> dict[str, str]:
    """An empty module and build cache, and `proxy` as the only module source."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GO", "WFA_GO"))}
    env.update(
        WFA_GO_MODCACHE=str(tmp / "mod"),
        WFA_GO_BUILDCACHE=str(tmp / "build"),
        GOPROXY=f"file://{proxy}",
        GOSUMDB="off",
        **extra,
    )
    return env


@pytest.fixture
def scratch(tmp_path):
    yield tmp_path
    rmtree(tmp_path)


def test_every_go_tool_is_a_background_build():
    """A wrapper module under tests/gotools that go-builds.sh does not build would be built by
    whoever needs it first, in the foreground, and never rehearsed here."""
    tools = {p.parent.name for p in (ROOT / "tests/gotools").glob("*/build.conf")}
    assert tools, "no tests/gotools/*/build.conf"
    assert tools <= set(builds()), f"not in scripts/go-builds.sh: {sorted(tools - set(builds()))}"
    # Helm (a minute; the galaxy stage's execution environment carries it), then Pulumi, which
    # the deploy stage needs before the Kubernetes builds.
    assert builds()[:3] == ["helm", "pulumi", "pulumi-language-yaml"], "Helm, then Pulumi first"


@pytest.mark.parametrize("name", builds())
def test_resolves_from_an_empty_module_cache_offline(name, scratch):
    downloads = pathlib.Path(golib("$GOMODCACHE")) / "cache/download"
    if not downloads.is_dir():
        pytest.skip(
            f"no module downloads at {downloads}: the rehearsal reads what the builds downloaded "
            "(make go-builds, or make test, runs them first)"
        )
    proc = subprocess.run(
        ["bash", GO_BUILDS, "resolve", name],
        env=offline_env(scratch, downloads),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, (
        f"{name} cannot resolve from an empty module cache with {downloads} as its only proxy "
        f"(has its build run since its modules changed?):\n{proc.stderr}"
    )
    assert "resolved in" in proc.stderr, proc.stderr
    # It read the empty cache, not the project's: the modules it needs were fetched into it.
    assert any((scratch / "mod/cache/download").iterdir()), proc.stderr


MISSING = "example.invalid/wfa/absent"
# Hashes of the right form that no module has: go.sum is checked after a download, and here the
# download is what fails (or, with a proxy that has the module, the check).
GO_SUM = (
    f"{MISSING} v1.0.0 h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
    f"{MISSING} v1.0.0/go.mod h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
)


def broken_tool(tools: pathlib.Path) -> None:
    """A wrapper module whose command imports a module that `proxy` lacks."""
    d = tools / "broken"
    d.mkdir(parents=True)
    go_mod = f"module local/gotools/broken\n\ngo 1.25\n\nrequire {MISSING} v1.0.0\n"
    (d / "go.mod").write_text(go_mod)
    (d / "go.sum").write_text(GO_SUM)
    (d / "main.go").write_text(f'package main\n\nimport _ "{MISSING}/pkg"\n\nfunc main() {{}}\n')
    (d / "build.conf").write_text(f"PKG=local/gotools/broken\nMODULE={MISSING}\nLDFLAGS=\n")


def build_broken(scratch: pathlib.Path, proxy: pathlib.Path, *flags: str):
    broken_tool(scratch / "tools")
    env = offline_env(
        scratch, proxy, WFA_GO_TOOLS=str(scratch / "tools"), WFA_GO_CACHE=str(scratch / "out")
    )
    return subprocess.run(
        ["bash", BUILD_GO_TOOL, *flags, "broken"],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


@pytest.mark.parametrize("flags", [(), ("--resolve",)], ids=["build", "resolve"])
def test_a_module_the_proxy_lacks_fails_before_the_compile_naming_it(scratch, flags):
    proxy = scratch / "proxy"
    proxy.mkdir()
    proc = build_broken(scratch, proxy, *flags)
    assert proc.returncode == 1, proc.stderr
    assert "go-build: ERROR: cannot resolve the modules of local/gotools/broken" in proc.stderr
    assert f"{MISSING}@v1.0.0" in proc.stderr, proc.stderr
    # The compile never started: no "building" line, no build directory.
    assert "go-build: building" not in proc.stderr, proc.stderr
    assert not list((scratch / "out").glob("bin/broken-*")), proc.stderr


def test_go_sum_still_verifies_with_the_checksum_database_off(scratch):
    """The rehearsal turns GOSUMDB off (the file proxy is no checksum database's); a module
    whose go.mod differs from go.sum's hash must still fail."""
    proxy = scratch / "proxy"
    versions = proxy / MISSING / "@v"
    versions.mkdir(parents=True)
    (versions / "list").write_text("v1.0.0\n")
    (versions / "v1.0.0.info").write_text('{"Version":"v1.0.0","Time":"2026-01-01T00:00:00Z"}\n')
    (versions / "v1.0.0.mod").write_text(f"module {MISSING}\n\ngo 1.25\n")
    proc = build_broken(scratch, proxy, "--resolve")
    assert proc.returncode == 1, proc.stderr
    assert f"{MISSING}@v1.0.0/go.mod" in proc.stderr, proc.stderr
    assert "checksum mismatch" in proc.stderr, proc.stderr
