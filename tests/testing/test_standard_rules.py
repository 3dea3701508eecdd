"""Every rule in rules/ passes the rule checker (but the known defects, each with a
strict-xfail test naming it), and the scalar ones are reported as proved."""

from __future__ import annotations

import pytest
from hypothesis import settings

import fusionlang
from fusionlang.lang import load_rules
from fusionlang.testing import check_rules
from fusionlang.testing.checker import check_decomposition, check_fuse_entry
from known_defects import RULES as KNOWN

EXAMPLES = settings.default.max_examples
POLICIES = ("apollo", "tvm", "dnnfusion")


@pytest.fixture(scope="module")
def reports():
    """One report per policy; a rule the policies share (simplify.fuse, std/) is checked
    by the first policy that imports it."""
    seen = set()

    def first_time(kind, name, where):
        if (kind, name, where) in seen:
            return False
        seen.add((kind, name, where))
        return True

    return {name: check_rules(load_rules(name), max_examples=EXAMPLES, select=first_time) for name in POLICIES}


@pytest.mark.parametrize("policy", POLICIES)
def test_every_standard_rule_holds(reports, policy):
    report = reports[policy]
    failures = [c for c in report.failures if c.key not in KNOWN]
    assert not failures, "\n".join(str(c) for c in failures)
    assert report.checks


def test_every_file_of_the_standard_library_is_checked(reports):
    files = {c.where.split(":")[0] for r in reports.values() for c in r.checks}
    assert {"apollo.fuse", "tvm.fuse", "dnnfusion.fuse", "simplify.fuse", "decompose.fuse", "std/normalize.fuse",
            "std/compound.fuse", "std/batch_norm.fuse", "std/ops.fuse", "std/attention.fuse"} <= files


def test_scalar_rules_are_proved(reports):
    proved = {(c.kind, c.name) for r in reports.values() for c in r.checks if c.status == "proved"}
    for name in ("add_zero", "mul_one", "sub_zero", "div_one", "drop_identity", "drop_dropout"):
        assert ("rewrite", name) in proved
    for name in ("gelu{approximate='none'}", "gelu{approximate='tanh'}", "sigmoid", "silu"):
        assert ("decompose", name) in proved
    fuse_entries = [c for r in reports.values() for c in r.checks if c.kind == "fuse"]
    assert fuse_entries and all(c.status == "proved" for c in fuse_entries if c.key not in KNOWN)


def test_every_rewrite_and_decomposition_is_exercised(reports):
    # checked on instances (not skipped for want of one), except compound defs, whose
    # reference is their own body
    for report in reports.values():
        for check in report.checks:
            if check.kind in ("rewrite", "decompose", "def") and check.status != "failed":
                assert check.status != "skipped" or "defines the op" in check.detail, str(check)
                assert check.status == "skipped" or check.instances >= min(EXAMPLES, 10), str(check)


def test_the_public_entry_point():
    report = fusionlang.check_rules("simplify", max_examples=5, kinds=("rewrite",))
    assert report.ok and len(report.checks) == len(load_rules("simplify").rewrites)


# ----- known defects (strict xfail: they pass once the rule files are fixed) -------------------


def test_tvm_lrn_decomposition_opens_every_rank():
    # found by the checker: the window was [size, 1, 1] whatever the input's rank
    rules = load_rules("tvm")
    (case,) = rules.decompositions["lrn"]
    check = check_decomposition(case, rules, max_examples=EXAMPLES)
    assert check.status != "failed", str(check)


def test_dnnfusion_fuse_table_is_monotone():
    # found by the checker: one_to_many ranked below reorganize and shuffle, which the table
    # fuses into one_to_many
    rules = load_rules("dnnfusion")
    bad = [str(check_fuse_entry(e, rules)) for e in rules.fuse_entries if check_fuse_entry(e, rules).status != "proved"]
    assert not bad, "\n".join(bad)


def test_known_rule_defects_are_still_reported(reports):
    # every entry of known_defects.RULES is a real finding of the checker (remove the
    # entry when its rule is fixed)
    failed = {c.key for r in reports.values() for c in r.failures}
    assert set(KNOWN) <= failed
