"""Content of the standard rule library: every op classified, category names as the
partitioners expect them, the tables of DESIGN.md and ANCHORS.md."""

from __future__ import annotations

import os

import pytest

from fusionlang.lang import load_rules, rules_dir
from fusionlang.ops import REGISTRY


@pytest.mark.parametrize("name,lattice", [
    ("std/ops", ("elemwise", "broadcast", "injective", "reduce", "complex", "opaque")),
    ("apollo", ("elemwise", "broadcast", "injective", "reduce", "complex", "opaque")),
    ("tvm", ("elemwise", "broadcast", "injective", "comm_reduce", "out_ewise_fusable", "tuple", "opaque")),
    ("dnnfusion", ("one_to_one", "reorganize", "shuffle", "one_to_many", "many_to_many", "opaque")),
])
def test_every_registry_op_is_classified(name, lattice):
    rules = load_rules(name)
    assert rules.categories == lattice
    assert [op for op in REGISTRY.names() if rules.category_of(op) is None] == []


def test_std_ops_classes():
    rules = load_rules("std/ops")
    expect = {"relu": "elemwise", "add": "elemwise", "reshape": "injective", "transpose": "injective",
              "concat": "injective", "gather": "injective", "reduce_sum": "reduce", "max_pool": "reduce",
              "global_average_pool": "reduce", "lrn": "reduce", "conv": "complex", "matmul": "complex",
              "gemm": "complex", "conv_transpose": "complex", "softmax": "opaque", "layer_norm": "opaque",
              "shape": "opaque"}
    assert {op: rules.category_of(op) for op in expect} == expect
    assert all(rules.is_commutative(op) for op in ("add", "mul", "max", "min", "sum", "mean", "equal"))
    assert not rules.is_commutative("sub")
    # ops with no loop form are opaque
    for opdef in REGISTRY:
        if opdef.access is None:
            assert rules.category_of(opdef.name) == "opaque", opdef.name


def pairs(rules, flag=None):
    cats = rules.categories
    return {(p, c): e.result for p in cats for c in cats if (e := rules.fuse_result(p, c, flag=flag)) is not None}


def test_apollo_aggregation_table():
    rules = load_rules("apollo")
    assert pairs(rules) == {
        ("elemwise", "elemwise"): "elemwise", ("broadcast", "elemwise"): "broadcast",
        ("broadcast", "broadcast"): "broadcast", ("elemwise", "broadcast"): "broadcast",
        ("elemwise", "reduce"): "reduce", ("broadcast", "reduce"): "reduce",
        ("elemwise", "injective"): "injective", ("broadcast", "injective"): "injective",
        ("complex", "elemwise"): "complex", ("complex", "broadcast"): "complex",
        ("elemwise", "complex"): "complex", ("broadcast", "complex"): "complex",
        # beyond the paper: data movement folded into a complex op's writes
        ("complex", "injective"): "complex",
    }
    assert pairs(rules, "stitch") == {("reduce", "elemwise"): "reduce", ("reduce", "broadcast"): "reduce",
                                      ("reduce", "reduce"): "reduce"}
    assert ("complex", "complex") not in pairs(rules)
    assert dict(rules.strategies["apollo"].options) == {"max_ops": 64, "max_args": 96, "cost": "h100"}
    horizontal = [e for e in rules.fuse_entries if "horizontal" in e.flags]
    assert len(horizontal) == 1 and horizontal[0].producers == {"elemwise", "broadcast", "reduce"}


def test_tvm_kinds_and_conditions():
    rules = load_rules("tvm")
    expect = {"relu": "elemwise", "add": "broadcast", "expand": "broadcast", "reshape": "injective",
              "pad": "injective", "reduce_sum": "comm_reduce", "conv": "out_ewise_fusable",
              "max_pool": "out_ewise_fusable", "softmax": "out_ewise_fusable", "lrn": "opaque"}
    assert {op: rules.category_of(op) for op in expect} == expect
    phase0 = [e for e in rules.fuse_entries if e.options.get("phase") == 0]
    assert [(set(e.producers), set(e.consumers), dict(e.options)) for e in phase0] == [
        ({"out_ewise_fusable"}, {"elemwise"}, {"phase": 0, "path": "broadcast"})]
    assert rules.fuse_result("broadcast", "comm_reduce").options["path"] == "injective"
    assert rules.fuse_result("injective", "injective").options == {"phase": 1, "path": "injective"}
    assert all(e.producers != {"comm_reduce"} for e in rules.fuse_entries)
    assert dict(rules.strategies["tvm"].options) == {"max_depth": 256}
    # TVM legalizes only the normalizations; softmax stays one op
    assert {"batch_norm", "layer_norm", "instance_norm"} <= set(rules.decompositions)
    assert "softmax" not in rules.decompositions and "gelu" not in rules.decompositions


def test_dnnfusion_table():
    rules = load_rules("dnnfusion")
    table = pairs(rules)
    for other in ("one_to_one", "one_to_many", "reorganize", "shuffle", "many_to_many"):
        assert table[("one_to_one", other)] == other
        assert table[(other, "one_to_one")] == other
    assert ("one_to_many", "many_to_many") not in table and ("many_to_many", "many_to_many") not in table
    for producer in ("reorganize", "shuffle"):
        for consumer in ("one_to_many", "many_to_many"):
            assert "cost" in rules.fuse_result(producer, consumer).flags
    assert rules.category_of("transpose") == "shuffle" and rules.category_of("squeeze") == "reorganize"
    assert rules.category_of("batch_norm") == "one_to_one" and rules.category_of("gather") == "one_to_many"


def test_decompositions_of_decompose_fuse():
    rules = load_rules("decompose")
    for op in ("log_softmax", "softmax", "layer_norm", "gelu", "batch_norm", "batch_norm_train", "sigmoid",
               "silu", "reduce_mean", "variance", "instance_norm", "rms_norm", "attention", "rotary_embedding"):
        assert op in rules.decompositions, op
    assert sorted(dict(c.requires)["approximate"] for c in rules.decompositions["gelu"]) == ["none", "tanh"]


def test_rule_files_ship_with_the_package():
    """Every .fuse file is inside the package's rules dir and covered by package-data."""
    import tomllib

    root = rules_dir()
    with open(os.path.join(os.path.dirname(os.path.dirname(root)), "pyproject.toml"), "rb") as fh:
        patterns = tomllib.load(fh)["tool"]["setuptools"]["package-data"]["fusionlang"]
    import fnmatch

    for folder, _, names in os.walk(root):
        for n in names:
            rel = os.path.relpath(os.path.join(folder, n), os.path.dirname(root)).replace(os.sep, "/")
            if n.endswith(".fuse"):
                assert any(fnmatch.fnmatch(rel, p) for p in patterns), rel
    assert any(fnmatch.fnmatch("lang/fuse.lark", p) for p in patterns)
