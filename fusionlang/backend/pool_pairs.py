"""Pooling windows of 2 or 3 floats a side at stride 2 without padding before (VGG's and
convnet_bn's 2x2 max pools, SqueezeNet's 3x3 ones, DenseNet's 2x2 average pools) as one pass
over the input.

The taps of ``v`` outputs in one input row are every second float: a window's column 0 is
the even lanes of the ``2v`` floats from ``2 * ow`` (two loads), column 1 their odd lanes
and column 2 the odd lanes of the ``2v`` floats from ``2 * ow + 1`` (one permute a tap).
Every read stays inside the window's row (the odd lanes keep the last load short of the
row's end). The taps enter the accumulator row by row, column by column from the tap's
start value, the order of the depthwise template's plane method, so a 2x2 pool's results
equal that method's to the bit (a max's, whatever the order). The outputs go straight into
the output plane, and the epilogue runs once over it (its column ``j`` is the flattened
output position, as in the plane method).

The plane method this replaces first copies the input into four stride-phase planes (a
strided gather of every float), then reads them back and copies its padded-width result
into the output; the row method (wide rows) reads each tap's strided run from the input.
convnet_bn's first pool (batch 8, 32 channels, 64x64 -> 32x32) was 0.30 ms against ONNX
Runtime's 0.18 (one core, AVX-512), 0.19 here.

A max pool's last row and column of windows may end past the input (ceil mode, or
padding after only: inception_v2's 3x3 pools, 112 -> 56 and 56 -> 28): those taps would
be -inf, which never wins, so they are left out; the windows inside a row run as vectors,
the one or two past its end one by one, the last row of windows from the rows there are.
The pool of 64 channels at 112 -> 56 (one core, AVX-512) 0.44 -> 0.31 ms, 192 at 56 -> 28
0.34 -> 0.29 (the plane method before). An average's divisor would count the taps past the
input (count_include_pad) or not: its windows stay inside.

Only where every window starts inside the input (no padding before), rows hold at least
:data:`MIN_VECTOR` windows inside the input and short rows do not cost too many vectors
(:data:`MAX_VECTORS_RATIO`); planes of at most 4x4 outputs run channels in
lanes (:func:`.depthwise_template.lanes_for`), the rest the plane or row method. A row
whose outputs are no whole number of vectors ends with one more vector ending at its end
(overlapping the one before: scalar rests made 55 -> 27 twice as slow as the plane method).
"""

from __future__ import annotations

from fusionlang.backend import gemm_template
from fusionlang.backend.depthwise_template import LANES_MAX_OUTPUTS, MAX_POOL, Tap, plane_vector_types, view_offset
from fusionlang.backend.gemm_template import Epilogue, GemmProblem, Im2Col, Lines, epilogue_args, epilogue_function, \
    epilogue_params

#: the narrowest vector (floats) a row of outputs is computed in
MIN_VECTOR = 4
#: the window sides taken (a column past 2 is the odd lanes of another load)
SIDES = (2, 3)
#: pairs where they compute at most this many times the vectors the plane method computes
#: over its flattened plane (rows of out_w + (kw - 1) // 2): it copies the input into phase
#: planes first, they do not. Isolated pools, one core, AVX-512, pairs / the old method:
#: 3x3 at 55 x 55 outputs 220 against 193 vectors 0.45 (rows method), 27 x 27: 54 / 48 0.67,
#: 13 x 13: 26 / 12 1.28; 2x2 at convnet_bn's 8 x 8: 8 / 4 0.81
MAX_VECTORS_RATIO = 2.0


def pairs_fit(problem: GemmProblem, vl: int, tap: Tap | None = None) -> bool:
    """Whether a pooling problem is windows of :data:`SIDES` at stride 2, no dilation, no
    padding before, every window inside the input (a max pool's last row and column of
    windows may end past it: ceil mode, or padding after), at least :data:`MIN_VECTOR`
    windows inside a row, planes the lanes method does not take (more than 4x4 outputs) and
    vectors a plane at most :data:`MAX_VECTORS_RATIO` times the plane method's."""
    x = problem.b
    if not isinstance(x, Im2Col):
        return False
    (kh, kw) = x.kernel
    inside_h, inside_w = _inside(x)
    past = x.out_h > inside_h or x.out_w > inside_w
    return kh in SIDES and kw in SIDES and x.stride == (2, 2) and x.dilation == (1, 1) and x.pads == (0, 0) \
        and (not past or tap is MAX_POOL) and 2 * (x.out_h - 1) < x.in_h and 2 * (x.out_w - 1) < x.in_w \
        and inside_h >= 1 and inside_w >= MIN_VECTOR and x.out_h * x.out_w > LANES_MAX_OUTPUTS \
        and vl >= MIN_VECTOR and _vectors(x, vl) <= MAX_VECTORS_RATIO * _plane_vectors(x, vl)


def _inside(x: Im2Col) -> tuple[int, int]:
    """Rows and columns of windows that lie wholly inside the input (the first ones)."""
    return (x.in_h - x.kernel[0]) // 2 + 1, (x.in_w - x.kernel[1]) // 2 + 1


def _vectors(x: Im2Col, vl: int) -> int:
    """Vectors a channel's plane takes here: whole vectors a row."""
    return x.out_h * -(-x.out_w // vector_floats(x.out_w, vl))


def _plane_vectors(x: Im2Col, vl: int) -> int:
    """Vectors the plane method takes over the channel's flattened rows of phase width."""
    return -(-x.out_h * (x.out_w + (x.kernel[1] - 1) // 2) // vl)


def vector_floats(out_w: int, vl: int) -> int:
    """The vector a row is computed in: the machine's, halved while wider than the row."""
    v = vl
    while v > out_w and v > MIN_VECTOR:
        v //= 2
    return v


def pairs_kernel(name: str, problem: GemmProblem, tap: Tap, epilogue: Epilogue | None, vl: int, *,
                 threads: bool = False, linkage: str = "") -> str:
    """C source of ``int name(const float *X, float *Y, <epilogue params>)`` (returns 0) for a
    problem :func:`pairs_fit` takes; ``tap`` is the pool's (max or sum)."""
    x = problem.b
    assert isinstance(x, Im2Col) and pairs_fit(problem, vl, tap), "a stride-2 pool without padding"
    kh, kw = x.kernel
    inside_h, inside_w = _inside(x)
    v = vector_floats(inside_w, vl)
    out = Lines()
    out(f"/* pooling template: {problem.outer[1]} channels, {x.in_h}x{x.in_w} -> {x.out_h}x{x.out_w}, "
        f"kernel {kh}x{kw}, stride 2x2, pairs of {v}-float vectors */")
    plane_vector_types(out, v)
    epilogue_function(out, name, problem, epilogue)
    out.open(f"{linkage}int {name}(const float *restrict X, float *restrict Y{epilogue_params(epilogue)})")
    taps = problem.outer[0] * problem.outer[1] * x.out_h * x.out_w * kh * kw
    if threads and taps >= gemm_template.PARALLEL_MIN_MACS:  # a small one on the calling thread: see there
        out("#pragma omp parallel for collapse(2) schedule(static)")
    out.open(f"for (long o0 = 0; o0 < {problem.outer[0]}; o0++)")
    out.open(f"for (long o1 = 0; o1 < {problem.outer[1]}; o1++)")
    out(f"const float *plane = X + {view_offset(x)};")
    out(f"float *y = Y + {view_offset(problem.c)};")
    out.open(f"for (long oh = 0; oh < {inside_h}; oh++)")
    _row_outputs(out, tap, x, v, kh)
    out.close()
    for oh in range(inside_h, x.out_h):  # windows ending past the last row: the rows left
        out.open("")
        out(f"const long oh = {oh};")
        _row_outputs(out, tap, x, v, x.in_h - 2 * oh)
        out.close()
    if epilogue is not None:
        out(f"{name}_epilogue(y, 0, 1, 0, {x.out_h * x.out_w}, o0, o1{epilogue_args(epilogue)});")
    out.close()
    out.close()
    out("return 0;")
    out.close()
    return out.text()


def _row_outputs(out: Lines, tap: Tap, x: Im2Col, v: int, kh: int) -> None:
    # output row oh from ``kh`` input rows: the windows inside the row in vectors, those
    # ending past it (ceil mode) one by one over the columns left
    kw, inside_w = x.kernel[1], _inside(x)[1]
    rows = "".join(f", *r{ky} = r0 + {ky * x.in_w}L" for ky in range(1, kh))  # the window's rows
    out(f"const float *r0 = plane + oh * {2 * x.in_w}L{rows};")
    out(f"float *yr = y + oh * {x.out_w}L;")
    whole = inside_w // v * v
    out.open(f"for (long ow = 0; ow < {whole}; ow += {v})")
    _vector_outputs(out, tap, v, kh, kw)
    out.close()
    if whole < inside_w:  # the rest: one more vector, ending at the last window inside
        out.open("")
        out(f"const long ow = {inside_w - v};")
        _vector_outputs(out, tap, v, kh, kw)
        out.close()
    for ow in range(inside_w, x.out_w):
        out.open("")
        out(f"float acc = {tap.init};")
        for ky in range(kh):
            for kx in range(x.in_w - 2 * ow):
                out(tap.update.format(acc="acc", src=f"r{ky}[{2 * ow + kx}]"))
        out(f"yr[{ow}] = acc;")
        out.close()


def _vector_outputs(out: Lines, tap: Tap, v: int, kh: int, kw: int) -> None:
    # outputs ow .. ow + v - 1 of row oh
    vector, mask = f"fl_dwv{v}", f"fl_dwm{v}"
    out(f"{vector} acc = ({vector}){{0}} + {tap.init};")
    for ky in range(kh):
        loaded = set()
        for kx in range(kw):
            offset, first = _lanes_of(kx)
            pair = f"{ky}_{offset}"
            if offset not in loaded:
                loaded.add(offset)
                row = f"r{ky} + 2 * ow + {offset}"
                out(f"const {vector} lo{pair} = *(const fl_dwvu{v} *)({row}), hi{pair} = *(const fl_dwvu{v} *)({row} + {v});")
            lanes = ", ".join(str(2 * u + first) for u in range(v))
            out("#if defined(__clang__)")
            out(f"const {vector} t{ky}_{kx} = __builtin_shufflevector(lo{pair}, hi{pair}, {lanes});")
            out("#else")
            out(f"const {vector} t{ky}_{kx} = __builtin_shuffle(lo{pair}, hi{pair}, ({mask}){{{lanes}}});")
            out("#endif")
            out(tap.vector_update.format(acc="acc", src=f"t{ky}_{kx}", mask=mask, vector=vector))
    out(f"*(fl_dwvu{v} *)(yr + ow) = acc;")


def _lanes_of(kx: int) -> tuple[int, int]:
    """(where the 2v floats start past 2 * ow, their first lane) holding window column ``kx``
    of v outputs: column 0 the even lanes from 0, any other the odd lanes from kx - 1 (its
    last float is the window's, never past the row)."""
    return (0, 0) if kx == 0 else (kx - 1, 1)


__all__ = ["MIN_VECTOR", "pairs_fit", "pairs_kernel", "vector_floats"]
