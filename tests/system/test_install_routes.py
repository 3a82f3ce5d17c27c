"""No route installs the agent from a package index (issue 25).

The agent's distribution, selfhosted-workflow-agent, is not on any public index; whoever
registers that name (or the old one, workflow-agent, which another project holds) there could
otherwise ship code that pip installs in its place. The role's controller-side
builder installs the wheelhouse with `pip --no-index --require-hashes` into the environment
hosts unpack; the Containerfile installs with `pip --no-index`.

The behavioural test runs the builder's install of a wheelhouse it made, with pip configured the
way a controller's could be: an index and a find-links directory that both offer impostor wheels
of the agent; then the role's own host task (read from its task file) installs the result. The
scans keep every other pip command that names the agent honest."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml
from index_harness import POISON, impostor_wheel, serve_index

REPO = Path(__file__).resolve().parents[2]
FILES = REPO / "roles" / "agent" / "files"
TASKS = REPO / "roles" / "agent" / "tasks"
DIST = "selfhosted-workflow-agent"
# The agent named as a requirement (not a path, a command or a directory): the distribution, old
# or new, followed by extras, a version specifier, a quote or the end.
BY_NAME = re.compile(
    r"(?<![\w/.-])(selfhosted[-_])?workflow[-_]agent(\[[^\]]*\])?(?=[=<>~!'\"\s]|$)"
)


def agent_version() -> str:
    text = (REPO / "agent/src/workflow_agent/__init__.py").read_text()
    return text.split('__version__ = "', 1)[1].split('"', 1)[0]


BUILDER_SPEC = importlib.util.spec_from_file_location(
    "build_wheelhouse", FILES / "build_wheelhouse.py"
)
builder = importlib.util.module_from_spec(BUILDER_SPEC)
BUILDER_SPEC.loader.exec_module(builder)


def install_task() -> dict:
    tasks = yaml.safe_load((TASKS / "install_env.yml").read_text())
    [found] = [t for t in tasks if t["name"].startswith("Install the environment")]
    return found


def render(argv: list[str], context: dict) -> list[str]:
    env = jinja2.Environment()  # noqa: S701 - command arguments, not HTML
    env.filters["to_json"] = json.dumps
    env.filters["combine"] = lambda a, b: {**a, **b}
    env.globals["lookup"] = lambda _kind, name: (FILES / name).read_text()
    return [env.from_string(arg).render(context) for arg in argv]


def target_args() -> argparse.Namespace:
    libc = platform.libc_ver()[1]
    if platform.system() != "Linux" or not libc.startswith("2."):
        pytest.skip("the wheelhouse is built here for a glibc Linux controller only")
    return argparse.Namespace(
        system="linux", machine=platform.machine(), libc=libc, macos="",
        python="{}.{}".format(*sys.version_info[:2]),
    )  # fmt: skip


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> dict:
    """The role's wheelhouse for this machine (build_wheelhouse.py, as the role runs it). pip
    downloads the dependencies with the machine's own configuration."""
    args = target_args()
    cache = tmp_path_factory.mktemp("wheelhouse-cache")
    proc = subprocess.run(
        [sys.executable, str(FILES / "build_wheelhouse.py"), "--source", str(REPO / "agent"),
         "--constraints", str(FILES / "wheelhouse-constraints.txt"), "--cache", str(cache),
         "--system", args.system, "--machine", args.machine, "--python", args.python,
         "--libc", args.libc],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def env_build(wheelhouse: dict, out: Path, index: str, links: Path, monkeypatch) -> Path:
    """The controller's install of the wheelhouse into the environment archive
    (build_wheelhouse.build_env), with pip configured the way a controller's could be: an index
    and a find-links directory that both offer impostors."""
    out.mkdir()
    for name in [*wheelhouse["files"]]:
        shutil.copy(Path(wheelhouse["dir"]) / name, out / name)
    monkeypatch.setenv("PIP_INDEX_URL", index)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", index)
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    builder.build_env(target_args(), str(out), "env.tar.gz")
    return out / "env.tar.gz"


def host_install(archive: Path, venv: Path) -> subprocess.CompletedProcess:
    """The role's install task on this machine, as the host runs it."""
    context = {
        "_workflow_agent_look": {"host": {"executable": sys.executable}},
        "_workflow_agent_converge": {
            "install": {
                "archive": str(archive),
                "sha256": builder.sha256(str(archive)),
                "venv": str(venv),
                "key": "k",
            }
        },
        "ansible_check_mode": False,
    }
    argv = render(install_task()["ansible.builtin.command"]["argv"], context)
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture
def impostors(tmp_path) -> list[Path]:
    """The agent's names, at the agent's own version and at a higher one."""
    dest = tmp_path / "impostors"
    return [
        impostor_wheel(dest, DIST, agent_version()),
        impostor_wheel(dest, DIST, "99.0"),
        impostor_wheel(dest, "workflow-agent", "99.0"),
    ]


def test_the_role_installs_the_agent_from_its_wheelhouse_only(
    wheelhouse, impostors, tmp_path, monkeypatch
):
    with serve_index(tmp_path / "index", impostors) as (url, served):
        archive = env_build(wheelhouse, tmp_path / "out", url, impostors[0].parent, monkeypatch)
    assert served == [], "pip asked the index for " + ", ".join(served)
    proc = host_install(archive, tmp_path / "venv")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    python = tmp_path / "venv" / "bin" / "python"
    check = (
        "import importlib.metadata as m, workflow_agent as w; "
        f"print(m.version('{DIST}'), w.__version__, getattr(w, 'MARK', 'real'))"
    )
    got = subprocess.run([python, "-c", check], capture_output=True, text=True, check=True)
    assert got.stdout.split() == [agent_version(), agent_version(), "real"]
    assert POISON not in (tmp_path / "venv" / "bin" / "workflow-agent").read_text()


def test_without_no_index_pip_would_ask_the_index(wheelhouse, impostors, tmp_path, monkeypatch):
    """The control: --no-index (and the controller's pip settings left out) is what keeps the
    index out, so the test above can fail."""
    commands = []
    monkeypatch.setattr(builder, "run", lambda cmd, what, env=None: commands.append(cmd))
    # pip's install is recorded, not run: the archive then holds only its file list.
    env_build(wheelhouse, tmp_path / "out", "http://127.0.0.1:9/simple", tmp_path, monkeypatch)
    [cmd] = [c for c in commands if "install" in c]
    cmd = [arg for arg in cmd if arg != "--no-index"]
    with serve_index(tmp_path / "index", impostors) as (url, served):
        env = dict(os.environ, PIP_INDEX_URL=url, PIP_CONFIG_FILE=os.devnull)
        subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert f"/simple/{DIST}/" in served


def test_the_host_refuses_an_archive_that_is_not_the_controllers(wheelhouse, tmp_path):
    archive = Path(wheelhouse["dir"]) / wheelhouse["archive"]
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(archive.read_bytes() + b"\0")
    context_sha = builder.sha256(str(archive))
    proc = host_install(bad, tmp_path / "venv")  # its own sha256: installs
    assert proc.returncode == 0, proc.stderr
    argv = render(
        install_task()["ansible.builtin.command"]["argv"],
        {
            "_workflow_agent_look": {"host": {"executable": sys.executable}},
            "_workflow_agent_converge": {
                "install": {"archive": str(bad), "sha256": context_sha,
                            "venv": str(tmp_path / "venv2"), "key": "k"}
            },
            "ansible_check_mode": False,
        },
    )  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and "is not the controller's" in proc.stderr
    assert not (tmp_path / "venv2").exists()


def role_tasks(node):
    """Every task of a task list, inside blocks too."""
    for item in node or []:
        yield item
        for key in ("block", "rescue", "always"):
            yield from role_tasks(item.get(key))


def test_every_pip_install_in_the_roles_is_offline_and_hash_checked():
    installs = []
    for path in sorted(REPO.glob("roles/*/tasks/*.yml")):
        for item in role_tasks(yaml.safe_load(path.read_text())):
            assert "ansible.builtin.pip" not in item, f"{path}: {item['name']} (an index route)"
            for module in ("ansible.builtin.command", "ansible.builtin.shell"):
                args = item.get(module) or ""
                if isinstance(args, dict):
                    args = args.get("argv") or args.get("cmd", "")
                text = args if isinstance(args, str) else " ".join(args)
                if re.search(r"\bpip\b", text) and " install" in f" {text}":
                    installs.append(item["name"])
                    assert "--no-index" in text and "--require-hashes" in text, f"{path}: {text}"
    assert installs == []  # hosts run no pip: the controller installs (build_wheelhouse.py)
    source = (FILES / "build_wheelhouse.py").read_text()
    assert '"install", "--no-index"' in source and '"--require-hashes"' in source


def logical_lines(text: str) -> list[str]:
    """Lines with their backslash continuations joined, split at `;` and `&&`."""
    joined = re.sub(r"\\\n", " ", text)
    return [part for line in joined.splitlines() for part in re.split(r";|&&", line)]


def test_every_pip_command_that_names_the_agent_uses_no_index():
    """The Containerfile, the scripts, Molecule, the playbooks and the images: wherever pip is
    given the agent by name (not a path to its source or wheel), it may not reach an index."""
    tracked = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "Containerfile", "Makefile", "roles", "scripts",
         "molecule", "playbooks", "tests/emulator", "tests/images", "benchmarks", "charts"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    by_name = []
    for rel in tracked:
        try:
            text = (REPO / rel).read_text()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        for command in logical_lines(text):
            if re.search(r"\bpip3?\b.*\b(install|download|wheel)\b", command) and BY_NAME.search(
                command
            ):
                by_name.append(rel)
                assert "--no-index" in command, f"{rel}: {command.strip()}"
    assert "Containerfile" in by_name  # the scan sees the one that is there
