"""Depthwise convolution (one input and one output channel per group) and 2-D pooling as
direct kernels.

As a GEMM it would be a 1 x (OH*OW) x (KH*KW) product per channel: a register tile of MR
rows would hold one useful row, and packing would cost more than the arithmetic. The
direct kernel instead keeps one output row of a channel in an L1 buffer and adds each tap's
weight times a shifted input row into it; the row loop is a plain vector loop (contiguous
at stride 1). The valid part of each shifted row is computed once per tap, so padding costs
no test per element. The finished row goes through the same epilogue as the GEMM
template's tiles (:func:`.gemm_template.epilogue_function`), with row 0 and the row's first
column as its coordinates.

The problem is described like the GEMM's: ``problem.a`` the weights (one row of KH*KW
taps per channel, channel = outer index 1), ``problem.b`` the input as :class:`Im2Col` with
one channel, ``problem.c`` the output; outer indices (image, channel).

Max and average pooling are the same kernel with another tap (:class:`Tap`): no weights, a
max or a plain sum, and padding of -inf or 0. An average's divisor is the epilogue's
business: the pool's own final statement divides by it (see :mod:`.template`).
"""

from __future__ import annotations

from dataclasses import dataclass

from fusionlang.backend import gemm_template
from fusionlang.backend.gemm_template import (Epilogue, GemmProblem, Im2Col, Lines, epilogue_args, epilogue_function,
                                              epilogue_params)


@dataclass(frozen=True)
class Tap:
    """How one tap of the window enters the accumulator ``acc`` from the input ``src``."""

    #: the accumulator's start and the value of padding (C literals)
    init: str
    pad: str
    #: C statement; ``{acc}`` and ``{src}`` stand for the accumulator and the input element
    update: str
    weighted: bool


DEPTHWISE = Tap("0.0f", "0.0f", "{acc} += tap * {src};", True)
#: NaN wins, as in the reference's np.max; padding never does
MAX_POOL = Tap("-INFINITY", "-INFINITY", "{acc} = ({src} > {acc} || {src} != {src}) ? {src} : {acc};", False)
SUM_POOL = Tap("0.0f", "0.0f", "{acc} += {src};", False)

#: the plane method's two stack buffers (padded input, wide output) stay under this
PLANE_BYTES = 128 * 1024


def is_depthwise(problem: GemmProblem) -> bool:
    return isinstance(problem.b, Im2Col) and problem.b.channels == 1 and problem.m == 1 and len(problem.outer) == 2


def depthwise_kernel(name: str, problem: GemmProblem, epilogue: Epilogue | None = None, *,
                     threads: bool = False, tap: Tap = DEPTHWISE, linkage: str = "") -> str:
    """C source of ``int name(const float *W, const float *X, float *Y, <epilogue params>)``
    (always returns 0: it allocates nothing); a pooling ``tap`` drops ``W``; ``linkage``
    goes before the function (``"static "``)."""
    if not is_depthwise(problem):
        raise ValueError("not a depthwise convolution")
    x = problem.b
    assert isinstance(x, Im2Col)  # is_depthwise
    kh, kw = x.kernel
    sh, sw = x.stride
    dh, dw = x.dilation
    ph, pw = x.pads
    out = Lines()
    what = "depthwise" if tap.weighted else "pooling"
    out(f"/* {what} template: {problem.outer[1]} channels, {x.in_h}x{x.in_w} -> {x.out_h}x{x.out_w}, "
        f"kernel {kh}x{kw}, stride {sh}x{sw}, dilation {dh}x{dw}, pads {ph},{pw} */")
    epilogue_function(out, name, problem, epilogue)
    extra, extra_args = epilogue_params(epilogue), epilogue_args(epilogue)
    weights = "const float *restrict W, " if tap.weighted else ""
    out.open(f"{linkage}int {name}({weights}const float *restrict X, float *restrict Y{extra})")
    taps = problem.outer[0] * problem.outer[1] * x.out_h * x.out_w * kh * kw
    if threads and taps >= gemm_template.PARALLEL_MIN_MACS:  # a small one on the calling thread: see there
        out("#pragma omp parallel for collapse(2) schedule(static)")
    out.open(f"for (long o0 = 0; o0 < {problem.outer[0]}; o0++)")
    out.open(f"for (long o1 = 0; o1 < {problem.outer[1]}; o1++)")
    if tap.weighted:
        out(f"const float *w = W + {_offset(problem.a)};")
    out(f"const float *plane = X + {_offset(x)};")
    out(f"float *y = Y + {_offset(problem.c)};")
    if sh == 1 and sw == 1 and _plane_floats(x) * 4 <= PLANE_BYTES:
        _plane_body(out, name, x, kh, kw, dh, dw, ph, pw, epilogue, extra_args, tap)
    else:
        _row_body(out, name, x, kh, kw, sh, sw, dh, dw, ph, pw, epilogue, extra_args, tap)
    out.close()
    out.close()
    out("return 0;")
    out.close()
    return out.text()


def _plane_floats(x: Im2Col) -> int:
    kh, kw = x.kernel
    width = x.out_w + (kw - 1) * x.dilation[1]
    height = x.out_h + (kh - 1) * x.dilation[0]
    return height * width + x.out_h * width


def _update(tap: Tap, acc: str, src: str) -> str:
    return tap.update.format(acc=acc, src=src)


def _plane_body(out: Lines, name, x: Im2Col, kh, kw, dh, dw, ph, pw, epilogue, extra_args, tap: Tap) -> None:
    # stride 1: the channel's input is copied once into a zero-padded plane as wide as the
    # output plus the kernel's reach; then each tap is ONE long vector loop over the whole
    # (wide) output plane at a constant shift. The extra columns of each wide row are junk
    # and are never stored.
    width = x.out_w + (kw - 1) * dw
    height = x.out_h + (kh - 1) * dh
    out(f"float pad[{height * width}] __attribute__((aligned(64)));")
    out(f"float acc[{x.out_h * width}] __attribute__((aligned(64)));")
    # padding everywhere, then each input row copied whole into place: GCC 12 at -O3
    # miscompiled the one-pass form (a select per element between the input and padding,
    # in a fully unrolled row loop: a 6x6 plane read only 2 of each row's 6 values)
    out(f"for (long t = 0; t < {height * width}; t++) pad[t] = {tap.pad};")
    rows = range(max(0, -ph), min(x.in_h, height - ph))
    cols = max(0, min(x.in_w, width - pw))
    if cols and len(rows):
        out(f"for (long iy = {rows.start}; iy < {rows.stop}; iy++) "
            f"__builtin_memcpy(pad + (iy + {ph}) * {width}L + {pw}, plane + iy * {x.in_w}L, {cols} * sizeof(float));")
    span = (x.out_h - 1) * width + x.out_w
    out(f"for (long t = 0; t < {x.out_h * width}; t++) acc[t] = {tap.init};")
    out.open(f"for (long ky = 0; ky < {kh}; ky++)")
    out.open(f"for (long kx = 0; kx < {kw}; kx++)")
    if tap.weighted:
        out(f"const float tap = w[ky * {kw} + kx];")
    out(f"const float *src = pad + ky * {dh * width}L + kx * {dw}L;")
    out("#pragma omp simd")
    out(f"for (long t = 0; t < {span}; t++) {_update(tap, 'acc[t]', 'src[t]')}")
    out.close()
    out.close()
    out.open(f"for (long oh = 0; oh < {x.out_h}; oh++)")
    out(f"float *dst = y + oh * {x.out_w}L;")
    out(f"for (long ow = 0; ow < {x.out_w}; ow++) dst[ow] = acc[oh * {width}L + ow];")
    if epilogue is not None:
        out(f"{name}_epilogue(dst, 0, 1, oh * {x.out_w}L, {x.out_w}, o0, o1{extra_args});")
    out.close()


def _row_body(out: Lines, name, x: Im2Col, kh, kw, sh, sw, dh, dw, ph, pw, epilogue, extra_args, tap: Tap) -> None:
    # any stride: one output row at a time, each tap a strided run of one input row; the
    # taps outside the input are skipped, which is padding for all three taps (padding
    # never wins a max, adds 0 to a sum). The valid columns of a tap depend on kx alone, so
    # the kx loop is unrolled here with constant bounds: a runtime-bounded loop of 16 to 56
    # iterations spent more on peeling than on the max (3x3 pools of 111- and 55-wide rows: 1.2
    # to 1.4x faster; reducing a max window's rows first into one contiguous row, then the
    # strided runs, was faster still at 111 wide but 1.3 to 2x slower at 64, 55 and 27).
    out.open(f"for (long oh = 0; oh < {x.out_h}; oh++)")
    out(f"float row[{x.out_w}] __attribute__((aligned(64)));")
    out(f"for (long ow = 0; ow < {x.out_w}; ow++) row[ow] = {tap.init};")
    out.open(f"for (long ky = 0; ky < {kh}; ky++)")
    out(f"const long iy = oh * {sh} + ky * {dh} - {ph};")
    out(f"if (iy < 0 || iy >= {x.in_h}) continue;")
    out(f"const float *in = plane + iy * {x.in_w}L;")
    _row_taps(out, tap, x, kw, sw, dw, pw)
    out.close()
    out(f"float *dst = y + oh * {x.out_w}L;")
    out(f"for (long ow = 0; ow < {x.out_w}; ow++) dst[ow] = row[ow];")
    if epilogue is not None:
        out(f"{name}_epilogue(dst, 0, 1, oh * {x.out_w}L, {x.out_w}, o0, o1{extra_args});")
    out.close()


def _row_taps(out: Lines, tap: Tap, x: Im2Col, kw, sw, dw, pw) -> None:
    """Each tap kx of the input row ``in`` into ``row``: a strided run over the output
    columns it reaches inside the input, bounds known here."""
    for kx in range(kw):
        x0 = kx * dw - pw
        lo, hi = _valid_columns(x0, sw, x.in_w, x.out_w)
        if hi <= lo:
            continue
        out.open("")
        if tap.weighted:
            out(f"const float tap = w[ky * {kw} + {kx}];")
        out("#pragma omp simd")
        out(f"for (long ow = {lo}; ow < {hi}; ow++) {_update(tap, 'row[ow]', f'in[ow * {sw} + ({x0})]')}")
        out.close()


def _valid_columns(x0: int, sw: int, in_w: int, out_w: int) -> tuple[int, int]:
    """Output columns ``[lo, hi)`` whose tap ``ow * sw + x0`` lies inside ``[0, in_w)``."""
    lo = 0 if x0 >= 0 else (-x0 + sw - 1) // sw
    hi = 0 if x0 >= in_w else (in_w - 1 - x0) // sw + 1
    return lo, min(hi, out_w)


def _offset(view) -> str:
    terms = [f"{view.offset}L"] + [f"o{d} * {s}L" for d, s in enumerate(view.outer_strides) if s]
    return " + ".join(terms)


__all__ = ["DEPTHWISE", "MAX_POOL", "SUM_POOL", "Tap", "depthwise_kernel", "is_depthwise"]
