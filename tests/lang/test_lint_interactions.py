"""lint sees rule interactions: a rewrite whose result a decomposition of the same rule
set opens again (it is undone), or a rewrite and a decomposition that loop, is a
warning at the rewrite naming both rules and their lines."""

from __future__ import annotations

import pytest

from fusionlang.engine.rewrite import apply_rules
from fusionlang.errors import RewriteError
from fusionlang.lang import lint, load_rules
from fusionlang.ops import GraphBuilder

TO_SILU = """
rewrite to_silu:
    mul(x, sigmoid(x))
    => silu(x)
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def silu_graph():
    b = GraphBuilder()
    x = b.input("x", (8,))
    b.output(b.mul(b.sigmoid(x), x, name="m"))
    return b.build()


def test_a_rewrite_a_decomposition_undoes_is_a_warning(tmp_path):
    path = write(tmp_path, "silu.fuse", 'import "apollo.fuse"\n' + TO_SILU)
    opened_at = load_rules("decompose").decompositions["silu"][0].where
    (diag,) = lint([path])
    assert str(diag) == (f"{path}:3:9: warning: rewrite 'to_silu' ({path}:3) is undone: it builds 'silu', which "
                         f"decompose silu ({opened_at}) opens again")
    # and it is true: the rule fires, and no silu is left
    result = apply_rules(silu_graph(), load_rules(path))
    assert result.fired["to_silu"] == 1
    assert "silu" not in {n.op for n in result.graph.nodes}


def test_a_rewrite_and_a_decomposition_that_loop_is_a_warning(tmp_path):
    path = write(tmp_path, "loop.fuse", "decompose silu(x) {\n    return x * sigmoid(x)\n}\n" + TO_SILU)
    (diag,) = lint([path])
    assert str(diag) == (f"{path}:5:9: warning: rewrite 'to_silu' ({path}:5) and decompose silu ({path}:1) can "
                         "loop: the rewrite builds 'silu', which the decomposition opens into what the rewrite "
                         "matches")
    with pytest.raises(RewriteError, match="budget"):
        apply_rules(silu_graph(), load_rules(path))


def test_a_compound_def_that_opens_the_result_is_named(tmp_path):
    text = "def twice(x) {\n    return x + x\n}\nrewrite r: mul(x, 2) => twice(x)\n"
    path = write(tmp_path, "def.fuse", text)
    (diag,) = lint([path])
    assert str(diag) == (f"{path}:4:9: warning: rewrite 'r' ({path}:4) is undone: it builds 'twice', which "
                         f"def 'twice' ({path}:1) opens again")


def test_no_warning_when_the_case_cannot_apply(tmp_path):
    # only the erf form of gelu is opened: a rewrite to the tanh form stays
    text = ('decompose gelu(x; approximate="none") {\n    return 0.5 * x * (1 + erf(x * 0.7071067811865476))\n}\n'
            'rewrite r: mul(x, tanh(x)) => gelu(x) {approximate="tanh"}\n')
    assert lint([write(tmp_path, "gelu.fuse", text)]) == []


def test_no_warning_without_the_decomposition(tmp_path):
    path = write(tmp_path, "silu.fuse", 'import "tvm.fuse"\n' + TO_SILU)
    assert lint([path]) == []
    result = apply_rules(silu_graph(), load_rules(path))
    assert [n.op for n in result.graph.nodes] == ["silu"]


def test_a_rewrite_to_an_op_opened_deeper_still_warns(tmp_path):
    # the body of silu builds sigmoid, which is opened in turn: the loop is broken
    text = ("decompose silu(x) {\n    return x * sigmoid(x)\n}\n"
            "decompose sigmoid(x) {\n    return 1 / (1 + exp(-x))\n}\n" + TO_SILU)
    path = write(tmp_path, "deep.fuse", text)
    (diag,) = lint([path])
    assert "is undone: it builds 'silu', which decompose silu" in str(diag)
    assert apply_rules(silu_graph(), load_rules(path)).fired["to_silu"] == 1


def test_deeply_nested_bodies_are_checked_without_a_crash(tmp_path):
    # nine defs, each 90 calls deep around the previous: opened in full, the term would
    # be 810 levels deep
    def nest(inner: str) -> str:
        for _ in range(90):
            inner = f"exp({inner})"
        return inner

    lines = ["def g0(x) { return " + nest("x") + " }"]
    lines += [f"def g{k}(x) {{ return {nest(f'g{k - 1}(x)')} }}" for k in range(1, 9)]
    lines.append("rewrite r: relu(x) => g8(x)")
    path = write(tmp_path, "deep.fuse", "\n".join(lines) + "\n")
    (diag,) = lint([path])
    assert str(diag) == (f"{path}:10:9: warning: rewrite 'r' ({path}:10) is undone: it builds 'g8', which "
                         f"def 'g8' ({path}:9) opens again")


def test_a_rule_set_with_errors_gets_no_interaction_warnings(tmp_path):
    path = write(tmp_path, "bad.fuse", 'import "apollo.fuse"\n' + TO_SILU + "rewrite bad: relu(x) => exp(y)\n")
    assert [d.severity for d in lint([path])] == ["error"]


def test_the_cli_prints_the_warning_and_exits_0(tmp_path, capsys):
    from fusionlang.cli import main

    path = write(tmp_path, "silu.fuse", 'import "apollo.fuse"\n' + TO_SILU)
    assert main(["lint", path]) == 0
    out, err = capsys.readouterr()
    assert f"{path}:3:9: warning: rewrite 'to_silu' ({path}:3) is undone" in out + err
    assert "1 file(s): 0 error(s), 1 warning(s)" in out + err


def test_a_result_that_stays_is_not_undone_when_only_an_inner_op_is_opened(tmp_path):
    # the result is a mul, which nothing opens; the silu inside it is opened, and that is
    # the decomposition's business, not an undone rewrite
    path = write(tmp_path, "inner.fuse", 'import "apollo.fuse"\nrewrite scaled_silu: mul(mul(x, sigmoid(x)), c) '
                                          'where const(c) => silu(x) * c\n')
    assert lint([path]) == []


def test_an_undone_rewrite_the_author_accepts_is_no_warning(tmp_path):
    path = write(tmp_path, "silu.fuse", 'import "apollo.fuse"\nrewrite to_silu accepts undone:\n'
                                        '    mul(x, sigmoid(x)) => silu(x)\n')
    assert lint([path]) == []


def test_an_undone_warning_names_the_way_to_accept_it(tmp_path):
    path = write(tmp_path, "silu.fuse", 'import "apollo.fuse"\n' + TO_SILU)
    (diag,) = lint([path])
    assert diag.hint.endswith("or say 'accepts undone' in the rule")
