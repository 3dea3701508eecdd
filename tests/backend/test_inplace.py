"""An output row holding the intermediate it is computed from (backend/inplace.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import layer_norm, softmax

from fusionlang import reference
from fusionlang.backend import compile
from fusionlang.backend.inplace import reuse_outputs
from fusionlang.backend.runtime import lower_group
from fusionlang.engine.plan import single_group_plan
from fusionlang.ops import GraphBuilder


def _rows(kind: str, rows: int = 5, cols: int = 37):
    b = GraphBuilder(kind)
    x = b.input("x", (rows, cols))
    if kind == "layer_norm":
        b.output(layer_norm(b, x, b.constant(np.linspace(0.5, 1.5, cols, dtype=np.float32)),
                            b.constant(np.linspace(-1, 1, cols, dtype=np.float32))))
    elif kind == "softmax":
        b.output(softmax(b, x))
    else:  # softmax whose output is read again inside the group, and a second output
        y = softmax(b, x)
        b.output(y)
        b.output(b.mul(y, b.constant(np.float32(2.0))))
    return b.build()


def _local_buffers(source: str) -> list[str]:
    return re.findall(r"float (b\d+)\[\d+\]", source)


@pytest.mark.parametrize("kind", ["softmax", "layer_norm"])
def test_row_intermediate_lives_in_the_output_row_and_results_match_reference(kind):
    graph = _rows(kind)
    compiled = compile(single_group_plan(graph), "c")
    source = compiled.kernels[0].source
    assert _local_buffers(source) == []
    # the output is written in the pass that computes the intermediate, scaled in place last
    last_pass = source.rsplit("#pragma omp simd", 1)[1]
    stored = re.findall(r"(p\d+\[[^\]]*\]) = ", last_pass)[-1]
    assert last_pass.count(stored) == 2  # read back, then overwritten
    x = np.random.default_rng(1).standard_normal((5, 37)).astype(np.float32) * 4
    got = compiled.run({"x": x})[graph.outputs[0]]
    np.testing.assert_allclose(got, reference.run(graph, {"x": x})[graph.outputs[0]], rtol=2e-6, atol=1e-6)


def _locals_taken_by_outputs(graph) -> set[int]:
    """Ids of the local arrays the pass moved into the group's outputs."""
    plan = single_group_plan(graph)
    lowered = lower_group(plan, plan.groups[0])
    rewritten = reuse_outputs(lowered)
    return {aid for aid in lowered.storage if aid not in rewritten.storage}


def test_an_output_read_inside_its_kernel_is_never_the_one_holding_the_intermediate():
    graph = _rows("softmax_read_again")
    # the softmax output is read by the doubling, so exp may live only in the doubled output
    assert len(_locals_taken_by_outputs(graph)) == 1
    compiled = compile(single_group_plan(graph), "c")
    kernel = compiled.kernels[0]
    doubled = f"p{kernel.params.index(graph.outputs[1])}["
    exp_pass = kernel.source.split("#pragma omp simd")[2]
    assert doubled in exp_pass.split("fl_expf")[0]
    x = np.random.default_rng(2).standard_normal((5, 37)).astype(np.float32)
    got, want = compiled.run({"x": x}), reference.run(graph, {"x": x})
    for name in graph.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-6, atol=1e-6)


def test_a_softmax_output_takes_exactly_its_exp_buffer():
    gone = _locals_taken_by_outputs(_rows("softmax"))
    assert len(gone) == 1


def test_a_group_without_a_row_intermediate_is_left_alone():
    b = GraphBuilder("chain")
    x = b.input("x", (4, 8))
    b.output(b.exp(b.add(x, b.constant(np.float32(1.0)))))
    gone = _locals_taken_by_outputs(b.build())
    assert gone == set()
