"""rules/xla.fuse next to apollo.fuse on onnx's light models.

xla.fuse only takes fusion away from apollo (no stitching after a reduction, no
prologue into gemm/conv, no horizontal packing), so on every model it launches at least
as many kernels as apollo, never keeps a reduction's result on chip, and never groups a
reduction with its consumer or an operand's producer with a complex op.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import onnx
import pytest

import fusionlang

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
#: the quickest light models to fuse (a few seconds for both policies together), then
#: heavier ones in the suite's slow pattern
FAST_MODELS = ["bvlc_alexnet", "zfnet512", "squeezenet"]
MODELS = FAST_MODELS + [pytest.param(name, marks=pytest.mark.slow) for name in ("resnet50", "vgg19")]


def _inside_group_edges(plan, ruleset):
    """(producer category, consumer category) of node edges inside a group."""
    owner = plan.group_of()
    graph = plan.graph
    producer = {out: n for n in graph.nodes for out in n.outputs}
    category = {n.name: ruleset.category_of_node(graph, n) for n in graph.nodes}
    return {(category[producer[v].name], category[n.name]) for n in graph.nodes for v in n.present_inputs()
            if v in producer and owner[producer[v].name] == owner[n.name]}


@lru_cache(maxsize=None)
def plans(name: str):
    """(apollo's plan, xla's plan) of a light model."""
    graph = fusionlang.from_onnx(LIGHT_DIR / f"light_{name}.onnx")
    return fusionlang.fuse(graph, "apollo"), fusionlang.fuse(graph, fusionlang.load_rules("xla"))


@pytest.mark.parametrize("name", MODELS)
def test_xla_launches_at_least_apollos_kernels_and_never_stitches(name):
    apollo, xla = plans(name)
    assert xla.launches >= apollo.launches, f"{name}: xla {xla.launches} kernels, apollo {apollo.launches}"
    assert not xla.stitches and not xla.horizontal


@pytest.mark.parametrize("name", MODELS)
def test_xla_groups_hold_no_denied_edge(name):
    edges = _inside_group_edges(plans(name)[1], fusionlang.load_rules("xla"))
    assert not {(p, c) for p, c in edges if p == "reduce" and c in ("elemwise", "broadcast", "reduce")}
    assert not {(p, c) for p, c in edges if p in ("elemwise", "broadcast") and c == "complex"}


def test_the_policy_makes_a_difference_where_apollo_stitches():
    # wherever apollo keeps a reduction's result on chip, xla needs a kernel more
    stitching = [name for name in FAST_MODELS if plans(name)[0].stitches]
    assert stitching
    assert all(plans(name)[1].launches > plans(name)[0].launches for name in stitching)


def test_xla_extends_apollo_in_under_15_lines():
    from fusionlang.lang.loader import resolve

    lines = Path(resolve("xla")).read_text().splitlines()
    assert len(lines) < 15 and 'import "apollo.fuse"' in lines
