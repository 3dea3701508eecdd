"""The backend's modules import one another without cycles, counting imports inside
functions (runtime and its runtimes used to import each other from function bodies)."""

from __future__ import annotations

import ast
from pathlib import Path

import fusionlang.backend

BACKEND = Path(fusionlang.backend.__file__).parent


def _imports(path: Path) -> set[str]:
    """The fusionlang.backend modules ``path`` imports, at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fusionlang.backend."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[2] for a in node.names if a.name.startswith("fusionlang.backend."))
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(module, path):
        state[module] = 1
        for other in sorted(graph.get(module, ())):
            if state.get(other) == 1:
                return path + [module, other]
            if other not in state:
                found = visit(other, path + [module])
                if found:
                    return found
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            found = visit(module, [])
            if found:
                return found
    return None


def test_no_import_cycle_among_backend_modules():
    graph = {p.stem: _imports(p) for p in BACKEND.glob("*.py") if p.stem != "__init__"}
    assert _cycle(graph) is None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"runtime": {"runtime_c"}, "runtime_c": {"runtime"}}) == ["runtime", "runtime_c", "runtime"]
