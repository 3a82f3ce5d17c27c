"""The agent's import layering (docs/architecture.md): every module belongs to one layer, and
imports only from the layers that layer may use. A new module must be placed here; an import
that points up the stack (a back-edge) fails."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Layer of each module, by name or by package prefix ("targets." = every module in targets/).
LAYERS = {
    "support": (
        "workflow_agent",
        "durations",
        "clock",
        "redaction",
        "health",
        "metrics",
        "logsetup",
        "trust",
    ),
    "config": ("config", "_config", "_config."),
    "protocol": (
        "client",
        "breaker",
        "deadline",
        "transport",
        "errors",
        "oidc",
        "logship",
        "executor",
        "bootstrap",
    ),
    "targets": ("targets", "targets."),
    "jobs": ("jobdef", "jobs"),
    "slots": ("poller",),
    "edges": ("server", "runner", "cli", "__main__"),
}
# What each layer may import, besides itself.
MAY_USE = {
    "support": set(),
    "config": {"support"},
    "protocol": {"support", "config"},
    "targets": {"support", "config"},
    "jobs": {"support", "config", "protocol", "targets.base"},  # targets only by the interface
    "slots": {"support", "config", "protocol", "jobs"},
    "edges": {"support", "config", "protocol", "targets", "jobs", "slots"},
}


def short(module: str) -> str:
    return module.removeprefix("workflow_agent.") if module != "workflow_agent" else module


def layer_of(module: str) -> str | None:
    name = short(module)
    for layer, members in LAYERS.items():
        for m in members:
            if name == m or (m.endswith(".") and name.startswith(m)):
                return layer
    return None


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / "workflow_agent").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(module: str, path: Path) -> set[str]:
    """The agent modules `module` imports (anywhere in it: local and TYPE_CHECKING imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{module}: the agent uses absolute imports"
            base = node.module or ""
            for alias in node.names:  # `from pkg import mod` imports pkg.mod when it exists
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in ALL else base)
    return {m for m in found if m == "workflow_agent" or m.startswith("workflow_agent.")}


ALL = modules()


def allowed(importer: str, imported: str) -> bool:
    mine, theirs = layer_of(importer), layer_of(imported)
    if mine == theirs:
        return True
    uses = MAY_USE[mine]
    return theirs in uses or short(imported) in uses


def test_every_module_has_a_layer():
    assert [m for m in ALL if layer_of(m) is None] == []


@pytest.mark.parametrize("module", sorted(ALL))
def test_imports_follow_the_layers(module):
    bad = sorted(
        f"{short(module)} ({layer_of(module)}) imports {short(m)} ({layer_of(m)})"
        for m in imports(module, ALL[module])
        if not allowed(module, m)
    )
    assert bad == []


def test_a_back_edge_is_caught():
    """The check itself: the client importing the poll loop is what it must refuse."""
    assert not allowed("workflow_agent.client", "workflow_agent.poller")
    assert not allowed("workflow_agent.targets.docker", "workflow_agent.client")
    assert not allowed("workflow_agent.jobs", "workflow_agent.targets.docker")
    assert allowed("workflow_agent.jobs", "workflow_agent.targets.base")


def test_the_agent_does_not_import_the_emulator():
    for module, path in ALL.items():
        assert "workflow_emulator" not in path.read_text(), module
