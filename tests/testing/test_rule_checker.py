"""The rule checker catches wrong rules (with a shrunk counterexample and the rule's
file:line), proves what sympy can prove, and passes every correct rule."""

from __future__ import annotations

import json
import textwrap

import pytest

from fusionlang.lang import load_rules, parse_text
from fusionlang.testing import check_rules
from fusionlang.testing.checker import check_fuse_entry
from fusionlang.testing.symbolic import prove_decomposition, prove_rewrite

EXAMPLES = 40

# Each planted rule is a correct standard rule with one defect. The line numbers of the
# rules are pinned below (PLANTED_LINES), so keep the text's layout.
PLANTED = textwrap.dedent("""\
    import "std/algebra.fuse"

    # conv-BN folding with a sign error: (b + mu) where the fold needs (b - mu)
    rewrite fold_conv_bn_sign_error priority 10:
        batch_norm(conv(x, w, b) {..attrs}, g, beta, mu, var) {epsilon=eps}
        where const(w, b, g, beta, mu, var)
        => conv(x, w * reshape(g / sqrt(var + eps)) {shape=[-1] + [1] * (rank(w) - 1)},
                (b + mu) * g / sqrt(var + eps) + beta) {..attrs}

    # softmax normalized along axis 0 instead of the node's axis
    decompose softmax(x; axis) {
        m = reduce_max(x) {axes=[axis], keepdims=1}
        e = exp(x - m)
        return e / reduce_sum(e) {axes=[0], keepdims=1}
    }

    # a guard too weak: the same number of elements is not the same shape
    rewrite reshape_noop_same_size:
        r @ reshape(x)
        where size(r) == size(x)
        => x

    # a guard too weak in value: a float input is not a non-negative one
    rewrite relu_of_float_is_identity:
        relu(x) where is_float(x) => x

    # true over the reals, false for integers (division truncates)
    rewrite halve_then_double:
        r @ mul(div(x, 2), 2) where same_shape(r, x) => x
    """)
PLANTED_LINES = {
    "fold_conv_bn_sign_error": 4,
    "softmax": 11,
    "reshape_noop_same_size": 18,
    "relu_of_float_is_identity": 24,
    "halve_then_double": 28,
}

CORRECT = textwrap.dedent("""\
    import "std/algebra.fuse"

    rewrite sub_of_neg:
        sub(x, neg(y)) => add(x, y)

    rewrite double_neg:
        neg(neg(x)) => x

    rewrite relu_of_relu:
        relu(relu(x)) => relu(x)

    rewrite exp_of_log_of_positive_constant:
        exp(log(c)) where const(c) and is_scalar(c) and value(c) > 0 => c

    rewrite mul_by_two:
        r @ mul(x, 2) where same_shape(r, x) => add(x, x)

    def swish(x; beta=1.0) = x * sigmoid(beta * x)

    decompose softmax(x; axis) {
        m = reduce_max(x) {axes=[axis], keepdims=1}
        e = exp(x - m)
        return e / reduce_sum(e) {axes=[axis], keepdims=1}
    }
    """)


@pytest.fixture(scope="module")
def planted_report(tmp_path_factory):
    path = tmp_path_factory.mktemp("rules") / "planted.fuse"
    path.write_text(PLANTED)
    return str(path), check_rules(load_rules(str(path)), max_examples=EXAMPLES, kinds=("rewrite", "decompose"))


@pytest.mark.parametrize("name", sorted(PLANTED_LINES))
def test_planted_defect_is_caught_at_its_line(planted_report, name):
    path, report = planted_report
    check = report.find(name)
    assert check.status == "failed", str(check)
    assert check.where == f"{path}:{PLANTED_LINES[name]}"
    assert check.counterexample is not None
    text = str(check)
    assert text.startswith(f"{path}:{PLANTED_LINES[name]}: ")
    # the counterexample names the values of the instance it failed on
    assert " = input " in text or " = const " in text


def test_sign_error_counterexample_is_shrunk(planted_report):
    _, report = planted_report
    cx = report.find("fold_conv_bn_sign_error").counterexample
    leaves = {leaf.var: (leaf, array) for leaf, array in cx.leaves}
    assert set(leaves) == {"x", "w", "b", "g", "beta", "mu", "var"}
    # hypothesis shrinks to one-element tensors, and the error is |2 mu g / sqrt(var+eps)|
    assert all(array.size == 1 for _, array in leaves.values())
    assert float(leaves["mu"][1].ravel()[0]) != 0.0
    assert cx.expected is not None and cx.actual is not None
    assert "elements differ" in cx.message


def test_wrong_axis_counterexample_names_the_axis(planted_report):
    _, report = planted_report
    cx = report.find("softmax", "decompose").counterexample
    (name, op, attrs), = cx.nodes
    assert op == "softmax" and attrs["axis"] % len(cx.leaves[0][1].shape) != 0
    assert "decomposition side" in cx.details()


def test_weak_guard_is_reported_as_an_ill_typed_firing(planted_report):
    _, report = planted_report
    message = report.find("reshape_noop_same_size").counterexample.message
    assert message.startswith("firing the rule fails:") and "computes" in message


def test_a_proof_over_the_reals_does_not_hide_an_integer_counterexample(planted_report):
    _, report = planted_report
    check = report.find("halve_then_double")
    assert check.status == "failed"
    leaf, array = next((leaf, a) for leaf, a in check.counterexample.leaves if leaf.var == "x")
    assert array.dtype.kind == "i"


def test_correct_rules_hold_and_scalar_ones_are_proved(tmp_path):
    path = tmp_path / "correct.fuse"
    path.write_text(CORRECT)
    report = check_rules(load_rules(str(path)), max_examples=EXAMPLES, kinds=("rewrite", "decompose", "def"))
    assert report.ok, str(report)
    status = {c.name: c.status for c in report.checks}
    assert status == {"sub_of_neg": "proved", "double_neg": "proved", "relu_of_relu": "proved",
                      "exp_of_log_of_positive_constant": "proved", "mul_by_two": "proved",
                      "swish": "checked", "softmax": "checked"}
    assert all(c.instances > 0 for c in report.checks)


def test_a_guard_nothing_satisfies_fails_with_the_reason_at_the_pattern(tmp_path):
    path = tmp_path / "never.fuse"
    path.write_text("rewrite never: relu(x) where rank(x) > 9 => x\n")
    check = check_rules(load_rules(str(path)), max_examples=10, kinds=("rewrite",)).find("never")
    assert check.status == "failed" and check.instances == 0
    assert check.detail.startswith(f"{path}:1:16: no drawn instance satisfied the pattern and guard")
    assert "rank(x) > 9" in check.detail and "'accepts uncovered'" in check.detail


def test_a_rule_without_instances_is_under_covered_when_its_author_accepts_that(tmp_path):
    path = tmp_path / "never.fuse"
    path.write_text("rewrite never accepts uncovered: relu(x) where rank(x) > 9 => x\n"
                    "rewrite never_too: relu(x) where rank(x) > 10 => x\n")
    report = check_rules(load_rules(str(path)), max_examples=10, kinds=("rewrite",))
    assert report.find("never").status == "under-covered"
    assert report.find("never").detail.endswith("(accepted: the rule says 'accepts uncovered')")
    assert report.find("never_too").status == "failed"
    allowed = check_rules(load_rules(str(path)), max_examples=10, kinds=("rewrite",), allow_uncovered=True)
    assert allowed.find("never_too").status == "under-covered" and allowed.ok
    assert allowed.find("never_too").detail.endswith("(accepted: --allow-uncovered)")


def test_a_pattern_constant_is_not_a_wildcard(tmp_path):
    # the attention bug class: a rule that is right for one attribute value, written
    # without pinning it, matches every value
    path = tmp_path / "wildcard.fuse"
    path.write_text("rewrite leaky_is_relu: leaky_relu(x) => relu(x)\n"
                    "rewrite leaky_zero_is_relu: leaky_relu(x) {alpha=0.0} => relu(x)\n")
    report = check_rules(load_rules(str(path)), max_examples=EXAMPLES, kinds=("rewrite",))
    assert report.find("leaky_is_relu").status == "failed"
    assert report.find("leaky_zero_is_relu").status == "proved"


def test_fuse_entry_below_its_inputs_fails_at_its_line(tmp_path):
    path = tmp_path / "lattice.fuse"
    path.write_text("categories a < b < c\n"
                    "class relu : a\n"
                    "fuse a -> b : b\n"
                    "fuse c -> a : b\n")
    report = check_rules(load_rules(str(path)), kinds=("fuse",))
    good, bad = report.checks
    assert (good.status, good.where) == ("proved", f"{path}:3")
    assert (bad.status, bad.where) == ("failed", f"{path}:4")
    assert "'b' is below 'c'" in bad.detail


def test_a_nofuse_entry_that_decides_a_pair_is_proved():
    report = check_rules(load_rules("xla"), kinds=("fuse",))
    deny = report.find("nofuse reduce -> elemwise|broadcast|reduce")
    assert (deny.status, deny.where) == ("proved", "xla.fuse:5")
    assert str(deny).startswith("xla.fuse:5: nofuse reduce -> elemwise|broadcast|reduce: proved")


def test_a_nofuse_entry_shadowed_on_every_pair_fails_naming_the_entry(tmp_path):
    # the importing file's entries take precedence: its fuse entry decides the only pair
    (tmp_path / "base.fuse").write_text("categories a < b < c\n"
                                        "class relu : a\n"
                                        "nofuse c -> a\n")
    (tmp_path / "over.fuse").write_text('import "base.fuse"\n'
                                        "fuse c -> a : c\n")
    report = check_rules(load_rules(str(tmp_path / "over.fuse")), kinds=("fuse",))
    deny = report.find("nofuse c -> a")
    assert (deny.status, deny.where) == ("failed", f"{tmp_path / 'base.fuse'}:3")
    assert f"shadowed on every pair by earlier entries: c -> a : c ({tmp_path / 'over.fuse'}:2)" in deny.detail


def test_report_serializes(planted_report):
    _, report = planted_report
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] is False and data["counts"]["failed"] == len(PLANTED_LINES)
    failed = [c for c in data["checks"] if c["status"] == "failed"]
    assert all(c["counterexample"]["where"] == c["where"] for c in failed)
    assert report.summary().startswith("planted: 5 rules: 0 proved, 0 checked, 0 under-covered, 5 failed")


# ----- sympy proofs --------------------------------------------------------------------------


def _rewrite(text):
    rules = parse_text("import \"std/algebra.fuse\"\n" + text, "proof.fuse")
    return rules.rewrites[0], rules


def test_proof_of_an_identity_and_refusal_of_a_falsehood():
    rule, rules = _rewrite("rewrite r: mul(sigmoid(x), x) => silu(x)")
    assert prove_rewrite(rule, rules.registry).proved
    rule, rules = _rewrite("rewrite r: mul(sigmoid(x), x) => mul(tanh(x), x)")
    proof = prove_rewrite(rule, rules.registry)
    assert not proof.proved and "could not show" in proof.note


def test_proof_reads_decimal_constants_as_closed_forms():
    rules = load_rules("decompose")
    case = next(c for c in rules.decompositions["gelu"] if dict(c.requires) == {"approximate": "none"})
    proof = prove_decomposition(case, rules.registry)
    assert proof.proved and "closed forms" in proof.note


def test_non_scalar_rules_are_not_proved():
    rule, rules = _rewrite("rewrite r: reduce_sum(x) {axes=[0], keepdims=1} => x")
    proof = prove_rewrite(rule, rules.registry)
    assert not proof.proved and proof.note.startswith("not a scalar rule")


def test_lattice_check_unit():
    rules = load_rules("apollo")
    assert all(check_fuse_entry(e, rules).status == "proved" for e in rules.fuse_entries)


def test_a_formula_is_only_compared_where_every_part_of_it_is_defined():
    # found by `fusionlang check`: bn_b at x == mean with var + epsilon < 0 is 0 for sympy
    # (0 times an imaginary factor) and NaN in floating point, which is no counterexample
    import sympy as sp

    from fusionlang.testing.checker import _defined_at

    x, y = sp.symbols("x y")
    formula = x * y ** sp.Rational(-1, 2) + 1
    assert _defined_at(formula, {x: sp.Float(1), y: sp.Float(4)})
    assert not _defined_at(formula, {x: sp.Float(0), y: sp.Float(-1)})
    assert not _defined_at(formula, {x: sp.Float(0), y: sp.Float(0)})


def test_bn_b_holds_with_the_cli_budget():
    ruleset = load_rules("std/compound")
    report = check_rules(ruleset, max_examples=60, kinds=("def",), select=lambda kind, name, where: name == "bn_b")
    assert report.ok and [c.status for c in report.checks] == ["checked"]
