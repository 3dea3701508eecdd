"""A transpose that moves the innermost axis, alone in its group, as a tiled direct kernel
on the C target.

As a loop nest, ``out[j, i] = x[i, j]`` walks one of the two arrays a whole row apart at
each step: the bench Llama's 8000 x 256 embedding transposed (2M floats, saved for its
backward) took 9.6 ms, where memory speed is about 1 ms. Here the axes that stay
together are merged first, so the transpose is a batch of 2-D ones, ``[B, R, C] ->
[B, C, R]``, and each 2-D one is copied in square tiles of :data:`TILE` rows and columns:
a tile's rows of ``x`` stay in L1 while its columns are written out as rows of ``out``.
Copies only: the result is the loop nest's, bit for bit.

Which transposes run here: one transpose node alone in a group, of a dtype of 4 or 8
bytes, whose merged form is a 2-D transpose or a batch of them (the innermost axis moves).
A transpose that keeps its innermost axis copies whole rows and stays a loop nest.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from fusionlang.backend.cexpr import C, ctype
from fusionlang.backend.direct import lone_node
from fusionlang.backend.emit_c import CFunction
from fusionlang.backend.poly import Array
from fusionlang.ir.graph import Graph
from fusionlang.ops.checking import op_call

#: rows and columns of a tile: 32 x 32 floats (4 KiB) of the input and of the output in L1
TILE = 32
#: the dtypes the kernel copies (plain C types of 4 or 8 bytes)
COPIED_DTYPES = ("float32", "float64", "int32", "int64")


@dataclass(frozen=True)
class TransposeKernel:
    """One transpose as a batch of 2-D ones: ``x[b, r, c] -> out[b, c, r]``."""

    params: tuple[Array, Array]
    batch: int
    rows: int
    cols: int

    #: what the kernel list and the profile call it (a loop nest says its schedule)
    strategy = "tiled transpose"


def merged_transpose(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shape, perm) with the input axes that stay next to each other, in order, in the
    output merged into one (and axes of extent 1 dropped): the same copy on fewer axes."""
    kept = [axis for axis in range(len(shape)) if shape[axis] != 1]  # renumbered without extent-1 axes
    shape = tuple(shape[axis] for axis in kept)
    runs: list[list[int]] = []
    for axis in (kept.index(axis) for axis in perm if axis in kept):
        if runs and axis == runs[-1][-1] + 1:
            runs[-1].append(axis)
        else:
            runs.append([axis])
    order = sorted(range(len(runs)), key=lambda k: runs[k][0])  # the runs in input order
    merged_shape = tuple(math.prod(shape[axis] for axis in runs[k]) for k in order)
    position = {k: n for n, k in enumerate(order)}
    return merged_shape, tuple(position[k] for k in range(len(runs)))


def plan_transpose(graph: Graph, names: list[str]) -> TransposeKernel | None:
    """The group ``names`` as the tiled transpose, or None: one transpose node alone whose
    merged form is ``(1, 0)`` or ``(0, 2, 1)``."""
    node = lone_node(graph, names, "transpose")
    if node is None:
        return None
    call = op_call(graph, node)
    x, out = call.input(0), call.out_types[0]
    if x.dtype not in COPIED_DTYPES or x.size == 0:
        return None
    perm = call.attrs["perm"] or tuple(reversed(range(x.rank)))
    shape, merged = merged_transpose(x.shape, tuple(perm))
    if merged == (1, 0):
        shape = (1, *shape)
    elif merged != (0, 2, 1):
        return None
    params = (Array(0, x.shape, x.dtype, "input", node.inputs[0]), Array(1, out.shape, out.dtype, "output",
                                                                         node.outputs[0]))
    return TransposeKernel(params, *shape)


def transpose_function(kernel: TransposeKernel, label: str) -> CFunction:
    """The kernel's C function, named by the hash of its text under a stand-in name."""
    name = f"fl_p_{hashlib.sha256(_source(kernel, '@NAME@').encode()).hexdigest()[:16]}"
    comment = (f"/* {label}: transpose of {kernel.batch} x {kernel.rows} x {kernel.cols} as the tiled transpose "
               f"*/\n")
    return CFunction(name, comment + _source(kernel, name), list(kernel.params), 1, vector_code=True)


def _source(kernel: TransposeKernel, name: str) -> str:
    t = ctype(kernel.params[0].dtype, C)
    rows, cols = kernel.rows, kernel.cols
    # per tile: each column of the tile's rows of x written as a row run of out
    return f"""void {name}(const {t} *restrict x, {t} *restrict out) {{
    for (long b = 0; b < {kernel.batch}L; b++) {{
        const {t} *restrict xb = x + b * {rows * cols}L;
        {t} *restrict ob = out + b * {rows * cols}L;
        for (long r0 = 0; r0 < {rows}L; r0 += {TILE}) {{
            const long r1 = r0 + {TILE} < {rows}L ? r0 + {TILE} : {rows}L;
            for (long c0 = 0; c0 < {cols}L; c0 += {TILE}) {{
                const long c1 = c0 + {TILE} < {cols}L ? c0 + {TILE} : {cols}L;
                for (long c = c0; c < c1; c++) {{
                    #pragma omp simd
                    for (long r = r0; r < r1; r++) ob[c * {rows}L + r] = xb[r * {cols}L + c];
                }}
            }}
        }}
    }}
}}
"""


__all__ = ["TILE", "TransposeKernel", "merged_transpose", "plan_transpose", "transpose_function"]
