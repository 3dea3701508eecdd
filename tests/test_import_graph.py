"""fusionlang's import graph: no cycle among its modules, counting imports inside
functions (they hide a cycle, they do not remove it), the layers on top stay on top (no
library module imports fusionlang.testing or fusionlang.cli), and a package uses only
the public names of another (no ``_private`` import across packages).

Every module is parsed with ast, so the test sees what the code says, not what one run
happened to import. An import of a package's submodule counts as an import of that
submodule (``from fusionlang.lang import ast`` imports fusionlang.lang.ast); the
packages a dotted import passes through are not counted, as in import-linter. Imports
under ``if TYPE_CHECKING:`` never run and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[1] / "fusionlang"

# ---------------------------------------------------------------------------------------
# KNOWN CYCLES: the allow-list. Each entry is one strongly connected set of modules that
# is still a cycle today; the test fails if any other cycle appears, and also if a listed
# one is gone (so the list cannot go stale). Empty it as the cycles are removed.
KNOWN_CYCLES: list[frozenset[str]] = []
# ---------------------------------------------------------------------------------------

#: the layers on top: they may import every package, and no package imports them (the
#: sweep is an application of the library, as the command line is: it reuses `run
#: --check`'s seeded inputs and comparison)
TOP_LAYERS = ("fusionlang.testing", "fusionlang.cli", "fusionlang.sweep")
#: modules above the library that may reach the top layers: the command-line entry point,
#: and the package facade, whose `fusionlang.check_rules` loads fusionlang.testing on first
#: use (a PEP 562 __getattr__; hypothesis is an optional extra)
ENTRY_POINTS = {"fusionlang", "fusionlang.__main__"}
#: the bottom layer: packages that import nothing else of fusionlang, so any package may
#: use them (the executors run any batch of jobs, the campaign's as well as the sweep's)
BOTTOM_LAYERS = ("fusionlang.executors",)


def module_files() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported_names(tree: ast.AST, module: str, is_package: bool):
    """(dotted name, line) of every import in ``tree``, at any depth (functions too),
    relative imports resolved against ``module``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.split(".")[: len(module.split(".")) - (0 if is_package else 1)]
                parent = parent[: len(parent) - (node.level - 1)]
                base = ".".join(parent + ([node.module] if node.module else []))
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno
        stack.extend(ast.iter_child_nodes(node))


def import_graph() -> nx.DiGraph:
    """Module -> modules it imports (fusionlang's only), edges labelled with the line."""
    files = module_files()
    graph = nx.DiGraph()
    graph.add_nodes_from(files)
    for module, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        for name, line in imported_names(tree, module, path.name == "__init__.py"):
            target = name
            while target and target not in files:  # `from pkg import name`: a submodule, else pkg
                target = target.rpartition(".")[0]
            if target and target != module and target.startswith("fusionlang"):
                graph.add_edge(module, target, line=line)
    return graph


def _in_top_layer(module: str) -> bool:
    return any(module == top or module.startswith(top + ".") for top in TOP_LAYERS)


def _describe(graph: nx.DiGraph, cycle: set[str]) -> str:
    edges = [f"{a} -> {b} (line {graph.edges[a, b]['line']})" for a, b in graph.subgraph(cycle).edges]
    return "; ".join(sorted(edges))


def test_no_import_cycles_beyond_the_known_ones():
    graph = import_graph()
    cycles = [frozenset(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    new = [_describe(graph, c) for c in cycles if c not in KNOWN_CYCLES]
    assert new == [], "import cycles: " + " | ".join(new)
    gone = [sorted(c) for c in KNOWN_CYCLES if c not in cycles]
    assert gone == [], f"no longer cycles, remove them from KNOWN_CYCLES: {gone}"


def test_no_library_module_imports_testing_or_cli():
    graph = import_graph()
    offenders = [f"{a} -> {b} (line {graph.edges[a, b]['line']})" for a, b in graph.edges
                 if _in_top_layer(b) and not _in_top_layer(a) and a not in ENTRY_POINTS]
    assert offenders == []


def test_the_bottom_layer_imports_nothing_else_of_fusionlang():
    graph = import_graph()
    offenders = [f"{a} -> {b} (line {graph.edges[a, b]['line']})" for a, b in graph.edges
                 if _package(a) in BOTTOM_LAYERS and _package(b) not in BOTTOM_LAYERS]
    assert offenders == []
    assert any(_package(m) == "fusionlang.executors" for m in graph)  # the layer exists: the test is not vacuous


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_private_name_is_imported_from_another_package():
    offenders = []
    for module, path in module_files().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fusionlang") and \
                    _package(node.module) != _package(module):
                offenders += [f"{module}:{node.lineno} imports {node.module}.{a.name}"
                              for a in node.names if a.name.startswith("_")]
    assert offenders == []


def test_the_scanner_sees_imports_inside_functions_and_relative_ones():
    # the checks above are only as good as the scan: a function-level import is an edge
    tree = ast.parse("def f():\n    from fusionlang.engine.rewrite import apply_rules\n"
                     "from . import graph\nfrom .types import TensorType\n")
    assert sorted(imported_names(tree, "fusionlang.ir.index", False)) == [
        ("fusionlang.engine.rewrite.apply_rules", 2), ("fusionlang.ir.graph", 3), ("fusionlang.ir.types.TensorType", 4)]
    graph = import_graph()
    assert graph.has_edge("fusionlang.api", "fusionlang.backend")  # imported inside fuse()
    assert graph.has_edge("fusionlang.testing.testblocks", "fusionlang.lang.ast")  # `from fusionlang.lang import ast`
