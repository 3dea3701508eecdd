"""Opening compound ops is bounded: the checker refuses an op whose full expansion
builds more than MAX_EXPANSION_NODES nodes (a chain of defs each doubling the work hung
lint-clean rule sets in `fuse`), and a rewrite run stops past a node budget that counts
what decompositions build."""

from __future__ import annotations

import pytest

from fusionlang.cli import main
from fusionlang.engine import rewrite as rewrite_module
from fusionlang.engine.rewrite import apply_rules
from fusionlang.errors import RewriteError, RuleError
from fusionlang.lang import checker as checker_module
from fusionlang.lang import lint, load_rules
from fusionlang.lang.limits import MAX_EXPANSION_NODES
from fusionlang.ops import GraphBuilder


def _chain(n: int) -> str:
    """def f0 .. f<n>, each f<k> using f<k-1> twice: f<n> opens into about 3 * 2**n nodes."""
    lines = ["def f0(x) { return neg(x) }"]
    lines += [f"def f{k}(x) {{\n    a = f{k - 1}(x)\n    b = f{k - 1}(a)\n    return b\n}}" for k in range(1, n + 1)]
    return "\n".join(lines) + "\n"


def _first_over_the_limit() -> int:
    size, k = 1, 0  # f0 builds one node; f<k> builds two f<k-1> nodes and opens both
    while size <= MAX_EXPANSION_NODES:
        size, k = 2 * (1 + size), k + 1
    return k


def _def_line(text: str, k: int) -> int:
    return text.splitlines().index(next(line for line in text.splitlines() if line.startswith(f"def f{k}("))) + 1


def test_chain_of_doubling_defs_is_a_located_error(tmp_path, capsys):
    text = _chain(40) + "rewrite r: add(x, y) => f40(x)\n"
    path = tmp_path / "chain.fuse"
    path.write_text(text)
    k = _first_over_the_limit()
    (diag,) = lint([path])
    assert diag.message == f"def 'f{k}' expands to more than {MAX_EXPANSION_NODES} nodes"
    assert (diag.span.line, diag.span.col) == (_def_line(text, k), 1)
    assert diag.hint.startswith(f"it builds 'f{k - 1}' x2 (")
    with pytest.raises(RuleError) as info:
        load_rules(str(path))
    assert [str(d) for d in info.value.diagnostics] == [str(diag)]
    assert main(["lint", str(path)]) == 2
    assert f"chain.fuse:{diag.span.line}:1: error: def 'f{k}' expands to more than" in capsys.readouterr().err


def test_decomposition_through_a_long_chain_is_reported_where_the_limit_is_passed(tmp_path):
    text = _chain(30) + "decompose gelu(x) { return f30(x) }\n"
    path = tmp_path / "chain.fuse"
    path.write_text(text)
    (diag,) = lint([path])
    assert diag.message == f"def 'f{_first_over_the_limit()}' expands to more than {MAX_EXPANSION_NODES} nodes"


def test_decomposition_of_a_builtin_op_over_the_limit(tmp_path):
    k = _first_over_the_limit() - 1  # f<k> is within the limit; two of them are not
    path = tmp_path / "wide.fuse"
    path.write_text(_chain(k) + f"decompose gelu(x) {{\n    a = f{k}(x)\n    return f{k}(a)\n}}\n")
    (diag,) = lint([path])
    assert diag.message == f"decomposition of 'gelu' expands to more than {MAX_EXPANSION_NODES} nodes"
    assert (diag.span.line, diag.span.col) == (len(_chain(k).splitlines()) + 1, 1)


def test_chain_just_within_the_limit_lints_clean(tmp_path):
    path = tmp_path / "chain.fuse"
    path.write_text(_chain(_first_over_the_limit() - 1))
    assert lint([path]) == []


def test_inferring_a_def_chain_instantiates_each_def_once_per_type(tmp_path, monkeypatch):
    created = [0]
    original = checker_module.Instantiator

    class Counting(original):
        def __init__(self, *args, **kwargs):
            created[0] += 1
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(checker_module, "Instantiator", Counting)
    n = 12
    path = tmp_path / "chain.fuse"
    path.write_text(_chain(n) + "test t {\n    input a: float32[4]\n    b = f12(a)\n    output b\n"
                                "    expect count(neg) == 1\n}\n")
    lint([path])
    # one instantiation per def and input type (doubling would make it 2 ** 12)
    assert 0 < created[0] <= 4 * (n + 1)


def test_rewrite_run_stops_past_its_decomposition_node_budget(monkeypatch):
    from fusionlang.lang import parse_text

    rules = parse_text(_chain(6) + "rewrite r: add(x, y) => f6(x)\n", "budget.fuse")
    monkeypatch.setattr(rewrite_module, "decomposition_node_budget", lambda graph: 50)
    b = GraphBuilder()
    x, y = b.input("x", (4,)), b.input("y", (4,))
    b.output(b.add(x, y, name="m"))
    with pytest.raises(RewriteError) as info:
        apply_rules(b.build(), rules)
    message = str(info.value)
    assert message.startswith("budget.fuse:")
    assert "decomposing stopped: the decomposition of 'f" in message
    assert message.endswith("passes the budget of 50 nodes that decompositions may build in one run")
