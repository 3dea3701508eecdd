"""Grouped convolution with few channels per group (RegNet's and ResNeXt's 3x3 convs, 8 to 16
channels a group) as a direct kernel.

As a GEMM each group is an m x (OH*OW) x (C*KH*KW) product with m the group's output
channels (8 in RegNet): the im2col panel is gathered per group and each packed element then
feeds only m multiply-adds, and the 8-row micro-tile's K is 72, so packing, the tile's loads
and stores and the per-tile epilogue call cost about what the arithmetic does (RegNetY-400MF:
8 to 28 GFLOP/s against 80 to 120 for its dense GEMMs).

Here each group's input channels are copied once into zero-padded phase planes, as the
depthwise template's plane method does (:class:`.depthwise_template.Planes`): every tap then
reads them at a constant shift of the output's flattened index. A register tile holds up to
:data:`MAX_ROWS` output channels times ``unroll`` vectors of that index; each loaded input
vector serves every row of the tile, each weight is a broadcast scalar. The finished rows
are compacted out of the wide layout and go through the GEMM's epilogue one channel at a
time (row ``i`` of the group, outer indices (image, group)).

The problem is the GEMM template's (``template._windowed_problem``): ``problem.a`` the
weights, m rows of C*KH*KW per group; ``problem.b`` the group's input as :class:`Im2Col`;
``problem.c`` the output; outer indices (image, group).
"""

from __future__ import annotations

from dataclasses import dataclass

from fusionlang.backend import gemm_template
from fusionlang.backend.depthwise_template import (Planes, fill_phases, is_depthwise, plane_vector_types, tap_offset,
                                                   view_offset)
from fusionlang.backend.gemm_template import (Epilogue, GemmProblem, Im2Col, Lines, epilogue_args, epilogue_function,
                                              epilogue_params)
from fusionlang.backend.machine import host

#: groups of at most this many input and output channels run here; wider groups fill the
#: GEMM's micro-tile and K well enough
MAX_GROUP_CHANNELS = 16

#: output channels of one register tile, and the tile's accumulator vectors (24 of AVX-512's
#: 32 registers, 12 of AVX2's 16: the rest hold the loaded input vectors)
MAX_ROWS = 8
ACCUMULATORS = {16: 24, 8: 12, 4: 12}


def is_grouped(problem: GemmProblem) -> bool:
    """Whether the problem is a grouped convolution this kernel takes: more than one group,
    at most :data:`MAX_GROUP_CHANNELS` input and output channels a group, not depthwise
    (the depthwise template's), one image per call (not folded)."""
    x = problem.b
    return (isinstance(x, Im2Col) and len(problem.outer) == 2 and problem.outer[1] > 1 and problem.fold is None
            and problem.a.cols == 1
            and x.channels <= MAX_GROUP_CHANNELS and problem.m <= MAX_GROUP_CHANNELS and not is_depthwise(problem))


@dataclass(frozen=True)
class GroupedLayout:
    """The kernel's shape, decided when it is printed: the phase planes (``planes``, one set
    per input channel of the group, ``channel_floats`` apart) and the blocks of output
    channels (first row, rows) each register tile computes."""

    planes: Planes
    channel_floats: int
    blocks: tuple[tuple[int, int], ...]

    def scratch_floats(self, channels: int) -> int:
        """Floats of one thread's scratch: the group's padded planes and the widest block's
        wide output rows."""
        return channels * self.channel_floats + max(rows for _, rows in self.blocks) * self.planes.span


def grouped_layout(problem: GemmProblem, vl: int) -> GroupedLayout:
    x = problem.b
    assert isinstance(x, Im2Col)  # is_grouped
    (kh, kw), (sh, sw), (dh, dw) = x.kernel, x.stride, x.dilation
    height = x.out_h + (kh - 1) * dh // sh
    width = x.out_w + (kw - 1) * dw // sw
    vectors = -(-((x.out_h - 1) * width + x.out_w) // vl)
    rows, unroll = _tile(problem.m, vectors, ACCUMULATORS.get(vl, 12))
    blocks = tuple((first, min(rows, problem.m - first)) for first in range(0, problem.m, rows))
    planes = Planes((sh, sw), height, width, vl, unroll, -(-vectors // unroll))
    return GroupedLayout(planes, planes.buffer_floats(x), blocks)


def _tile(m: int, vectors: int, accumulators: int) -> tuple[int, int]:
    """(rows, unroll) of the register tile over ``m`` output channels and ``vectors`` vectors
    of the wide output: the fewest issue cycles, each tap of each channel costing a chunk
    max(FMAs, loads) = max(rows * unroll, rows + unroll) (two of each a cycle), over the row
    blocks (split evenly) and the chunks, rounded-up chunks included; ties: the larger tile.
    A 7x7 plane (4 vectors) runs 8 rows x 2 vectors in 2 chunks where 8 x 3 computed 6."""
    def cost(tile: tuple[int, int]) -> tuple[int, int]:
        rows, unroll = tile
        return -(-m // rows) * -(-vectors // unroll) * max(rows * unroll, rows + unroll), -rows * unroll

    tiles = [(-(-m // passes), unroll) for passes in range(1, m + 1) for unroll in range(1, 5)]
    return min((t for t in tiles if t[0] <= MAX_ROWS and t[0] * t[1] <= accumulators and t[1] <= vectors), key=cost)


def scratch_bytes(problem: GemmProblem, threads: int = 1, vl: int | None = None) -> int:
    """Bytes the kernel allocates (``threads`` scratch buffers): what a failed allocation reports."""
    assert isinstance(problem.b, Im2Col)
    layout = grouped_layout(problem, vl or host().vector_floats)
    return 4 * threads * layout.scratch_floats(problem.b.channels)


def grouped_kernel(name: str, problem: GemmProblem, epilogue: Epilogue | None = None, *,
                   threads: bool = False, linkage: str = "", vl: int | None = None) -> str:
    """C source of ``int name(const float *W, const float *X, float *Y, <epilogue params>)``:
    returns 1 where its scratch cannot be allocated, else 0. ``vl``: floats per vector
    (default: this machine's)."""
    if not is_grouped(problem):
        raise ValueError("not a grouped convolution with few channels a group")
    x = problem.b
    assert isinstance(x, Im2Col)
    layout = grouped_layout(problem, vl or host().vector_floats)
    planes = layout.planes
    out = Lines()
    out(f"/* grouped conv template: {problem.outer[1]} groups of {x.channels} -> {problem.m} channels, "
        f"{x.in_h}x{x.in_w} -> {x.out_h}x{x.out_w}, kernel {x.kernel[0]}x{x.kernel[1]}, stride {x.stride[0]}x"
        f"{x.stride[1]}, dilation {x.dilation[0]}x{x.dilation[1]}, pads {x.pads[0]},{x.pads[1]}, rows "
        f"{'+'.join(str(rows) for _, rows in layout.blocks)} x {planes.unroll}x{planes.vl} x{planes.chunks} */")
    plane_vector_types(out, planes.vl)
    epilogue_function(out, name, problem, epilogue)
    extra_args = epilogue_args(epilogue)
    out.open(f"{linkage}int {name}(const float *restrict W, const float *restrict X, float *restrict Y"
             f"{epilogue_params(epilogue)})")
    scratch = layout.scratch_floats(x.channels)
    macs = problem.m * problem.n * problem.k * problem.outer[0] * problem.outer[1]
    parallel = threads and macs >= gemm_template.PARALLEL_MIN_MACS  # as the GEMM's: a small one on the calling thread
    out("int failed = 0;")
    if parallel:
        out("#pragma omp parallel")
    out.open("")
    # compiled with -DFL_ALLOC_LIMIT=N a request above N bytes fails, as the GEMM's do (how
    # tests make it fail); the planes' padding is written once per call: each group
    # overwrites only the valid region (the wide rows are all stored before they are read)
    out("#ifdef FL_ALLOC_LIMIT")
    out(f"float *scratch = {4 * scratch}UL > (size_t)(FL_ALLOC_LIMIT) ? 0 : "
        f"(float *)aligned_alloc(64, {4 * scratch}UL);")
    out("#else")
    out(f"float *scratch = (float *)aligned_alloc(64, {4 * scratch}UL);")
    out("#endif")
    out(f"if (scratch) __builtin_memset(scratch, 0, {4 * x.channels * layout.channel_floats}UL);")
    out.open("else")
    if parallel:
        out("#pragma omp atomic write")
    out("failed = 1;")
    out.close()
    out(f"float *wide = scratch ? scratch + {x.channels * layout.channel_floats}L : 0;")
    if parallel:
        out("#pragma omp for collapse(2) schedule(static)")
    out.open(f"for (long o0 = 0; o0 < {problem.outer[0]}; o0++)")
    out.open(f"for (long o1 = 0; o1 < {problem.outer[1]}; o1++)")
    out("if (!scratch) continue;")
    out(f"const float *w = W + {view_offset(problem.a)};")
    out(f"float *y = Y + {view_offset(problem.c)};")
    out.open(f"for (long c = 0; c < {x.channels}; c++)")
    out(f"const float *plane = X + {view_offset(x)} + c * {x.in_h * x.in_w}L;")
    out(f"float *pad = scratch + c * {layout.channel_floats}L;")
    fill_phases(out, x, planes.phases, planes.width, planes.height * planes.width, planes.height)
    out.close()
    for first, rows in layout.blocks:
        _block(out, problem, layout, first, rows)
        _store_rows(out, name, problem, planes, first, rows, epilogue, extra_args)
    out.close()
    out.close()
    out("free(scratch);")
    out.close()
    out("return failed;")
    out.close()
    return out.text()


def _block(out: Lines, problem: GemmProblem, layout: GroupedLayout, first: int, rows: int) -> None:
    # rows first .. first + rows of the group over the flattened wide output, a chunk of
    # `unroll` vectors at a time: every input channel and tap added in registers, each
    # loaded vector into every row
    x, planes = problem.b, layout.planes
    assert isinstance(x, Im2Col)
    vl, vector, loaded = planes.vl, f"fl_dwv{planes.vl}", f"fl_dwvu{planes.vl}"
    (kh, kw), taps = x.kernel, x.kernel[0] * x.kernel[1]
    accs = [[f"a{r}_{u}" for u in range(planes.unroll)] for r in range(rows)]
    out.open(f"for (long t0 = 0; t0 < {planes.span}; t0 += {planes.unroll * vl})")
    out(f"{vector} {', '.join(f'{a} = ({vector}){{0}}' for row in accs for a in row)};")
    out.open(f"for (long c = 0; c < {x.channels}; c++)")
    out(f"const float *pc = scratch + c * {layout.channel_floats}L + t0;")
    out(f"const float *wc = w + {first * problem.a.rows}L + c * {taps}L;")
    for ky in range(kh):
        for kx in range(kw):
            out.open("")
            offset = tap_offset(planes, x, ky, kx)
            out(" ".join(f"const {vector} x{u} = *(const {loaded} *)(pc + {offset + u * vl});"
                         for u in range(planes.unroll)))
            for r, row in enumerate(accs):
                out(f"{{ const float tap = wc[{r * problem.a.rows + ky * kw + kx}]; "
                    + " ".join(f"{a} += tap * x{u};" for u, a in enumerate(row)) + " }")
            out.close()
    out.close()
    for r, row in enumerate(accs):
        for u, a in enumerate(row):
            out(f"*({loaded} *)(wide + {r * planes.span + u * vl}L + t0) = {a};")
    out.close()


def _store_rows(out: Lines, name: str, problem: GemmProblem, planes: Planes, first: int, rows: int,
                epilogue: Epilogue | None, extra_args: str) -> None:
    # each row's valid columns out of the wide layout, then its epilogue over the plane
    x = problem.b
    assert isinstance(x, Im2Col)
    outputs = x.out_h * x.out_w
    out.open(f"for (long r = 0; r < {rows}; r++)")
    out(f"float *yr = y + ({first} + r) * {problem.c.rows}L;")
    out(f"for (long oh = 0; oh < {x.out_h}; oh++) __builtin_memcpy(yr + oh * {x.out_w}L, "
        f"wide + r * {planes.span}L + oh * {planes.width}L, {x.out_w} * sizeof(float));")
    if epilogue is not None:
        out(f"{name}_epilogue(yr, {first} + r, 1, 0, {outputs}, o0, o1{extra_args});")
    out.close()


__all__ = ["ACCUMULATORS", "MAX_GROUP_CHANNELS", "MAX_ROWS", "GroupedLayout", "grouped_kernel", "grouped_layout",
           "is_grouped", "scratch_bytes"]
