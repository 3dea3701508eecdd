"""2x2 pooling at stride 2 without padding (VGG's and convnet_bn's max pools, DenseNet's
average pools) as one pass over the input.

Each window is two floats of two input rows. A vector of ``v`` outputs reads ``2v`` floats of
each of the two rows (two loads a row); the even and the odd floats of a row are its
window's two columns (one permute each), and the four taps enter the accumulator in the
order the depthwise template's plane method takes them ((0,0), (0,1), (1,0), (1,1), from the
tap's start value), so the results are the same to the bit. The outputs go straight into
the output plane, and the epilogue runs once over it (its column ``j`` is the flattened
output position, as in the plane method).

The plane method this replaces first copies the input into four stride-phase planes (a
strided gather of every float), then reads them back and copies its padded-width result
into the output: convnet_bn's first pool (batch 8, 32 channels, 64x64 -> 32x32) was 0.30 ms
against ONNX Runtime's 0.18 (one core, AVX-512).

Only where every window lies inside the input (floor mode: ``2 * out <= in``) and the
output rows are at least :data:`MIN_VECTOR` floats wide; narrower planes of at most 4x4
outputs run channels in lanes (:func:`.depthwise_template.lanes_for`), the rest the plane
method. The last ``out_w % v`` outputs of a row are scalar.
"""

from __future__ import annotations

from fusionlang.backend import gemm_template
from fusionlang.backend.depthwise_template import LANES_MAX_OUTPUTS, Tap, plane_vector_types, view_offset
from fusionlang.backend.gemm_template import Epilogue, GemmProblem, Im2Col, Lines, epilogue_args, epilogue_function, \
    epilogue_params

#: the narrowest vector (floats) a row of outputs is computed in
MIN_VECTOR = 4


def pairs_fit(problem: GemmProblem, vl: int) -> bool:
    """Whether a pooling problem is 2x2 windows at stride 2, no dilation, every window inside
    the input, output rows at least :data:`MIN_VECTOR` wide and planes the lanes method does
    not take (more than 4x4 outputs)."""
    x = problem.b
    return isinstance(x, Im2Col) and x.kernel == (2, 2) and x.stride == (2, 2) and x.dilation == (1, 1) \
        and x.pads == (0, 0) and 2 * x.out_h <= x.in_h and 2 * x.out_w <= x.in_w \
        and x.out_w >= MIN_VECTOR and x.out_h * x.out_w > LANES_MAX_OUTPUTS and vl >= MIN_VECTOR


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
    assert isinstance(x, Im2Col) and pairs_fit(problem, vl), "a 2x2 stride-2 pool without padding"
    v = vector_floats(x.out_w, vl)
    out = Lines()
    out(f"/* pooling template: {problem.outer[1]} channels, {x.in_h}x{x.in_w} -> {x.out_h}x{x.out_w}, "
        f"kernel 2x2, stride 2x2, pairs of {v}-float vectors */")
    plane_vector_types(out, v)
    epilogue_function(out, name, problem, epilogue)
    out.open(f"{linkage}int {name}(const float *restrict X, float *restrict Y{epilogue_params(epilogue)})")
    taps = problem.outer[0] * problem.outer[1] * x.out_h * x.out_w * 4
    if threads and taps >= gemm_template.PARALLEL_MIN_MACS:  # a small one on the calling thread: see there
        out("#pragma omp parallel for collapse(2) schedule(static)")
    out.open(f"for (long o0 = 0; o0 < {problem.outer[0]}; o0++)")
    out.open(f"for (long o1 = 0; o1 < {problem.outer[1]}; o1++)")
    out(f"const float *plane = X + {view_offset(x)};")
    out(f"float *y = Y + {view_offset(problem.c)};")
    out.open(f"for (long oh = 0; oh < {x.out_h}; oh++)")
    out(f"const float *r0 = plane + oh * {2 * x.in_w}L, *r1 = r0 + {x.in_w}L;")
    out(f"float *yr = y + oh * {x.out_w}L;")
    whole = x.out_w // v * v
    _vector_outputs(out, tap, v, whole)
    if whole < x.out_w:
        _scalar_outputs(out, tap, whole, x.out_w)
    out.close()
    if epilogue is not None:
        out(f"{name}_epilogue(y, 0, 1, 0, {x.out_h * x.out_w}, o0, o1{epilogue_args(epilogue)});")
    out.close()
    out.close()
    out("return 0;")
    out.close()
    return out.text()


def _vector_outputs(out: Lines, tap: Tap, v: int, whole: int) -> None:
    # outputs [0, whole) of row oh, v at a time: each row's 2v floats split into evens and odds
    vector, mask = f"fl_dwv{v}", f"fl_dwm{v}"
    evens, odds = (", ".join(str(2 * u + first) for u in range(v)) for first in (0, 1))
    out.open(f"for (long ow = 0; ow < {whole}; ow += {v})")
    out(f"{vector} acc = ({vector}){{0}} + {tap.init};")
    for row in ("r0", "r1"):
        out(f"const {vector} {row}lo = *(const fl_dwvu{v} *)({row} + 2 * ow), "
            f"{row}hi = *(const fl_dwvu{v} *)({row} + 2 * ow + {v});")
        for column, lanes in (("even", evens), ("odd", odds)):
            out("#if defined(__clang__)")
            out(f"const {vector} {row}{column} = __builtin_shufflevector({row}lo, {row}hi, {lanes});")
            out("#else")
            out(f"const {vector} {row}{column} = __builtin_shuffle({row}lo, {row}hi, ({mask}){{{lanes}}});")
            out("#endif")
    for src in ("r0even", "r0odd", "r1even", "r1odd"):  # taps (0,0), (0,1), (1,0), (1,1)
        out(tap.vector_update.format(acc="acc", src=src, mask=mask, vector=vector))
    out(f"*(fl_dwvu{v} *)(yr + ow) = acc;")
    out.close()


def _scalar_outputs(out: Lines, tap: Tap, first: int, last: int) -> None:
    out.open(f"for (long ow = {first}; ow < {last}; ow++)")
    out(f"float acc = {tap.init};")
    for src in ("r0[2 * ow]", "r0[2 * ow + 1]", "r1[2 * ow]", "r1[2 * ow + 1]"):
        out(tap.update.format(acc="acc", src=src))
    out("yr[ow] = acc;")
    out.close()


__all__ = ["MIN_VECTOR", "pairs_fit", "pairs_kernel", "vector_floats"]
