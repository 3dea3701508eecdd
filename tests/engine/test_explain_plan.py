"""explain(): the class rule that applied, the group's rules, and each refusal's reason."""

import json

import numpy as np
import pytest

import fusionlang
from fusionlang.engine.explain import explain
from fusionlang.errors import FuseError


@pytest.fixture(scope="module")
def rules():
    return fusionlang.load_rules("apollo")


def conv_then_pool():
    b = fusionlang.GraphBuilder("near_miss")
    x = b.input("x", (1, 3, 8, 8))
    w = b.constant(np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32))
    c = b.conv(x, w, pads=(1, 1, 1, 1), name="c")
    scaled = b.div(c, b.constant(np.full((1, 4, 1, 1), 3, np.float32)), name="d")
    p = b.max_pool(b.relu(scaled, name="r"), kernel_shape=(2, 2), strides=(2, 2), name="p")
    b.output(p)
    return b.build()


def test_names_the_guarded_class_that_applied(rules):
    plan = fusionlang.fuse(conv_then_pool(), rules, feedback=False)
    first = explain(plan, rules, "d").lines()[0]
    assert first.startswith("node d (div) is broadcast by std/ops.fuse:")
    assert first.endswith("class div : broadcast when broadcasting")


def test_refusal_names_the_missing_table_entry(rules):
    plan = fusionlang.fuse(conv_then_pool(), rules, feedback=False)
    text = str(explain(plan, rules, "r"))
    assert "formed by apollo.fuse:" in text and "fuse complex -> broadcast|elemwise : complex" in text
    assert "-> p (max_pool, group 1): no fuse entry for complex -> reduce in rules 'apollo'" in text


def test_unknown_node_is_a_clear_error(rules):
    plan = fusionlang.fuse(conv_then_pool(), rules, feedback=False)
    with pytest.raises(FuseError, match=r"no node named 'nope' in the model or its rewritten graph"):
        explain(plan, rules, "nope")


def test_plan_json_keeps_the_group_list(rules):
    plan = fusionlang.fuse(conv_then_pool(), rules, feedback=False)
    data = json.loads(plan.to_json())
    assert isinstance(data["groups"], list) and len(data["groups"]) == len(plan.groups)
    assert {"kernels_before", "kernels_after", "bytes_before", "bytes_after", "compile_seconds"} <= set(data)
