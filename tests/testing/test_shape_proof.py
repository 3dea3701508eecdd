"""Proofs for every rank and size (issue 36 item 7): true rules of the fragment are
proved, wrong ones (the planted set among them) and rules outside the fragment are not,
each with its reason; `check` reports the proof beside its sampled verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fusionlang

from fusionlang.cli import main
from fusionlang.lang import load_rules, parse_text
from fusionlang.testing.checker import check_rewrite
from fusionlang.testing.shape_proof import PROVED, prove_decomposition_all_shapes, prove_rewrite_all_shapes
from test_planted_rules import PLANTED, WRONG

TRUE_RULES = """\
import "std/ops.fuse"

rewrite mul_one: r @ mul(x, 1) where same_shape(r, x) => x
rewrite sum_linear:
    reduce_sum(mul(x, c)) {axes=a, keepdims=k, noop_with_empty_axes=n} where rank(c) == 0
    => mul(reduce_sum(x) {axes=a, keepdims=k, noop_with_empty_axes=n}, c)
rewrite mean_linear:
    reduce_mean(add(mul(x, c), d)) {axes=[-2, -1], keepdims=0} where rank(c) == 0 and rank(d) == 0
    => reduce_mean(x) {axes=[-2, -1], keepdims=0} * c + d
rewrite centered_mean_is_zero:
    reduce_mean(sub(x, reduce_mean(x) {axes=[-1], keepdims=1})) {axes=[-1], keepdims=1} => 0
rewrite scale_by_a_kept_sum:
    reduce_sum(mul(x, s @ reduce_sum(y) {axes=[-1], keepdims=1})) {axes=[-1], keepdims=1}
    where same_shape(x, y)
    => mul(reduce_sum(x) {axes=[-1], keepdims=1}, s)
rewrite transpose_twice: transpose(transpose(x) {perm=[]}) {perm=[]} => relu(x) - relu(-x)
rewrite transpose_pair_literal: transpose(transpose(x) {perm=[1, 2, 0]}) {perm=[2, 0, 1]} => abs(x) * sign(x)
rewrite sum_two_axes_either_order:
    reduce_sum(reduce_sum(x) {axes=[-1], keepdims=1}) {axes=[-2], keepdims=1}
    => reduce_sum(reduce_sum(x) {axes=[-2], keepdims=1}) {axes=[-1], keepdims=1}
rewrite sum_two_axes_at_once:
    reduce_sum(reduce_sum(x) {axes=[0], keepdims=0}) {axes=[0], keepdims=0} => reduce_sum(x) {axes=[0, 1], keepdims=0}
rewrite exp_product: mul(exp(a), exp(b)) => exp(add(a, b))
rewrite scale_and_unscale: div(mul(x, c), c) where rank(c) == 0 and value(c) != 0 => x
rewrite sum_of_positives_divides:
    r @ div(e @ exp(x), s @ reduce_sum(e) {axes=[-1], keepdims=1}) where same_shape(r, x)
    => exp(x) * (1 / reduce_sum(exp(x)) {axes=[-1], keepdims=1})
rewrite where_same_branches: r @ where(p, x, x) where same_shape(r, x) => relu(x) + (x - relu(x))
"""

WRONG_RULES = """\
import "std/ops.fuse"

rewrite mul_one_broadcasting: mul(x, 1) => x
rewrite sum_axis_off_by_one: reduce_sum(x) {axes=[-1], keepdims=1} => reduce_sum(x) {axes=[-2], keepdims=1}
rewrite sum_wrong_keepdims: reduce_sum(x) {axes=[-1], keepdims=1} => reduce_sum(x) {axes=[-1], keepdims=0}
rewrite sum_reused_wrong_keepdims:
    r @ div(e @ exp(x), reduce_sum(e) {axes=[-1], keepdims=0}) where same_shape(r, x)
    => div(exp(x), reduce_sum(exp(x)) {axes=[-1], keepdims=1})
rewrite broadcast_asymmetry: sub(add(x, y), y) => x
rewrite scale_through_a_broadcast_scalar:
    reduce_sum(mul(x, c)) {axes=a, keepdims=k, noop_with_empty_axes=n} where is_scalar(c)
    => mul(reduce_sum(x) {axes=a, keepdims=k, noop_with_empty_axes=n}, c)
rewrite mean_of_a_sum_by_the_wrong_axes:
    reduce_sum(mul(x, s @ reduce_sum(y) {axes=[-1], keepdims=1})) {axes=[-2], keepdims=1}
    where same_shape(x, y)
    => mul(reduce_sum(x) {axes=[-2], keepdims=1}, s)
rewrite axes_of_unknown_sign_merged:
    reduce_sum(reduce_sum(x) {axes=[-1], keepdims=0}) {axes=[0], keepdims=0} => reduce_sum(x) {axes=[0, -1], keepdims=0}
rewrite two_axes_wrong_pair:
    reduce_sum(reduce_sum(x) {axes=[-1], keepdims=0}) {axes=[-1], keepdims=0} => reduce_sum(x) {axes=[-3, -1], keepdims=0}
rewrite transposes_not_inverse: transpose(transpose(x) {perm=[1, 0, 2]}) {perm=[0, 2, 1]} => relu(x) - relu(-x)
rewrite unscale_without_a_guard: div(mul(x, c), c) where rank(c) == 0 => x
rewrite sqrt_of_square_root: mul(sqrt(x), sqrt(x)) => x
rewrite exp_of_log: exp(log(x)) => x
rewrite max_is_not_linear:
    reduce_max(mul(x, c)) {axes=[-1], keepdims=1} where rank(c) == 0 => mul(reduce_max(x) {axes=[-1], keepdims=1}, c)
"""

OUTSIDE = """\
import "std/ops.fuse"

rewrite matmul_scale: r @ mul(m @ matmul(a, b), 1) where same_shape(r, m) => matmul(a, b)
rewrite conv_identity: identity(conv(x, w)) => conv(x, w)
rewrite slice_of_relu: slice(relu(x)) {starts=s, ends=e, axes=a, steps=t} => relu(slice(x) {starts=s, ends=e, axes=a, steps=t})
rewrite reshape_noop: r @ reshape(x) where same_shape(r, x) => x
"""


def _rules(text: str, name: str = "proof.fuse"):
    return parse_text(text, name)


def _proof(rules, name):
    return prove_rewrite_all_shapes(next(r for r in rules.rewrites if r.name == name), rules.registry)


@pytest.mark.parametrize("name", [r.name for r in _rules(TRUE_RULES).rewrites])
def test_a_true_rule_of_the_fragment_is_proved_for_all_shapes(name):
    proof = _proof(_rules(TRUE_RULES), name)
    assert proof.proved, str(proof)
    assert str(proof) == PROVED


@pytest.mark.parametrize("name", [r.name for r in _rules(WRONG_RULES).rewrites])
def test_a_wrong_rule_is_not_proved(name):
    proof = _proof(_rules(WRONG_RULES), name)
    assert not proof.proved
    assert str(proof).startswith("not proved: ") and proof.reason


def test_the_reasons_name_what_could_not_be_shown():
    rules = _rules(WRONG_RULES)
    assert "shapes may differ" in _proof(rules, "mul_one_broadcasting").reason
    assert "shapes may differ" in _proof(rules, "sum_axis_off_by_one").reason
    assert "div needs c nonzero" in _proof(rules, "unscale_without_a_guard").reason
    assert "sqrt needs x nonnegative" in _proof(rules, "sqrt_of_square_root").reason
    assert "log needs x positive" in _proof(rules, "exp_of_log").reason


def test_a_rule_its_instances_fail_gets_no_proof():
    # hoisting a scale out of a sum is true over the reals (the prover alone proves it)
    # and overflows float32: the sampled failure stands, with no proof beside it
    rules = parse_text(PLANTED, "planted.fuse")
    rule = next(r for r in rules.rewrites if r.name == "hoist_scale_wrong")
    assert prove_rewrite_all_shapes(rule, rules.registry).proved
    check = check_rewrite(rule, rules)
    assert check.status == "failed" and check.all_shapes is None
    assert "all shapes" not in str(check)


@pytest.mark.parametrize("name", [name for name in WRONG if name != "hoist_scale_wrong"])
def test_no_other_planted_wrong_rule_is_proved_for_all_shapes(name):
    assert not _proof(parse_text(PLANTED, "planted.fuse"), name).proved


@pytest.mark.parametrize("name,op", [("matmul_scale", "matmul"), ("conv_identity", "conv"),
                                     ("slice_of_relu", "slice"), ("reshape_noop", "reshape")])
def test_a_rule_outside_the_fragment_says_which_op(name, op):
    proof = _proof(_rules(OUTSIDE), name)
    assert str(proof) == f"not proved: outside the fragment (op {op})"


def test_decompositions_of_elementwise_ops_are_proved_and_compound_ones_are_outside():
    rules = load_rules("decompose")
    verdicts = {(case.op, case.requires): prove_decomposition_all_shapes(case, rules.registry)
                for op, cases in rules.decompositions.items() for case in cases}
    assert verdicts[("sigmoid", ())].proved and verdicts[("silu", ())].proved
    assert verdicts[("gelu", (("approximate", "tanh"),))].proved
    # equal only if 0.7071067811865476 were sqrt(2)/2: no proof
    assert "closed forms" in verdicts[("gelu", (("approximate", "none"),))].reason
    assert str(verdicts[("softmax", ())]) == "not proved: outside the fragment (op softmax)"


def test_check_reports_the_proof_beside_the_sampled_verdict():
    rules = _rules(TRUE_RULES)
    # (sum_linear, true over the reals, fails on float32 overflow: see the planted hoist above)
    check = check_rewrite(next(r for r in rules.rewrites if r.name == "exp_product"), rules, max_examples=10)
    assert check.status in ("proved", "checked")
    assert f"    all shapes: {PROVED}" in str(check).splitlines()
    assert check.to_dict()["all_shapes"] == {"proved": True, "note": PROVED}


def test_the_cli_prints_the_proof_in_text_and_json(tmp_path, capsys):
    path = tmp_path / "rules.fuse"
    path.write_text(OUTSIDE + TRUE_RULES.split("\n", 1)[1])
    quick = ["--examples", "10", "--budget", "1"]
    assert main(["check", str(path), "--rule", "exp_product", "--rule", "matmul_scale", *quick]) == 0
    out = capsys.readouterr().out
    assert f"all shapes: {PROVED}" in out
    assert "all shapes: not proved: outside the fragment (op matmul)" in out
    assert main(["check", str(path), "--rule", "exp_product", *quick, "--json"]) == 0
    checks = json.loads(capsys.readouterr().out)["reports"][0]["checks"]
    assert [c["all_shapes"] for c in checks] == [{"proved": True, "note": PROVED}]


def _shipped_proofs() -> dict:
    """Every shipped rewrite and decomposition case (once, by where it is written) and
    whether it is proved for all shapes."""
    proofs: dict = {}
    for path in sorted((Path(fusionlang.__file__).parent / "rules").rglob("*.fuse")):
        rules = load_rules(str(path))
        for rule in rules.rewrites:
            if rule.where not in proofs:
                proofs[rule.where] = (rule.name, prove_rewrite_all_shapes(rule, rules.registry).proved)
        for op, cases in rules.decompositions.items():
            for case in cases:
                if not case.from_def and case.where not in proofs:
                    proof = prove_decomposition_all_shapes(case, rules.registry)
                    proofs[case.where] = (f"decompose {op}", proof.proved)
    return proofs


def test_shipped_rules_proved_for_all_shapes():
    """The shipped rules this fragment proves (a count that moves only on purpose): 11 of
    50 rewrites and decomposition cases; the others use conv, matmul, gemm, reshapes, casts,
    compound ops, or (gelu's erf form) a decimal constant for sqrt(2)/2."""
    proofs = _shipped_proofs()
    proved = sorted(name for name, ok in proofs.values() if ok)
    assert proved == ["add_zero", "decompose gelu", "decompose sigmoid", "decompose silu", "div_one", "drop_dropout",
                      "drop_identity", "mul_one", "sub_zero", "transpose_identity", "transpose_pair"]
    assert len(proofs) == 50


def test_a_mean_of_sums_is_not_a_sum_over_both_axis_sets():
    rules = _rules("""\
import "std/ops.fuse"
rewrite mean_of_sums_wrong:
    reduce_mean(reduce_sum(x) {axes=[-1], keepdims=1}) {axes=[-2], keepdims=1}
    => reduce_mean(x) {axes=[-2, -1], keepdims=1}
rewrite sum_of_sums_right:
    reduce_sum(reduce_sum(x) {axes=[-1], keepdims=1}) {axes=[-2], keepdims=1}
    => reduce_sum(x) {axes=[-2, -1], keepdims=1}
""")
    assert not _proof(rules, "mean_of_sums_wrong").proved
    assert _proof(rules, "sum_of_sums_right").proved


def test_a_transpose_read_through_a_broadcast_does_not_cancel():
    # the literal may widen the inner transpose's shape: the transposes do not cancel
    rules = _rules("""\
import "std/ops.fuse"
rewrite through_a_broadcast: transpose(mul(transpose(x) {perm=[1, 0]}, 1)) {perm=[1, 0]} => relu(x) - relu(-x)
""")
    assert "shapes may differ" in _proof(rules, "through_a_broadcast").reason


BOUND_PERMS = """\
import "std/ops.fuse"
rewrite pair: transpose(transpose(x) {perm=p}) {perm=q} => transpose(x) {perm=compose(perm(p, rank(x)), perm(q, rank(x)))}
rewrite pair_in_the_wrong_order:
    transpose(transpose(x) {perm=p}) {perm=q} => transpose(x) {perm=compose(perm(q, rank(x)), perm(p, rank(x)))}
rewrite identity: transpose(x) {perm=p} where perm(p, rank(x)) == range(0, rank(x)) => relu(x) - relu(-x)
rewrite identity_of_another_rank:
    r @ mul(transpose(x) {perm=p}, y) where perm(p, rank(y)) == range(0, rank(y)) and same_shape(r, x) => mul(x, y)
rewrite bound_and_literal: transpose(transpose(x) {perm=p}) {perm=[1, 0]} => transpose(x) {perm=p}
"""


def test_bound_perms_compose_and_the_guard_can_make_one_the_identity():
    rules = _rules(BOUND_PERMS)
    assert _proof(rules, "pair").proved and _proof(rules, "identity").proved
    assert not _proof(rules, "pair_in_the_wrong_order").proved
    # the identity on y's rank says nothing of x's transpose (p = [] reverses x, rank 2 or more)
    assert not _proof(rules, "identity_of_another_rank").proved
    assert not _proof(rules, "bound_and_literal").proved


def test_the_shipped_transpose_rules_are_proved():
    rules = load_rules("simplify")
    for name in ("transpose_pair", "transpose_identity"):
        assert _proof(rules, name).proved, name


def test_an_error_inside_the_prover_is_a_reason_not_a_crash(monkeypatch):
    rules = _rules(TRUE_RULES)

    def broken(*args):
        raise ZeroDivisionError("planted")

    monkeypatch.setattr("fusionlang.testing.shape_proof.same_function", broken)
    proof = _proof(rules, "exp_product")
    assert str(proof) == "not proved: the prover could not model the rule (ZeroDivisionError: planted)"


THROUGH_TRANSPOSES = """\
import "std/ops.fuse"
rewrite relu_through: transpose(relu(x)) {perm=[1, 0]} => relu(transpose(x) {perm=[1, 0]})
rewrite add_through:
    transpose(add(x, y)) {perm=p} where same_shape(x, y) => add(transpose(x) {perm=p}, transpose(y) {perm=p})
rewrite scale_through: transpose(mul(x, c)) {perm=[]} where rank(c) == 0 => mul(transpose(x) {perm=[]}, c)
rewrite add_through_a_broadcast: transpose(add(x, y)) {perm=p} => add(transpose(x) {perm=p}, transpose(y) {perm=p})
rewrite two_perms: transpose(add(x, y)) {perm=[1, 0]} where same_shape(x, y) => add(transpose(x) {perm=[1, 0]}, transpose(y) {perm=[]})
"""


def test_elementwise_ops_move_through_one_transpose_of_one_shape():
    rules = _rules(THROUGH_TRANSPOSES)
    for name in ("relu_through", "add_through", "scale_through"):
        assert _proof(rules, name).proved, name
    # x and y may broadcast to a shape neither has: transposed apart, they need not agree
    assert not _proof(rules, "add_through_a_broadcast").proved
    # [] reverses: the same as [1, 0] only at rank 2
    assert not _proof(rules, "two_perms").proved
