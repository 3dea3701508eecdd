"""Local response normalization (ONNX LRN) as a direct kernel on the C target.

LRN sums the squares of ``size`` neighbouring channels at each position, then scales the
centre value by that sum: ``y = x / (bias + alpha/size * sum) ** beta``. As a loop nest it
is one kernel per shape: isl schedules it (12 to 14 ms each in zfnet512's compile) and gcc
compiles it at -O3 (about 0.04 s each), and its vector loops run along one row of a plane.

Here one routine per library serves every LRN with the same formula (the attributes are
printed into it, the sizes are arguments), compiled with the templates at -O2: its loops
are ``omp simd`` loops, which -O2 vectorizes too. Per channel it walks the plane in tiles
of :data:`TILE` floats, so each tile's sum stays in L1 while the window's channels are
added into it, then finalizes the tile in place. The sum adds the window's channels in
the loop nest's order (lowest first, from 0) and the formula is printed by the same
printer, so the result is the loop nest's: bit for bit where the formula is square roots
and divisions (beta 0.75 or 1, as in the ONNX model zoo), within 2 ulp where it calls
``powf`` (libmvec's vector powf and the scalar one may round the last place apart, and
the two kernels vectorize different elements).

Which LRNs run here: one float32 lrn node alone in a loop-nest part on the C target (the
part before or after a pooling template, or a group of its own).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from fusionlang.backend.cexpr import C, ValuePrinter
from fusionlang.backend.direct import lone_node
from fusionlang.backend.emit_c import CFunction
from fusionlang.backend.poly import Array, PolyStmt, build_program
from fusionlang.ir.graph import Graph
from fusionlang.ops.access import ACC
from fusionlang.ops.checking import op_call

#: floats of a plane summed at a time: 1 KiB, so a tile's sum and the row being added stay
#: in L1 (96 channels of 109x109 in one C microbenchmark: 0.95 ms at 256 floats, 1.06 ms at
#: 512, 1.29 ms at 2048 and 1.4 ms untiled, against 1.10 ms for the loop nest)
TILE = 256


@dataclass(frozen=True)
class LrnKernel:
    """One float32 LRN as a call of the shared routine: its parameters (input, output),
    sizes, window and the printed formula."""

    params: tuple[Array, Array]
    images: int
    channels: int
    plane: int
    before: int
    after: int
    #: C expressions: the square of ``x[s]`` (the update), and the output from ``x[s]`` and
    #: ``acc[s]`` (the finalize)
    square: str
    finalize: str

    #: what the kernel list and the profile call it (a loop nest says its schedule)
    strategy = "lrn template"


def plan_lrn(graph: Graph, names: list[str], constants: dict) -> LrnKernel | None:
    """``names`` as the LRN kernel, or None: it must be one lrn node with a float32 input
    and output, built as the usual init, sum update and finalize statements."""
    node = lone_node(graph, names, "lrn")
    if node is None:
        return None
    call = op_call(graph, node)
    x, y = call.input(0), call.out_types[0]
    if x.dtype != "float32" or y.dtype != "float32" or x.rank < 2 or x.shape != y.shape or x.size == 0:
        return None
    prog = build_program(graph, names, constants=constants)
    kinds = {s.kind: s for s in prog.stmts}
    if sorted(kinds) != ["final", "init", "update"] or len(prog.stmts) != 3:
        return None
    update, final = kinds["update"], kinds["final"]
    if update.reduce != "sum" or any(s.compute_dtype != "float32" for s in prog.stmts) \
            or update.acc is None or update.acc.dtype != "float32":
        return None
    inputs = [a for a in prog.arrays if a.role == "input"]
    outputs = [a for a in prog.arrays if a.role == "output"]
    if len(inputs) != 1 or len(outputs) != 1:
        return None
    if ACC in update.expr.free_symbols:
        return None  # the update is printed as acc[s] += its value
    square, finalize = _printed(update, "x[s]"), _printed(final, "x[s]")
    if square is None or finalize is None:
        return None
    size = call.attrs["size"]
    return LrnKernel((inputs[0], outputs[0]), x.shape[0], x.shape[1], math.prod(x.shape[2:]), (size - 1) // 2,
                     size // 2, square, finalize)


def _printed(stmt: PolyStmt, element: str) -> str | None:
    """The statement's value as C, its input read as ``element`` and its accumulator as
    ``acc[s]``; None when it reads anything else."""
    names = {}
    for r in stmt.reads:
        if r.array is None:
            continue
        if r.array.role not in ("acc", "input"):
            return None
        names[r.vsym] = "acc[s]" if r.array.role == "acc" else element
    printer = ValuePrinter("float32", C, lambda sym: names.get(sym, sym.name))
    return printer.doprint(stmt.expr)


def lrn_function(kernel: LrnKernel, label: str, *, openmp: bool = False) -> CFunction:
    """The kernel's C function: a call of the shared routine (in ``helpers``, by name).
    Each is named by the hash of its text printed under a stand-in name."""
    shared = f"fl_lrn_{_hash(_routine(kernel, openmp, '@NAME@'))}"
    call = (f"{shared}(p0, p1, {kernel.images}L, {kernel.channels}L, {kernel.plane}L, {kernel.before}L, "
            f"{kernel.after}L);")

    def text(name: str) -> str:
        return (f"__attribute__((visibility(\"hidden\"))) void {shared}(const float *restrict x, float *restrict y, "
                f"long images, long channels, long plane, long before, long after);\n"
                f"void {name}(const float *restrict p0, float *restrict p1) {{\n    {call}\n}}\n")

    name = f"fl_l_{_hash(text('@NAME@'))}"
    comment = f"/* {label}: lrn as the LRN template */\n"
    return CFunction(name, comment + text(name), list(kernel.params), 1, vector_code=True,
                     helpers={shared: _routine(kernel, openmp, shared)})


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _routine(kernel: LrnKernel, openmp: bool, name: str) -> str:
    # per image and channel (the threads' unit with OpenMP), per tile of the plane: the
    # window's squares summed into the output, then the formula in place
    threads = "    #pragma omp parallel for collapse(2) schedule(static)\n" if openmp else ""
    return f"""__attribute__((visibility("hidden"))) void {name}(const float *restrict x_all, float *restrict y_all, long images, long channels, long plane, long before, long after) {{
{threads}    for (long n = 0; n < images; n++) {{
        for (long c = 0; c < channels; c++) {{
            const long lo = c - before < 0 ? 0 : c - before, hi = c + after < channels ? c + after : channels - 1;
            const float *image = x_all + n * channels * plane;
            for (long s0 = 0; s0 < plane; s0 += {TILE}) {{
                const long len = plane - s0 < {TILE} ? plane - s0 : {TILE};
                float *restrict acc = y_all + (n * channels + c) * plane + s0;
                #pragma omp simd
                for (long s = 0; s < len; s++) acc[s] = 0.0f;
                for (long w = lo; w <= hi; w++) {{
                    const float *restrict x = image + w * plane + s0;
                    #pragma omp simd
                    for (long s = 0; s < len; s++) acc[s] += {kernel.square};
                }}
                const float *restrict x = image + c * plane + s0;
                #pragma omp simd
                for (long s = 0; s < len; s++) acc[s] = {kernel.finalize};
            }}
        }}
    }}
}}
"""


__all__ = ["TILE", "LrnKernel", "lrn_function", "plan_lrn"]
