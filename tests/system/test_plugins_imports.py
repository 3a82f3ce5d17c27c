"""Plugins share code through module_utils only (issue 28): no plugin imports another plugin's
module (an action plugin importing another one loaded its sys.path edit with it), and only the
one schema-loading module_util, module_utils/_agent_schema.py, edits sys.path."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
PREFIX = "ansible_collections.selfhosted.workflow_agent.plugins."
FILES = sorted(p for p in PLUGINS.rglob("*.py") if "__pycache__" not in p.parts)


def imported(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PLUGINS)))
def test_only_module_utils_are_shared(path):
    for name in imported(ast.parse(path.read_text())):
        if name.startswith(PREFIX):
            kind = name[len(PREFIX) :].split(".")[0]
            assert kind in ("module_utils", "doc_fragments"), f"{path.name} imports {name}"


def test_one_module_edits_sys_path():
    editing = [
        str(p.relative_to(PLUGINS))
        for p in FILES
        if any(
            isinstance(node, ast.Attribute)
            and node.attr == "path"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
            for node in ast.walk(ast.parse(p.read_text()))
        )
    ]
    assert editing == ["module_utils/_agent_schema.py"]
