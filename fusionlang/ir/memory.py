"""Tensors too large for this machine are refused before anything allocates them.

A model may declare any shape: an input of 100000 x 100000 x 100000 floats, or an
Expand that shape inference carries to one. Allocating it fails with MemoryError, or
worse, succeeds lazily and gets the process killed when it is filled. So what allocates
a graph's tensors (the commands ``run`` and ``fuse --loops``, and ``Specializer`` and the
ONNX backend for each shape and value fed at run time) first checks every tensor of the
graph against :func:`memory_limit`, naming the tensor and its bytes:

    fusionlang: error: input 'x' f32[100000,100000,100000] needs 4000000000000000 bytes (3.55 PiB),
    more than the limit of 23.35 GiB (this machine's memory; FUSIONLANG_MAX_TENSOR_BYTES sets another)

(one line). What no check foresees is still one line: the CLI maps a MemoryError to exit 2.
"""

from __future__ import annotations

import os

from fusionlang.errors import InputError

#: environment variable that sets the limit in bytes (default: the machine's memory)
LIMIT_VARIABLE = "FUSIONLANG_MAX_TENSOR_BYTES"


def memory_limit() -> int:
    """The most bytes one tensor may take: $FUSIONLANG_MAX_TENSOR_BYTES, else the
    machine's physical memory (1 TiB where the system does not say)."""
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if text:
        if not text.isdigit() or len(text) > 30:
            raise InputError(f"{LIMIT_VARIABLE}={text!r}: expected a number of bytes")
        return int(text)
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 2**40


def human_bytes(n: int) -> str:
    """1536 -> '1.50 KiB'."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{value:.2f} {unit}" if unit != "B" else f"{n} B"
        value /= 1024
    raise AssertionError("unreachable")


def check_tensor_sizes(graph, *, random_inputs: bool = False) -> None:
    """InputError when ``graph`` cannot be held in :func:`memory_limit` bytes: naming the
    first tensor (inputs first, then constants and node outputs in order) larger than
    the limit alone, else the total of all its tensors, which a run may hold at once
    (plus, with ``random_inputs``, the float64 noise each input is drawn as)."""
    limit = memory_limit()
    source = (f"set by {LIMIT_VARIABLE}" if os.environ.get(LIMIT_VARIABLE, "").strip()
              else f"this machine's memory; {LIMIT_VARIABLE} sets another")
    producers = {out: node for node in graph.nodes for out in node.outputs}
    values = [*graph.inputs, *graph.constants, *producers]
    for value in values:
        ttype = graph.types[value]
        if ttype.nbytes > limit:
            raise InputError(f"{_describe(value, graph, producers)} {ttype} needs {ttype.nbytes} bytes "
                             f"({human_bytes(ttype.nbytes)}), more than the limit of {human_bytes(limit)} ({source})")
    total = sum(graph.types[v].nbytes for v in values)
    if random_inputs:
        total += sum(graph.types[v].size * 8 for v in graph.inputs)
    if total > limit:
        largest = max(values, key=lambda v: graph.types[v].nbytes)
        raise InputError(f"the tensors of graph {graph.name!r} need {total} bytes ({human_bytes(total)}) together, "
                         f"more than the limit of {human_bytes(limit)} ({source}); the largest is "
                         f"{_describe(largest, graph, producers)} {graph.types[largest]}")


def _describe(value: str, graph, producers) -> str:
    if value in graph.inputs:
        return f"input {value!r}"
    if value in producers:
        node = producers[value]
        return f"tensor {value!r} (output of node {node.name!r}, {node.op})"
    return f"constant {value!r}"
