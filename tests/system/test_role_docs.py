"""The agent role's docs agree with the code and with each other (issue 28).

Each test holds one statement that users found contradicted: the argument spec's closed sets
are the agent schema's; the supported platforms are one list; the configs' owner and mode are
what the role writes; the playbooks honour an inventory's ansible_pipelining; galaxy.yml's URLs
are real or an explained placeholder.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import typing
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from test_plugins_common import BIN, PLAYBOOK_TIMEOUT
from workflow_agent._config.model import AgentConfig

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "agent"
SPEC = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]
OPTIONS = SPEC["main"]["options"]
README = (REPO / "README.md").read_text()
ROLE_README = (ROLE / "README.md").read_text()


def module_util(name: str):
    path = REPO / "plugins" / "module_utils" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_wfa_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def text(option: dict) -> str:
    description = option.get("description", "")
    return " ".join(description) if isinstance(description, list) else description


def closed_set(annotation) -> tuple[str, ...] | None:
    """The values of a Literal field (or of a list of Literals), else None."""
    if typing.get_origin(annotation) is list:
        (annotation,) = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    return None


SCHEMA_SETS = {
    key: values
    for key, field in AgentConfig.model_fields.items()
    if (values := closed_set(field.annotation)) is not None
}


def test_the_schema_has_the_closed_sets_we_expect():
    # A guard on the helper: were closed_set to find nothing, the next test would hold nothing.
    assert {"deploy_target", "enabled_workflow_types", "log_level"} <= set(SCHEMA_SETS)


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_choices_are_the_agent_schemas(name):
    """A role variable that is an agent key with a closed set offers exactly that set, and
    null (the agent's default)."""
    key = name.removeprefix("workflow_agent_")
    choices = OPTIONS[name].get("choices")
    if key not in SCHEMA_SETS:
        return
    assert choices is not None, f"{name}: the agent's {key} is one of {SCHEMA_SETS[key]}"
    assert [c for c in choices if c is not None] == list(SCHEMA_SETS[key]), name
    assert None in choices, f"{name}: its default, null, must pass the argument spec"


def test_platforms_are_one_list():
    platform = module_util("agent_platform")
    meta = yaml.safe_load((ROLE / "meta" / "main.yml").read_text())["galaxy_info"]["platforms"]
    assert meta == [
        {"name": "Debian", "versions": list(platform.DEBIAN_RELEASES.values())},
        {"name": "macOS", "versions": ["all"]},
    ]
    assert platform.MACOS_MIN == 13  # "all" in meta/main.yml: Galaxy lists no macOS versions
    # The argument spec and the preflight's message say the same sentence.
    assert platform.SUPPORTED in text(SPEC["main"]).replace("\n", " ")
    # The README's platform table: the rows claimed ("yes") are those platforms, and the rows
    # not claimed are refused, not "still accepted".
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in README[README.index("## Platforms") :].splitlines()
        if line.startswith("| ") and not line.startswith("| Platform")
    ]
    claimed = [r[0] for r in rows if r[1].startswith("yes")]
    debian = [f"Debian {v} ({c})" for v, c in platform.DEBIAN_RELEASES.items()]
    assert [c.split(",")[0] for c in claimed] == [*debian, f"macOS {platform.MACOS_MIN}+"]
    for row in rows:
        if row[1].startswith("no") and row[0] != "arm64 (aarch64)":
            assert "refuse" in row[2] and "accept" not in row[2], row


def config_task() -> dict:
    tasks = yaml.safe_load((ROLE / "tasks" / "present.yml").read_text())
    # The task that writes them; the one that only works them out (tags) shares its arguments.
    [task] = [t for t in tasks if t["name"].startswith("Write each instance's config")]
    return task["selfhosted.workflow_agent.agent_config"]


def sentences(doc: str):
    yield from re.split(r"(?<=[.;])\s+|\n-\s|\n\|", doc)


def test_config_owner_and_mode_stated_once_and_true():
    task = config_task()
    assert (task["owner"], task["group"], task["mode"]) == tuple(
        "{{ _workflow_agent_plan.config_file." + key + " }}" for key in ("owner", "group", "mode")
    )
    # The plan declares it (module_utils/agent_plan.py, where every owner and mode is).
    plan_src = (REPO / "plugins" / "module_utils" / "agent_plan.py").read_text()
    assert '"config_file": {"owner": "root", "group": group, "mode": "0640"}' in plan_src
    # The argument spec states it once, where the directory is described.
    stated = [n for n, o in OPTIONS.items() if re.search(r"\b0640\b", text(o))]
    assert stated == ["workflow_agent_config_dir"]
    owner = text(OPTIONS["workflow_agent_config_dir"])
    assert "owned by root, group O(workflow_agent_group), mode 0640" in owner
    # Nowhere does a doc give the configs another owner or mode.
    docs = {
        "argument_specs.yml": yaml.safe_dump(SPEC, width=10_000),
        "roles/agent/README.md": ROLE_README,
        "README.md": README,
    }
    for where, doc in docs.items():
        for sentence in sentences(doc):
            if re.search(r"\bconfigs?\b", sentence) and re.search(r"\b0[0-7]{3}\b", sentence):
                modes = set(re.findall(r"\b0[0-7]{3}\b", sentence)) - {"0750"}  # the directory
                assert modes <= {"0640"}, f"{where}: {sentence!r}"
                assert "agent's user" not in sentence, f"{where}: {sentence!r}"


def test_galaxy_urls_are_real_or_an_explained_placeholder():
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert galaxy.get("repository"), "galaxy-importer requires a repository URL"
    for key in ("repository", "documentation", "homepage", "issues"):
        url = galaxy.get(key)
        if url is None:
            continue
        host = urlparse(url).hostname or ""
        if host == "invalid" or host.endswith(".invalid"):
            # The README says why, naming the very URL.
            assert "There is no public repository" in README and url in README, key
        else:
            assert "There is no public repository" not in README, f"{key}: {url} is real now"


PLAYBOOKS = ("plan", "rollout", "scale", "uninstall")


def pipelining_expressions() -> set[str]:
    found = set()
    for name in PLAYBOOKS:
        for play in yaml.safe_load((REPO / "playbooks" / f"{name}.yml").read_text()):
            if "ansible_pipelining" in play.get("vars", {}):
                found.add(play["vars"]["ansible_pipelining"])
    return found


def test_inventory_pipelining_is_honoured(tmp_path):
    """The playbooks switch pipelining on, but a host's own ansible_pipelining wins: run one
    module on two local hosts with the playbooks' play var, and see which copied a file."""
    [expression] = pipelining_expressions()  # one, the same in every play that sets it
    inventory = {
        "all": {
            "hosts": {"off": {"ansible_pipelining": False}, "default": {}},
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
        }
    }
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    play = [
        {
            "hosts": "all",
            "gather_facts": False,
            "vars": {"ansible_pipelining": expression},
            "tasks": [{"name": "One module", "ansible.builtin.command": "true"}],
        }
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))

    def copied(*extra: str) -> set[str]:
        proc = subprocess.run(
            [str(BIN / "ansible-playbook"), "-vvv", "-i", "inventory.yml", "play.yml", *extra],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=PLAYBOOK_TIMEOUT,
            check=False,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ANSIBLE_NOCOLOR": "1"},
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        # Without pipelining the module is PUT into a temporary file first.
        return set(re.findall(r"^<(\w+)> PUT ", proc.stdout, re.M))

    assert copied() == {"off"}
    assert copied("-e", "workflow_agent_pipelining=false") == {"off", "default"}
