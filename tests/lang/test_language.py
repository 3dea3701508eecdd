"""The language front end: constructs parse to the right AST with spans, the RuleSet
answers what partitioners ask, and formulas become sympy without any eval."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from fusionlang.errors import FuseError
from fusionlang.lang import parse_text
from fusionlang.lang import ast as A
from fusionlang.lang.diagnostics import Diagnostics
from fusionlang.lang.parser import parse_module
from fusionlang.ops import REGISTRY, GraphBuilder

SAMPLE = """\
# a comment
categories low < mid < high
class add, mul : low, commutative
class add : mid when broadcasting and rank(out) >= 2
class def : low
def scaled(x, y; k=0.5) = k * x + select(y > 0, y, 0)
decompose softmax(x; axis) {
    m = reduce_max(x) {axes=[axis], keepdims=1}
    e = exp(x - m)
    return e / reduce_sum(e) {axes=[axis], keepdims=1}
}
rewrite tidy priority 3 shared:
    r @ add(x, 0)
    where same_shape(r, x) and not const(x)
    => x
fuse low|mid -> low : mid [stitch, phase=1, path=low, note="x y"]
strategy s { max_ops = 8, ratio = 0.5, name = "n", flag = true, sizes = [1, 2] }
test t {
    input x: f32[2, 3]
    const c: f32[3] = [1, 2, 3]
    y = scaled(x, c) {k=2.0}
    output y
    expect count(scaled) == 1 and category(y) == mid
}
"""


def parse(text):
    diags = Diagnostics()
    module = parse_module(text, "s.fuse", diags)
    assert not diags.items, [str(d) for d in diags.items]
    return module


def test_items_and_spans():
    module = parse(SAMPLE)
    kinds = [type(i).__name__ for i in module.items]
    assert kinds == ["Categories", "ClassDecl", "ClassDecl", "ClassDecl", "DefDecl", "Decompose", "Rewrite",
                     "FuseDecl", "StrategyDecl", "TestDecl"]
    rewrite = module.items[6]
    assert str(rewrite.span) == "s.fuse:12:1"
    assert (rewrite.name.text, rewrite.priority, rewrite.shared) == ("tidy", 3, True)
    assert isinstance(rewrite.pattern, A.Bind) and str(rewrite.pattern.span) == "s.fuse:13:5"
    assert isinstance(rewrite.guard, A.BoolOp) and str(rewrite.guard.items[1].span) == "s.fuse:14:32"
    fuse = module.items[7]
    assert [(o.name.text, o.value) for o in fuse.options] == [("stitch", None), ("phase", 1), ("path", "low"),
                                                               ("note", "x y")]
    test = module.items[9]
    assert str(test.span) == "s.fuse:18:1" and str(test.stmts[1].span) == "s.fuse:20:5"


def test_operator_precedence():
    module = parse("rewrite r: relu(x) where 1 + 2 * 3 ** 2 == -x and a or not b => x\n")
    guard = module.items[0].guard
    assert isinstance(guard, A.BoolOp) and guard.op == "or"
    left = guard.items[0]
    assert isinstance(left, A.BoolOp) and left.op == "and"
    cmp = left.items[0]
    assert isinstance(cmp, A.Compare) and isinstance(cmp.right, A.Neg)
    total = cmp.left
    assert total.op == "+" and total.right.op == "*" and total.right.right.op == "**"


def test_keywords_stay_usable_as_op_names():
    # `where`, `not` and `and` are ops as well as keywords
    rules = parse_text("rewrite pick: where(c, x, x) where const(c) => x\n"
                       "rewrite both: and(a, a) => a\n")
    assert [r.root_op for r in rules.rewrites] == ["where", "and"]


def test_ruleset_api():
    rules = parse_text(SAMPLE, "s.fuse")
    assert rules.categories == ("low", "mid", "high")
    assert rules.rank("mid") == 1 and rules.top == "high"
    with pytest.raises(FuseError, match="unknown category 'top'"):
        rules.rank("top")
    assert rules.category_of("add") == "low" and rules.category_of("scaled") == "low"
    assert rules.category_of("relu") is None
    assert rules.is_commutative("mul") and not rules.is_commutative("sub")
    assert "scaled" in rules.registry and "scaled" not in REGISTRY
    assert [r.name for r in rules.rewrites] == ["tidy"]
    entry = rules.fuse_entries[0]
    assert entry.producers == frozenset({"low", "mid"}) and entry.flags == frozenset({"stitch"})
    assert dict(entry.options) == {"phase": 1, "path": "low", "note": "x y"}
    assert rules.fuse_result("low", "low") is None
    assert rules.fuse_result("low", "low", flag="stitch") is entry
    assert dict(rules.strategies["s"].options) == {"max_ops": 8, "ratio": 0.5, "name": "n", "flag": True,
                                                    "sizes": (1, 2)}
    assert [t.name for t in rules.tests] == ["t"]
    assert list(rules.decompositions) == ["softmax"]


def test_ruleset_is_immutable():
    rules = parse_text(SAMPLE)
    with pytest.raises(AttributeError):
        rules.categories = ()
    with pytest.raises(TypeError):
        rules.strategies["x"] = None
    with pytest.raises(TypeError):
        rules.fuse_entries[0].options["phase"] = 2


def test_category_refinement_per_node():
    rules = parse_text(SAMPLE)
    b = GraphBuilder("g")
    x = b.input("x", (2, 3))
    same = b.add(x, x, name="same")
    wide = b.add(x, np.ones(3, np.float32), name="wide")
    low_rank = b.add(b.input("v", (3,)), np.ones(1, np.float32), name="low_rank")
    other = b.relu(x, name="other")
    b.output(same, wide, low_rank, other)
    g = b.build()
    cats = {n.name: rules.category_of_node(g, n) for n in g.nodes}
    assert cats == {"same": "low", "wide": "mid", "low_rank": "low", "other": "high"}


def test_def_formula_is_sympy_built_from_the_tree():
    rules = parse_text(SAMPLE)
    opdef = rules.registry.get("scaled")
    from fusionlang.ops.registry import OpCall
    from fusionlang.ir import TensorType

    call = OpCall("scaled", "n", {"k": 2.0}, [TensorType((2, 3)), TensorType((3,))], [TensorType((2, 3))])
    (stmt,) = opdef.access(call)
    v0, v1 = sp.Symbol("v0"), sp.Symbol("v1")
    assert sp.simplify(stmt.body - (2.0 * v0 + sp.Piecewise((v1, v1 > 0), (0, True)))) == 0
    x = np.array([[1, -2, 3], [0, 1, 2]], np.float32)
    y = np.array([1, -1, 2], np.float32)
    (out,) = opdef.reference([x, y], {"k": 2.0})
    np.testing.assert_allclose(out, 2 * x + np.where(y > 0, y, 0))


def test_formulas_never_reach_eval(monkeypatch):
    import builtins

    real_sympify = sp.sympify

    def forbidden(*args, **kwargs):
        raise AssertionError("eval of rule text")

    def sympify_objects_only(value, *args, **kwargs):
        if isinstance(value, str):
            raise AssertionError("sympify of rule text")
        return real_sympify(value, *args, **kwargs)

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(sp, "sympify", sympify_objects_only)
    rules = parse_text("def f(x; k=1.5) = exp(-k * x) + pi * x ** 2\n")
    opdef = rules.registry.get("f")
    (out,) = opdef.reference([np.array([0.0, 1.0], np.float32)], {"k": 1.5})
    np.testing.assert_allclose(out, np.exp(-1.5 * np.array([0.0, 1.0])) + np.pi * np.array([0.0, 1.0]), rtol=1e-6)
    with pytest.raises(FuseError, match="unknown name '__import__'"):
        parse_text("def g(x) = __import__\n")


def test_names_that_reach_generated_code_are_identifiers():
    with pytest.raises(FuseError, match="reserved"):
        parse_text("def float(x) = x\n")
    with pytest.raises(FuseError, match=r"1:6: error: unexpected character '\.'"):
        parse_text("def a.b(x) = x\n")


def test_load_standard_rule_sets_by_name():
    from fusionlang.lang import load_rules, standard_names

    assert {"apollo", "tvm", "dnnfusion", "decompose", "simplify", "std/ops"} <= set(standard_names())
    for name in ("apollo", "tvm", "dnnfusion", "decompose", "simplify", "std/ops"):
        rules = load_rules(name)
        assert rules.name == name.split("/")[-1]
    assert load_rules("apollo") is load_rules("apollo")  # cached: rule sets are immutable


def test_compound_def_infers_and_runs_its_body():
    rules = parse_text("def var2(x; axes=[-1], keepdims=1) {\n"
                       "    m = reduce_mean(x) {axes=axes, keepdims=1}\n"
                       "    return reduce_mean((x - m) * (x - m)) {axes=axes, keepdims=keepdims}\n}\n")
    opdef = rules.registry.get("var2")
    assert opdef.compound and opdef.access is None
    from fusionlang.ir import TensorType

    assert rules.registry.infer("var2", "n", {"axes": [0], "keepdims": 0}, [TensorType((4, 3))]) == [TensorType((3,))]
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    (out,) = opdef.reference([x], {"axes": (0,), "keepdims": 0})
    np.testing.assert_allclose(out, x.var(axis=0))
    assert [c.op for c in rules.decompositions["var2"]] == ["var2"]


def test_boolean_formula_gives_a_bool_op_and_attribute_kinds_follow_defaults():
    rules = parse_text('def near(x, y; tol=0.5, n=2, tag="t", dims=[1, 2]) = abs(x - y) < tol\n')
    opdef = rules.registry.get("near")
    assert {k: a.kind for k, a in opdef.attrs.items()} == {"tol": "float", "n": "int", "tag": "str", "dims": "ints"}
    from fusionlang.ir import TensorType

    assert rules.registry.infer("near", "n", {}, [TensorType((3,)), TensorType((3,))]) == [TensorType((3,), "bool")]
    (out,) = opdef.reference([np.array([0, 1, 2], np.float32), np.array([0.2, 2, 2], np.float32)],
                             opdef.normalize_attrs({}, "n"))
    assert out.tolist() == [True, False, True]


def test_static_functions():
    from fusionlang.lang.guards import Bindings, Context, evaluate

    b = GraphBuilder()
    x = b.input("x", (2, 3, 4))
    b.output(b.relu(x))
    g = b.build()
    ctx = Context(g, Bindings({"x": "x"}))

    def value(text):
        rules = parse_text(f"rewrite r: relu(x) where {text} == 0 => x\n")
        return evaluate(rules.rewrites[0].guard.left, ctx)

    assert value("rank(x)") == 3 and value("shape(x)") == (2, 3, 4) and value("size(x)") == 24
    assert value("dim(x, -1)") == 4 and value('dtype(x)') == "float32"
    assert value("range(1, rank(x))") == (1, 2) and value("reversed([1, 2])") == (2, 1)
    assert value("compose(perm([], 3), [2, 0, 1])") == (0, 2, 1) and value("prod(shape(x))") == 24
    assert value("[-1] + [1] * (rank(x) - 1)") == (-1, 1, 1) and value("max(3, 5, 4)") == 5
    assert value("-7 % 3") == 2 and value("7 // 2") == 3 and value("len([1, 2, 3])") == 3
