"""The agent role's task files nest at most 3 deep (issue 28): main.yml (or a handler) is level
1, what it includes level 2, what those include level 3, and nothing includes further. Every
task file is reached from an entry point."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

TASKS = Path(__file__).resolve().parents[2] / "roles" / "agent" / "tasks"
HANDLERS = TASKS.parent / "handlers" / "main.yml"
INCLUDES = ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks")
# The templated parts of include file names, and what each can be.
CHOICES = {
    "_workflow_agent_plan.service_manager": ["systemd", "launchd"],
    "'present' if workflow_agent_state == 'present' else 'uninstall'": ["present", "uninstall"],
}


def tasks_of(items):
    for task in items or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from tasks_of(task.get(key))


def names(spec) -> list[str]:
    """The task files an include_tasks/import_tasks argument may name."""
    name = spec["file"] if isinstance(spec, dict) else spec
    name = re.sub(r"\{\{ role_path \}\}/tasks/", "", name)
    found = re.search(r"\{\{ (.*?) \}\}", name)
    if not found:
        return [name]
    return [name.replace(found.group(0), value) for value in CHOICES[found.group(1)]]


def included(path: Path) -> list[str]:
    out = []
    for task in tasks_of(yaml.safe_load(path.read_text())):
        for key in INCLUDES:
            if key in task:
                out += names(task[key])
    return out


def depths() -> dict[str, int]:
    depth = {}
    todo = [("main.yml", 1)] + [(n, 2) for n in included(HANDLERS)]
    while todo:
        name, level = todo.pop()
        if depth.get(name, 0) >= level:
            continue
        depth[name] = level
        todo += [(child, level + 1) for child in included(TASKS / name)]
    return depth


def test_nesting_is_at_most_3_deep():
    deepest = {name: level for name, level in depths().items() if level > 3}
    assert not deepest, deepest


def test_every_task_file_is_reached():
    # platform.yml is the `platform` entry point (the plan playbook's); the rest through main.yml.
    assert sorted(p.name for p in TASKS.glob("*.yml")) == sorted({"platform.yml", *depths()})


OWNERSHIP = ("owner", "group", "mode")


def test_no_task_restates_an_owner_or_a_mode():
    # They are declared once, in the plan (plugins/module_utils/agent_plan.py); tasks read them
    # from it (or from the plan's entries they loop over).
    for path in sorted(TASKS.glob("*.yml")) + [HANDLERS]:
        for task in tasks_of(yaml.safe_load(path.read_text())):
            for module, args in task.items():
                if not module.startswith("ansible.builtin.") or not isinstance(args, dict):
                    continue
                if module in ("ansible.builtin.group", "ansible.builtin.user"):
                    continue  # a user's primary group is not a file's
                for key in OWNERSHIP:
                    if key in args:
                        value = str(args[key])
                        assert re.fullmatch(
                            r"\{\{ (_workflow_agent_plan\.|item\.)[\w.]+ \}\}", value
                        ), f"{path.name}: {task['name']}: {key}: {value}"
