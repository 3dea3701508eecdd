"""Which stores of the C target stream past the caches (non-temporal stores).

A row-wise kernel (softmax, layer norm) over a large tensor reads its input once and writes
its output once. A plain store first fetches every output line for ownership (a read of the
whole output from memory that nothing uses) and then leaves the lines in the caches, pushing
out data a later kernel wants. A non-temporal store writes the line without fetching it and
without keeping it. That pays only where nothing reads the output soon after: a graph
output nothing in the program reads, larger than the core's L2 (a small output may well be
read from cache by the caller). Softmax 4096 x 1024, one core, kernel alone, in one run:
2.6 ms with its row held in the output and prefetching, 1.86 ms with the row in L1 and the
output streamed in vector chunks (ONNX Runtime: 1.8).

The decision is made once per compile, as a set of value names, and both the in-place pass
(which must then leave the output alone) and the C printer read it.
"""

from __future__ import annotations

from math import prod

from fusionlang.backend.machine import Machine
from fusionlang.ir.graph import Graph

#: dtypes whose stores the C printer can stream (its helper moves float32 vectors)
STREAMED_DTYPES = ("float32",)


def streamed_values(graph: Graph, machine: Machine) -> frozenset[str]:
    """Graph outputs that no node reads, of a streamed dtype, larger than the core's L2."""
    read = {name for node in graph.nodes for name in node.inputs}
    chosen = set()
    for name in graph.outputs:
        t = graph.types[name]
        if name in read or name in graph.inputs or t.dtype not in STREAMED_DTYPES:
            continue
        if prod(t.shape) * 4 > machine.l2:
            chosen.add(name)
    return frozenset(chosen)


__all__ = ["STREAMED_DTYPES", "streamed_values"]
