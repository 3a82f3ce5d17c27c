"""No route installs the agent from a package index (issue 25).

The agent's distribution, selfhosted-workflow-agent, is not on any public index; whoever
registers that name (or the old one, workflow-agent, which another project holds) there could
otherwise ship code that pip installs in its place. The role installs the controller's
wheelhouse with `pip --no-index --require-hashes`; the Containerfile with `pip --no-index`.

The behavioural test runs the role's own pip command (read from its task file) on a wheelhouse
that the role's own builder made, with pip configured the way a host's could be: an index and a
find-links directory that both offer impostor wheels of the agent. The scans keep every other
pip command that names the agent honest."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import tarfile
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


def task(name_start: str) -> dict:
    tasks = yaml.safe_load((TASKS / "install_wheelhouse.yml").read_text())
    [found] = [t for t in tasks if t["name"].startswith(name_start)]
    return found


def render(argv: list[str], context: dict) -> list[str]:
    return [jinja2.Template(arg).render(context) for arg in argv]


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> dict:
    """The role's wheelhouse for this machine (build_wheelhouse.py, as the role runs it), unpacked
    from its archive the way the host unpacks it. pip downloads the dependencies with the
    machine's own configuration."""
    cache = tmp_path_factory.mktemp("wheelhouse-cache")
    libc = platform.libc_ver()[1]
    if platform.system() != "Linux" or not libc.startswith("2."):
        pytest.skip("the wheelhouse is built here for a glibc Linux controller only")
    proc = subprocess.run(
        [sys.executable, str(FILES / "build_wheelhouse.py"), "--source", str(REPO / "agent"),
         "--constraints", str(FILES / "wheelhouse-constraints.txt"), "--cache", str(cache),
         "--system", "linux", "--machine", platform.machine(),
         "--python", "{}.{}".format(*sys.version_info[:2]), "--libc", libc],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads(proc.stdout)
    host_dir = tmp_path_factory.mktemp("host") / manifest["key"]
    with tarfile.open(Path(manifest["dir"]) / manifest["archive"]) as tar:
        tar.extractall(host_dir, filter="data")
    return {**manifest, "host_dir": str(host_dir)}


def role_install(wheelhouse: dict, venv: Path, index: str, links: Path, drop=()):
    """The role's two tasks: make the virtualenv, then its pip install, with `drop` left out of
    the pip arguments. pip's configuration is only the environment given here."""
    context = {
        "_workflow_agent_look": {"host": {"executable": sys.executable}},
        "_workflow_agent_plan": {"venv": str(venv)},
        "_workflow_agent_converge": {"wheelhouse": wheelhouse},
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL=index,
        PIP_EXTRA_INDEX_URL=index,
        PIP_FIND_LINKS=str(links),
    )
    venv_argv = render(task("Create the virtualenv")["ansible.builtin.command"]["argv"], context)
    subprocess.run(venv_argv, check=True, timeout=120)
    argv = render(task("Install the agent")["ansible.builtin.command"]["argv"], context)
    assert all(arg in argv for arg in drop), (drop, argv)
    argv = [arg for arg in argv if arg not in drop]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)


@pytest.fixture
def impostors(tmp_path) -> list[Path]:
    """The agent's names, at the agent's own version and at a higher one."""
    dest = tmp_path / "impostors"
    return [
        impostor_wheel(dest, DIST, agent_version()),
        impostor_wheel(dest, DIST, "99.0"),
        impostor_wheel(dest, "workflow-agent", "99.0"),
    ]


def test_the_role_installs_the_agent_from_its_wheelhouse_only(wheelhouse, impostors, tmp_path):
    with serve_index(tmp_path / "index", impostors) as (url, served):
        proc = role_install(wheelhouse, tmp_path / "venv", url, impostors[0].parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert served == [], "pip asked the index for " + ", ".join(served)
    python = tmp_path / "venv" / "bin" / "python"
    check = (
        "import importlib.metadata as m, workflow_agent as w; "
        f"print(m.version('{DIST}'), w.__version__, getattr(w, 'MARK', 'real'))"
    )
    got = subprocess.run([python, "-c", check], capture_output=True, text=True, check=True)
    assert got.stdout.split() == [agent_version(), agent_version(), "real"]
    assert POISON not in (tmp_path / "venv" / "bin" / "workflow-agent").read_text()


def test_without_no_index_pip_would_ask_the_index(wheelhouse, impostors, tmp_path):
    """The control: --no-index is what keeps the index out (so the test above can fail)."""
    with serve_index(tmp_path / "index", impostors) as (url, served):
        role_install(wheelhouse, tmp_path / "venv", url, impostors[0].parent, drop=["--no-index"])
    assert f"/simple/{DIST}/" in served


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
    assert installs == ["Install the agent and its dependencies from the wheelhouse, hash-checked"]


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
