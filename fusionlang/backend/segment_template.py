"""``segment_sum`` (rows added into the segments their indices name) as a direct kernel on
the C target.

The op's access spec is in pull form: every output element sums the updates of every
row whose index names its segment, (segments x row width) x rows steps. Embedding's
backward is this op on the embedding table (8000 x 256 for 256 tokens in the bench BERT
and Llama): the pull form is 0.5 G steps, and the one-hot matrix product that stood for
it 10 ms. Here the output is zero-filled, then the rows are added in the order of
``indices``, each into its segment (a pass over the updates, as torch and Inductor make
it): memory speed, and deterministic, since one thread adds the rows in order.

An index outside [-n, n) fills the error record (site 0: the node, axis 0) and stops the
kernel, as a checked index in a loop nest does.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from fusionlang.backend.cexpr import C, ctype
from fusionlang.backend.direct import lone_node
from fusionlang.backend.emit_c import CFunction
from fusionlang.backend.failures import INDEX, IndexSite
from fusionlang.backend.poly import Array
from fusionlang.ir.graph import Graph

#: the dtypes of updates the kernel adds (C arithmetic types of their own)
SUMMED_DTYPES = ("float32", "float64", "int32", "int64")


@dataclass(frozen=True)
class SegmentKernel:
    """One segment_sum node: its parameters (updates, indices, output) and sizes."""

    node: str
    params: tuple[Array, Array, Array]
    rows: int
    segments: int
    #: elements per row (the product of the update's trailing axes)
    width: int

    #: what the kernel list and the profile call it (a loop nest says its schedule)
    strategy = "segment-sum kernel"


def plan_segment_sum(graph: Graph, names: list[str]) -> SegmentKernel | None:
    """The group ``names`` as the segment-sum kernel, or None: one segment_sum node alone,
    its updates of a dtype the kernel adds."""
    node = lone_node(graph, names, "segment_sum")
    if node is None:
        return None
    updates, indices, out = (graph.types[v] for v in (*node.inputs[:2], node.outputs[0]))
    if updates.dtype not in SUMMED_DTYPES:
        return None
    params = (Array(0, updates.shape, updates.dtype, "input", node.inputs[0]),
              Array(1, indices.shape, indices.dtype, "input", node.inputs[1]),
              Array(2, out.shape, out.dtype, "output", node.outputs[0]))
    return SegmentKernel(node.name, params, indices.shape[0], out.shape[0], math.prod(out.shape[1:]))


def segment_function(kernel: SegmentKernel, label: str) -> CFunction:
    """The kernel's C function, named by the hash of its text under a stand-in name."""
    name = f"fl_s_{hashlib.sha256(_source(kernel, '@NAME@').encode()).hexdigest()[:16]}"
    comment = f"/* {label}: segment_sum of {kernel.rows} rows into {kernel.segments} as the segment-sum kernel */\n"
    site = IndexSite(kernel.node, "segment_sum", 0, kernel.segments)
    return CFunction(name, comment + _source(kernel, name), list(kernel.params), 1, sites=[site], fallible=True,
                     vector_code=True)


def _source(kernel: SegmentKernel, name: str) -> str:
    value, index = (ctype(a.dtype, C) for a in kernel.params[:2])
    total = kernel.segments * kernel.width
    # the error record: kind, site 0, the bad index (then the driver stops after this call)
    return f"""void {name}(const {value} *restrict updates, const {index} *restrict indices, {value} *restrict out, int64_t *restrict fl_err) {{
    #pragma omp simd
    for (long e = 0; e < {total}L; e++) out[e] = 0;
    for (long r = 0; r < {kernel.rows}L; r++) {{
        const int64_t i = (int64_t)indices[r];
        const int64_t s = i < 0 ? i + {kernel.segments}L : i;
        if ((uint64_t)s >= (uint64_t){kernel.segments}L) {{ fl_err[0] = {INDEX}; fl_err[1] = 0; fl_err[2] = i; return; }}
        {value} *restrict dst = out + s * {kernel.width}L;
        const {value} *restrict src = updates + r * {kernel.width}L;
        #pragma omp simd
        for (long c = 0; c < {kernel.width}L; c++) dst[c] += src[c];
    }}
}}
"""


__all__ = ["SegmentKernel", "plan_segment_sum", "segment_function"]
