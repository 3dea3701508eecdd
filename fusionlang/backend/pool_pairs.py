"""Pooling windows of 2 or 3 floats a side at stride 2 without padding (VGG's and
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

Only where every window lies inside the input (floor mode, no padding), the output rows
are at least :data:`MIN_VECTOR` floats wide and short rows do not cost too many vectors
(:data:`MAX_VECTORS_RATIO`); planes of at most 4x4 outputs run channels in
lanes (:func:`.depthwise_template.lanes_for`), the rest the plane or row method. A row
whose outputs are no whole number of vectors ends with one more vector ending at its end
(overlapping the one before: scalar rests made 55 -> 27 twice as slow as the plane method).
"""

from __future__ import annotations

from fusionlang.backend import gemm_template
from fusionlang.backend.depthwise_template import LANES_MAX_OUTPUTS, Tap, plane_vector_types, view_offset
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


def pairs_fit(problem: GemmProblem, vl: int) -> bool:
    """Whether a pooling problem is windows of :data:`SIDES` at stride 2, no dilation, every
    window inside the input, output rows at least :data:`MIN_VECTOR` wide, planes the lanes
    method does not take (more than 4x4 outputs) and vectors a plane at most
    :data:`MAX_VECTORS_RATIO` times the plane method's."""
    x = problem.b
    if not isinstance(x, Im2Col):
        return False
    (kh, kw) = x.kernel
    return kh in SIDES and kw in SIDES and x.stride == (2, 2) and x.dilation == (1, 1) and x.pads == (0, 0) \
        and 2 * (x.out_h - 1) + kh <= x.in_h and 2 * (x.out_w - 1) + kw <= x.in_w \
        and x.out_w >= MIN_VECTOR and x.out_h * x.out_w > LANES_MAX_OUTPUTS and vl >= MIN_VECTOR \
        and _vectors(x, vl) <= MAX_VECTORS_RATIO * _plane_vectors(x, vl)


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
    assert isinstance(x, Im2Col) and pairs_fit(problem, vl), "a stride-2 pool without padding"
    kh, kw = x.kernel
    v = vector_floats(x.out_w, vl)
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
    out.open(f"for (long oh = 0; oh < {x.out_h}; oh++)")
    rows = "".join(f", *r{ky} = r0 + {ky * x.in_w}L" for ky in range(1, kh))  # the window's rows
    out(f"const float *r0 = plane + oh * {2 * x.in_w}L{rows};")
    out(f"float *yr = y + oh * {x.out_w}L;")
    whole = x.out_w // v * v
    out.open(f"for (long ow = 0; ow < {whole}; ow += {v})")
    _vector_outputs(out, tap, v, kh, kw)
    out.close()
    if whole < x.out_w:  # the rest: one more vector, ending at the row's end
        out.open("")
        out(f"const long ow = {x.out_w - v};")
        _vector_outputs(out, tap, v, kh, kw)
        out.close()
    out.close()
    if epilogue is not None:
        out(f"{name}_epilogue(y, 0, 1, 0, {x.out_h * x.out_w}, o0, o1{epilogue_args(epilogue)});")
    out.close()
    out.close()
    out("return 0;")
    out.close()
    return out.text()


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
