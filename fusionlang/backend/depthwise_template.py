"""Depthwise convolution (one input and one output channel per group) and 2-D pooling as
direct kernels.

As a GEMM it would be a 1 x (OH*OW) x (KH*KW) product per channel: a register tile of MR
rows would hold one useful row, and packing would cost more than the arithmetic. The
direct kernel has four methods, chosen when it is planned (:func:`correlation_for`,
:func:`full_rows_for`, :func:`planes_for`):

* planes (:class:`Planes`): the channel's input is copied once into zero-padded planes, one
  per stride phase, each as wide as the output plus the kernel's reach; every tap then reads
  them at a constant shift of the output's flattened index, so the whole output plane is one
  contiguous run, summed a few vectors at a time in registers over all taps. On 7x7 or 14x14
  planes (and at stride 2) a row is less than one vector: the row method left most lanes idle
  and paid its per-row overhead 7 to 14 times per channel. Planes of at most 4x4 outputs go
  further (:func:`lanes_for`): a vector of channels at a time, one per lane, each tap's
  weight a vector of theirs.
* full rows (:class:`FullRows`): where output rows are a vector or wider, or half a vector
  with fewer lanes idle than in the planes' wide rows (:func:`full_rows_for`), the channel's
  input is copied once into one zero-padded plane and a few output rows at a time are
  summed in registers over all taps (each input vector loaded once for every row that
  reads it) and stored straight into the output
  (at a column stride, every column of the padded row's grid is summed and every sw-th
  kept): the planes' flattened chunks went through a plane-sized buffer and a copy, and
  their phases through a strided gather of every input row.
* rows: one output row of a channel in an L1 buffer, each tap's weight times a shifted (at
  stride > 1 strided) input row added in; the valid part of each shifted row is computed once
  per tap, so padding costs no test per element. It runs where the planes would not fit the
  stack (:data:`PLANE_BYTES`) and on wide strided rows with few taps, where its long runs beat
  splitting the input into phases.
* correlation (:class:`Correlation`): a kernel far larger than the output plane (a depthwise
  weight gradient, whose kernel is the forward's output gradient and whose output is the
  forward's 3x3 taps): each output is one long dot product of the kernel, copied as wide as
  the input's zero-padded phase planes, with its plane at a constant shift.

The finished plane (or row) goes through the same epilogue as the GEMM template's tiles
(:func:`.gemm_template.epilogue_function`), with row 0 and its first element's flattened
index as its coordinates.

The problem is described like the GEMM's: ``problem.a`` the weights (one row of KH*KW
taps per channel, channel = outer index 1), ``problem.b`` the input as :class:`Im2Col` with
one channel, ``problem.c`` the output; outer indices (image, channel).

Max and average pooling are the same kernel with another tap (:class:`Tap`): no weights, a
max or a plain sum, and padding of -inf or 0. An average's divisor is the epilogue's
business: the pool's own final statement divides by it (see :mod:`.template`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fusionlang.backend import gemm_template
from fusionlang.backend.cexpr import C
from fusionlang.backend.epilogue import statements_text
from fusionlang.backend.gemm_template import (Epilogue, GemmProblem, Im2Col, Lines, epilogue_args, epilogue_function,
                                              epilogue_params)
from fusionlang.backend.machine import host


@dataclass(frozen=True)
class Tap:
    """How one tap of the window enters the accumulator ``acc`` from the input ``src``."""

    #: the accumulator's start and the value of padding (C literals)
    init: str
    pad: str
    #: C statement; ``{acc}`` and ``{src}`` stand for the accumulator and the input element
    update: str
    weighted: bool
    #: the same on vectors (``{acc}`` a vector variable, ``{src}`` a vector value; ``{mask}``
    #: the integer vector type of their lanes): GCC's C has no ``?:`` on vectors
    vector_update: str


DEPTHWISE = Tap("0.0f", "0.0f", "{acc} += tap * {src};", True, "{acc} += tap * {src};")
#: NaN wins, as in the reference's np.max; padding never does
MAX_POOL = Tap("-INFINITY", "-INFINITY", "{acc} = ({src} > {acc} || {src} != {src}) ? {src} : {acc};", False,
               "{{ {mask} si = ({mask}){src}, ai = ({mask}){acc}, mi = ({src} > {acc}) | ({src} != {src}); "
               "{acc} = ({vector})((si & mi) | (ai & ~mi)); }}")
SUM_POOL = Tap("0.0f", "0.0f", "{acc} += {src};", False, "{acc} += {src};")

#: the plane method's two stack buffers (padded input, wide output) stay under this
PLANE_BYTES = 128 * 1024


def is_depthwise(problem: GemmProblem) -> bool:
    return isinstance(problem.b, Im2Col) and problem.b.channels == 1 and problem.m == 1 and len(problem.outer) == 2


@dataclass(frozen=True)
class Planes:
    """The plane method's layout, decided when the kernel is planned (:func:`planes_for`).

    The channel's zero-padded input is split by stride phase into ``phases`` planes of
    ``height`` x ``width`` (plane (py, px) holds the padded input's rows py, py + sh, ... and
    its columns px, px + sw, ...), each as wide as the output plus the kernel's reach in
    phase columns. Then every tap reads its phase plane at a constant shift of the output's
    flattened index ``oh * width + ow``, whatever the stride: the whole output plane is one
    contiguous run of ``span`` floats, accumulated ``unroll`` vectors of ``vl`` floats at a
    time in registers (``chunks`` of them), every tap added in before the next chunk."""

    phases: tuple[int, int]
    height: int
    width: int
    vl: int
    unroll: int
    chunks: int

    @property
    def span(self) -> int:
        """Floats of the flattened output the chunks cover (a whole number of chunks)."""
        return self.chunks * self.unroll * self.vl

    def buffer_floats(self, x: Im2Col) -> int:
        """Floats of the padded phase planes, with room for the last chunk's furthest tap:
        whole vectors."""
        planes = self.phases[0] * self.phases[1] * self.height * self.width
        reach = max(tap_offset(self, x, ky, kx) for ky in range(x.kernel[0]) for kx in range(x.kernel[1]))
        return -(-max(planes, self.span + reach) // self.vl) * self.vl


#: a strided convolution with few taps per input element (3x3 at stride 2: 2.25) and output
#: rows at least this wide runs the row method: its long strided runs cost less than
#: splitting the input into phase planes (3x3 stride 2, 112 -> 56 wide: planes 0.85 to 0.94x
#: the rows' speed as depthwise conv and max pool; 84 -> 42: 1.34x; 56 -> 28: 1.8 to 2.6x;
#: 5x5 stride 2 at 112: 1.5x)
ROWS_MIN_WIDTH, ROWS_MAX_TAPS_PER_INPUT = 48, 3

#: padding buffers up to this many vectors are filled by single stores
SMALL_FILL_VECTORS = 16

#: accumulator vectors per chunk: 8 of 32 (AVX-512) or 16 (AVX2) registers, the rest for the
#: loaded input; at least MIN_UNROLL so that each tap's loads overlap
MAX_UNROLL, MIN_UNROLL = 8, 4


def planes_for(x: Im2Col, vl: int) -> Planes | None:
    """The plane method's layout for this convolution on ``vl``-float vectors, or None where
    its two stack buffers (padded phase planes, flattened output) would pass
    :data:`PLANE_BYTES`, or where the rows are faster (:data:`ROWS_MIN_WIDTH`): then the row
    method runs."""
    (kh, kw), (sh, sw), (dh, dw) = x.kernel, x.stride, x.dilation
    if sh * sw > 1 and kh * kw < ROWS_MAX_TAPS_PER_INPUT * sh * sw and x.out_w >= ROWS_MIN_WIDTH:
        return None
    height = x.out_h + (kh - 1) * dh // sh
    width = x.out_w + (kw - 1) * dw // sw
    vectors = -(-((x.out_h - 1) * width + x.out_w) // vl)
    # the unroll that wastes the fewest vectors on the last chunk (ties: the larger)
    unroll = min(range(min(MIN_UNROLL, vectors), min(MAX_UNROLL, vectors) + 1),
                 key=lambda u: (-(-vectors // u) * u, -u))
    planes = Planes((sh, sw), height, width, vl, unroll, -(-vectors // unroll))
    if 4 * (planes.buffer_floats(x) + planes.span) > PLANE_BYTES:
        return None
    return planes


def depthwise_kernel(name: str, problem: GemmProblem, epilogue: Epilogue | None = None, *,
                     threads: bool = False, tap: Tap = DEPTHWISE, linkage: str = "",
                     vl: int | None = None) -> str:
    """C source of ``int name(const float *W, const float *X, float *Y, <epilogue params>)``
    (always returns 0: it allocates nothing); a pooling ``tap`` drops ``W``; ``linkage``
    goes before the function (``"static "``); ``vl``: floats per vector of the plane method
    (default: this machine's)."""
    if not is_depthwise(problem):
        raise ValueError("not a depthwise convolution")
    x = problem.b
    assert isinstance(x, Im2Col)  # is_depthwise
    kh, kw = x.kernel
    sh, sw = x.stride
    dh, dw = x.dilation
    ph, pw = x.pads
    correlation = correlation_for(x, vl or host().vector_floats) if tap.weighted else None
    planes = None if correlation else planes_for(x, vl or host().vector_floats)
    lanes = lanes_for(problem, planes)
    full_rows = None if correlation or lanes else full_rows_for(x, vl or host().vector_floats)
    out = Lines()
    what = "depthwise" if tap.weighted else "pooling"
    method = "rows" if planes is None else f"planes {planes.unroll}x{planes.vl} x{planes.chunks}"
    method = f"full rows {full_rows.vl} x{len(full_rows.segments())}" if full_rows else method
    method += f", channels {lanes} at a time in lanes" if lanes else ""
    method = f"correlation {correlation.vl} x{correlation.length // correlation.vl}" if correlation else method
    out(f"/* {what} template: {problem.outer[1]} channels, {x.in_h}x{x.in_w} -> {x.out_h}x{x.out_w}, "
        f"kernel {kh}x{kw}, stride {sh}x{sw}, dilation {dh}x{dw}, pads {ph},{pw}, {method} */")
    vector_floats = correlation.vl if correlation else full_rows.vl if full_rows else planes.vl if planes else 0
    if vector_floats:
        plane_vector_types(out, vector_floats)
    epilogue_function(out, name, problem, epilogue)
    extra, extra_args = epilogue_params(epilogue), epilogue_args(epilogue)
    weights = "const float *restrict W, " if tap.weighted else ""
    out.open(f"{linkage}int {name}({weights}const float *restrict X, float *restrict Y{extra})")
    taps = problem.outer[0] * problem.outer[1] * x.out_h * x.out_w * kh * kw
    parallel = threads and taps >= gemm_template.PARALLEL_MIN_MACS  # a small one on the calling thread: see there
    grouped = problem.outer[1] // lanes * lanes if lanes else 0
    # the channels that fill whole vectors in lanes (if any), then the rest one by one
    for first, last, step in ((0, grouped, lanes), (grouped, problem.outer[1], 1)):
        if last <= first:
            continue
        if parallel:
            out("#pragma omp parallel for collapse(2) schedule(static)")
        out.open(f"for (long o0 = 0; o0 < {problem.outer[0]}; o0++)")
        out.open(f"for (long o1 = {first}; o1 < {last}; o1 += {step})")
        if tap.weighted:
            out(f"const float *w = W + {view_offset(problem.a)};")
        out(f"const float *plane = X + {view_offset(x)};")
        out(f"float *y = Y + {view_offset(problem.c)};")
        if correlation is not None:
            _correlation_body(out, name, x, correlation, epilogue, extra_args)
        elif step > 1:
            assert planes is not None  # lanes_for
            _lanes_body(out, name, problem, planes.vl, epilogue, extra_args, tap)
        elif full_rows is not None:
            _full_rows_body(out, name, x, full_rows, epilogue, extra_args, tap)
        elif planes is not None:
            _plane_body(out, name, x, planes, epilogue, extra_args, tap)
        else:
            _row_body(out, name, x, kh, kw, sh, sw, dh, dw, ph, pw, epilogue, extra_args, tap)
        out.close()
        out.close()
    out("return 0;")
    out.close()
    return out.text()


#: output planes of at most this many elements (4x4) run ``vl`` channels at a time, one per
#: lane, where the channels fill a vector; their windows span at most LANES_MAX_WINDOW inputs.
#: Against the plane method at batch 4 (A/B in one process): 2x2 planes of 960 channels 3.5x,
#: 4x4 of 576 1.9x; larger planes were not measured with lanes and stay planes
LANES_MAX_OUTPUTS, LANES_MAX_WINDOW = 16, 100


def lanes_for(problem: GemmProblem, planes: Planes | None) -> int:
    """How many channels one pass of the lanes method takes (a vector's floats), or 0 where
    each channel runs alone: a 2x2 or 4x4 output plane fills less than one vector, and the
    plane method then spends most of each channel on its fixed costs (the padding, the
    chunk's stores, the compaction), one channel after another."""
    x = problem.b
    assert isinstance(x, Im2Col)
    if planes is None or x.out_h * x.out_w > LANES_MAX_OUTPUTS or problem.outer[1] < planes.vl:
        return 0
    return planes.vl if _window(x)[0] * _window(x)[1] <= LANES_MAX_WINDOW else 0


def _window(x: Im2Col) -> tuple[int, int]:
    """Rows and columns of the padded input the output plane reads."""
    (kh, kw), (sh, sw), (dh, dw) = x.kernel, x.stride, x.dilation
    return (x.out_h - 1) * sh + (kh - 1) * dh + 1, (x.out_w - 1) * sw + (kw - 1) * dw + 1


def _lanes_body(out: Lines, name, problem: GemmProblem, vl: int, epilogue, extra_args, tap: Tap) -> None:
    # lane l holds channel o1 + l: the padded windows are gathered across the channels, each
    # tap's weight is a vector of the channels' weights, and every output element is one
    # vector of taps summed in registers; then each channel's plane is scattered back
    # and its epilogue run
    x = problem.b
    assert isinstance(x, Im2Col)
    (kh, kw), (sh, sw), (dh, dw), (ph, pw) = x.kernel, x.stride, x.dilation, x.pads
    rows, cols = _window(x)
    vector, outputs = f"fl_dwv{vl}", x.out_h * x.out_w
    x_step, y_step = x.outer_strides[1], problem.c.outer_strides[1]
    if tap.weighted:
        out(f"{vector} wv[{kh * kw}];")
        out(f"for (long k = 0; k < {kh * kw}; k++) for (long l = 0; l < {vl}; l++) "
            f"wv[k][l] = w[l * {problem.a.outer_strides[1]}L + k];")
    out(f"{vector} xt[{rows * cols}], yt[{outputs}];")
    out(f"for (long t = 0; t < {rows * cols}; t++) xt[t] = ({vector}){{0}} + {tap.pad};")
    lo_r, hi_r = _valid_columns(-ph, 1, x.in_h, rows)
    lo_c, hi_c = _valid_columns(-pw, 1, x.in_w, cols)
    if hi_r > lo_r and hi_c > lo_c:
        out(f"for (long r = {lo_r}; r < {hi_r}; r++) for (long c = {lo_c}; c < {hi_c}; c++) "
            f"for (long l = 0; l < {vl}; l++) xt[r * {cols} + c][l] = plane[l * {x_step}L + (r - {ph}) * {x.in_w}L + c - {pw}];")
    for oh in range(x.out_h):
        for ow in range(x.out_w):
            out.open("")
            out(f"{vector} a = ({vector}){{0}} + {tap.init};")
            for ky in range(kh):
                for kx in range(kw):
                    weight = f"const {vector} tap = wv[{ky * kw + kx}]; " if tap.weighted else ""
                    update = tap.vector_update.format(acc="a", src="xv", mask=f"fl_dwm{vl}", vector=vector)
                    out(f"{{ {weight}{vector} xv = xt[{(oh * sh + ky * dh) * cols + ow * sw + kx * dw}]; {update} }}")
            out(f"yt[{oh * x.out_w + ow}] = a;")
            out.close()
    out.open(f"for (long l = 0; l < {vl}; l++)")
    out(f"float *yl = y + l * {y_step}L;")
    out(f"for (long j = 0; j < {outputs}; j++) yl[j] = yt[j][l];")
    if epilogue is not None:
        out(f"{name}_epilogue(yl, 0, 1, 0, {outputs}, o0, o1 + l{extra_args});")
    out.close()


@dataclass(frozen=True)
class Correlation:
    """The correlation method's layout, for a kernel far larger than its output plane (a
    depthwise weight gradient: the forward's output gradient is the kernel, the 3x3 taps
    are the output; see frontend/torch_grad_ops.py).

    Output (p, q) reads the padded input at rows p*sh + i*dh: rows of one phase of the
    dilation, ``dilation`` phase planes in all, each ``width`` columns wide (the kernel's
    plus the furthest output's shift) and ``phase_floats`` long. The kernel is copied as
    wide as the planes, zeros in its extra columns, ``length`` floats (whole vectors): each
    output is then one dot product of the wide kernel with its phase plane at a constant
    shift, all the kernel's taps in ``length / vl`` vector steps. (The zero columns meet
    input elements other outputs read: an infinite input there makes this output NaN where
    the exact sum might stay finite.)"""

    dilation: tuple[int, int]
    width: int
    phase_floats: int
    length: int
    vl: int

    def shift(self, x: Im2Col, p: int, q: int) -> int:
        """Where output (p, q) reads its phase planes' buffer at the kernel's first tap."""
        (sh, sw), (dh, dw) = x.stride, self.dilation
        phase = (p * sh % dh) * dw + q * sw % dw
        return phase * self.phase_floats + p * sh // dh * self.width + q * sw // dw


#: the correlation method runs where the kernel has at least this many taps per output
#: element and at least CORRELATION_MIN_TAPS in all (a 3x3 weight gradient's kernel is the
#: forward's output plane: 4 to 12544 taps); a forward convolution's kernel (up to 7x7) on
#: a small plane keeps the plane or lanes method
CORRELATION_MIN_TAPS_PER_OUTPUT, CORRELATION_MIN_TAPS = 4, 64

#: outputs summed in one pass over the kernel: each holds a vector accumulator in registers
CORRELATION_OUTPUTS_PER_PASS = 8


def correlation_for(x: Im2Col, vl: int) -> Correlation | None:
    """The correlation method's layout, or None where the kernel is not much larger than the
    output plane (:data:`CORRELATION_MIN_TAPS_PER_OUTPUT`, :data:`CORRELATION_MIN_TAPS`) or its buffers would pass
    :data:`PLANE_BYTES`."""
    (kh, kw), (sh, sw), (dh, dw) = x.kernel, x.stride, x.dilation
    if kh * kw < max(CORRELATION_MIN_TAPS, CORRELATION_MIN_TAPS_PER_OUTPUT * x.out_h * x.out_w):
        return None
    width = kw + (x.out_w - 1) * sw // dw
    length = -(-kh * width // vl) * vl
    # the furthest output's shift in its phase plane, then the whole wide kernel
    reach = (x.out_h - 1) * sh // dh * width + (x.out_w - 1) * sw // dw
    phase_floats = -(-(reach + length) // vl) * vl
    layout = Correlation((dh, dw), width, phase_floats, length, vl)
    if 4 * (dh * dw * phase_floats + length) > PLANE_BYTES:
        return None
    return layout


def _correlation_body(out: Lines, name, x: Im2Col, layout: Correlation, epilogue, extra_args) -> None:
    # the channel's input into its zero-padded dilation phase planes and its kernel into the
    # planes' width; then each pass of up to CORRELATION_OUTPUTS_PER_PASS outputs runs over
    # the wide kernel once, one vector accumulator per output, each reading its plane at its
    # own constant shift (the kernel's vector serves them all)
    (kh, kw), vl = x.kernel, layout.vl
    vector, loaded = f"fl_dwv{vl}", f"fl_dwvu{vl}"
    (dh, dw), size = layout.dilation, layout.dilation[0] * layout.dilation[1] * layout.phase_floats
    out(f"float pad[{size}] __attribute__((aligned(64)));")
    out(f"float wide[{layout.length}] __attribute__((aligned(64)));")
    out(f"__builtin_memset(pad, 0, sizeof pad); __builtin_memset(wide, 0, sizeof wide);")
    out(f"for (long i = 0; i < {kh}; i++) __builtin_memcpy(wide + i * {layout.width}L, w + i * {kw}L, "
        f"{kw} * sizeof(float));")
    fill_phases(out, x, layout.dilation, layout.width, layout.phase_floats, height=layout.phase_floats // layout.width)
    outputs = [(p, q) for p in range(x.out_h) for q in range(x.out_w)]
    passes = -(-len(outputs) // CORRELATION_OUTPUTS_PER_PASS)
    each = -(-len(outputs) // passes)
    for first in range(0, len(outputs), each):
        chosen = outputs[first:first + each]
        out.open("")
        accs = [f"a{u}" for u in range(len(chosen))]
        out(f"{vector} {', '.join(f'{a} = ({vector}){{0}}' for a in accs)};")
        out.open(f"for (long t = 0; t < {layout.length}; t += {vl})")
        out(f"const {vector} tap = *(const {vector} *)(wide + t);")
        for a, (p, q) in zip(accs, chosen):
            out(f"{a} += tap * *(const {loaded} *)(pad + t + {layout.shift(x, p, q)});")
        out.close()
        for a, (p, q) in zip(accs, chosen):
            out(f"{{ float s = 0.0f; for (int l = 0; l < {vl}; l++) s += {a}[l]; y[{p * x.out_w + q}] = s; }}")
        out.close()
    if epilogue is not None:
        out(f"{name}_epilogue(y, 0, 1, 0, {x.out_h * x.out_w}, o0, o1{extra_args});")


def plane_vector_types(out: Lines, vl: int) -> None:
    # guarded: a unit holds many depthwise kernels
    out(f"#ifndef FL_DW_VECTORS_{vl}")
    out(f"#define FL_DW_VECTORS_{vl}")
    out(f"typedef float fl_dwv{vl} __attribute__((vector_size({4 * vl})));")
    out(f"typedef float fl_dwvu{vl} __attribute__((vector_size({4 * vl}), aligned(4), may_alias));")
    out(f"typedef int fl_dwm{vl} __attribute__((vector_size({4 * vl})));")
    out("#endif")


def tap_offset(planes: Planes, x: Im2Col, ky: int, kx: int) -> int:
    """Where tap (ky, kx) reads the output's flattened index 0: its phase plane, shifted."""
    (sh, sw), (dh, dw) = x.stride, x.dilation
    phase = (ky * dh % sh) * sw + kx * dw % sw
    return phase * planes.height * planes.width + ky * dh // sh * planes.width + kx * dw // sw


def _plane_body(out: Lines, name, x: Im2Col, planes: Planes, epilogue, extra_args, tap: Tap) -> None:
    # the channel's input is copied once into its zero-padded phase planes; then each chunk
    # of the flattened (wide) output plane sums every tap in registers, a constant shift
    # each. The extra columns of each wide row are junk and are never stored.
    vector, vl = f"fl_dwv{planes.vl}", planes.vl
    _fill_pad(out, x, planes.buffer_floats(x), vl, tap)
    fill_phases(out, x, planes.phases, planes.width, planes.height * planes.width, planes.height)
    out(f"float acc[{planes.span}] __attribute__((aligned(64)));")
    out.open(f"for (long t0 = 0; t0 < {planes.span}; t0 += {planes.unroll * vl})")
    accs = [f"a{u}" for u in range(planes.unroll)]
    out(f"{vector} {', '.join(f'{a} = ({vector}){{0}} + {tap.init}' for a in accs)};")
    offsets = {(ky, kx): tap_offset(planes, x, ky, kx) for ky in range(x.kernel[0]) for kx in range(x.kernel[1])}
    _sum_taps(out, x, vl, offsets, accs, "t0", tap)
    for u, a in enumerate(accs):
        out(f"*(fl_dwvu{vl} *)(acc + t0 + {u * vl}) = {a};")
    positional = epilogue is not None and reads_position(epilogue)
    if epilogue is not None and not positional:
        # the same at every position (a channel's scale and clip): over the chunk as it is,
        # junk columns too, in whole vectors; on the stored plane its vector loads waited for
        # the narrow stores of the rows (7x7: a quarter of the kernel's time)
        out(f"{name}_epilogue(acc + t0, 0, 1, 0, {planes.unroll * vl}, o0, o1{extra_args});")
    out.close()
    out(f"for (long oh = 0; oh < {x.out_h}; oh++) "
        f"__builtin_memcpy(y + oh * {x.out_w}L, acc + oh * {planes.width}L, {x.out_w} * sizeof(float));")
    if positional:  # once over the channel's plane: one long vector loop, not a short one per row
        out(f"{name}_epilogue(y, 0, 1, 0, {x.out_h * x.out_w}, o0, o1{extra_args});")


#: output rows of at least this many vectors run the full-rows method (A/B in one process
#: against the plane method, batch 1, BN + ReLU6 epilogue, CPU time: 112x112 3x3 over 32
#: channels 0.30 -> 0.18 ms, 56x56 over 144 0.27 -> 0.19 ms, ConvNeXt's 56x56 7x7 over 96
#: 0.52 -> 0.34, 28x28 7x7 over 192 0.25 -> 0.16, 28x28 3x3 over 192 0.069 -> 0.053; rows
#: under one vector (14x14) stay planes: their flattened chunks waste fewer lanes)
ROW_CHUNKS_MIN_VECTORS = 1


@dataclass(frozen=True)
class FullRows:
    """The full-rows method's layout (:func:`full_rows_for`): the channel's zero-padded input
    as one plane of ``height`` x ``width`` (no phases), each output row summed in registers
    at every column of the padded row's stride-1 grid (``columns`` of them) and stored
    straight into the output; at a column stride the row's every ``sw``-th column is kept.
    The sums at the skipped columns cost less than splitting the input by phase (a strided
    gather of each input row, twice at stride 2)."""

    height: int
    width: int
    columns: int
    vl: int

    def offset(self, x: Im2Col, ky: int, kx: int) -> int:
        """Where tap (ky, kx) of output row 0, column 0 reads the plane."""
        return ky * x.dilation[0] * self.width + kx * x.dilation[1]

    def segments(self) -> list[tuple[int, int]]:
        """(first column, vectors) of each register pass over a row of ``columns``: at most
        MAX_UNROLL vectors each, as even as can be."""
        vectors = -(-self.columns // self.vl)
        each = -(-vectors // -(-vectors // MAX_UNROLL))
        return [(v * self.vl, min(each, vectors - v)) for v in range(0, vectors, each)]

    def buffer_floats(self, x: Im2Col) -> int:
        """Floats of the padded plane, with room for the last row's furthest read: whole vectors."""
        first, count = self.segments()[-1]
        last = ((x.out_h - 1) * x.stride[0] * self.width + first + count * self.vl
                + self.offset(x, x.kernel[0] - 1, x.kernel[1] - 1))
        return -(-max(self.height * self.width, last) // self.vl) * self.vl


def full_rows_for(x: Im2Col, vl: int) -> FullRows | None:
    """The full-rows method's layout where output rows are at least
    :data:`ROW_CHUNKS_MIN_VECTORS` vectors wide and its buffers (the plane, a pass's rows at a
    column stride) fit :data:`PLANE_BYTES`; else None."""
    (kh, kw), (sh, sw), (dh, dw) = x.kernel, x.stride, x.dilation
    columns = (x.out_w - 1) * sw + 1
    if x.out_w < ROW_CHUNKS_MIN_VECTORS * vl and not _fewer_idle_lanes(x, columns, vl):
        return None
    layout = FullRows((x.out_h - 1) * sh + (kh - 1) * dh + 1, columns + (kw - 1) * dw, columns, vl)
    rows = MAX_ROWS_PER_PASS * -(-columns // vl) * vl if sw > 1 else 0
    return layout if 4 * (layout.buffer_floats(x) + rows) <= PLANE_BYTES else None


def _fewer_idle_lanes(x: Im2Col, columns: int, vl: int) -> bool:
    """Whether output rows of half a vector or more leave fewer lanes idle as full rows
    (their last vector's rest, and the columns a stride skips) than in the plane method's
    wide rows (the kernel's reach in junk columns): 14-wide rows with 5x5 or 7x7 taps
    (0.150 -> 0.129 ms over 672 channels, 0.145 -> 0.120 over 384), not with 3x3 (0.058 ->
    0.076 over 576, kept planes)."""
    if 2 * x.out_w < vl:
        return False
    full_rows_lanes = -(-columns // vl) * vl
    plane_width = x.out_w + (x.kernel[1] - 1) * x.dilation[1] // x.stride[1]
    return plane_width > full_rows_lanes


def _fill_pad(out: Lines, x: Im2Col, size: int, vl: int, tap: Tap) -> None:
    """``pad``, ``size`` floats of the tap's padding (the caller copies the input in)."""
    vector = f"fl_dwv{vl}"
    out(f"float pad[{size}] __attribute__((aligned(64)));")
    # a small buffer's padding as vector stores one by one: a loop, gcc makes `rep stos`,
    # which starts slowly (a 7x7 plane's 96 floats)
    fill = f"({vector}){{0}} + {tap.pad}"
    if size <= SMALL_FILL_VECTORS * vl:
        out(" ".join(f"*({vector} *)(pad + {t}) = {fill};" for t in range(0, size, vl)))
    else:
        out(f"for (long t = 0; t < {size}; t++) pad[t] = {tap.pad};")


def _sum_taps(out: Lines, x: Im2Col, vl: int, offsets: dict, accs: list[str], base: str, tap: Tap) -> None:
    """Every tap (ky, kx) into the accumulator vectors ``accs``, reading ``pad + base`` at
    ``offsets[ky, kx]``."""
    vector = f"fl_dwv{vl}"
    for (ky, kx), offset in offsets.items():
        out.open("")
        if tap.weighted:
            out(f"const float tap = w[{ky * x.kernel[1] + kx}];")
        out(f"const float *src = pad + {base} + {offset};")
        for u, a in enumerate(accs):
            out(f"{{ {vector} xv = *(const fl_dwvu{vl} *)(src + {u * vl}); "
                f"{tap.vector_update.format(acc=a, src='xv', mask=f'fl_dwm{vl}', vector=vector)} }}")
        out.close()


def _fill_border(out: Lines, x: Im2Col, layout: FullRows, tap: Tap) -> None:
    """``pad`` with the tap's padding where the input's copy does not go: the rows above
    and below it and, between two rows' copies, the right and left padding (one run);
    a whole-plane fill before the copy wrote every float twice."""
    size, width = layout.buffer_floats(x), layout.width
    out(f"float pad[{size}] __attribute__((aligned(64)));")
    rows = _valid_columns(-x.pads[0], 1, x.in_h, layout.height)
    cols = _valid_columns(-x.pads[1], 1, x.in_w, width)
    if rows[1] <= rows[0] or cols[1] <= cols[0]:  # no input inside the window: all padding
        out(f"for (long t = 0; t < {size}; t++) pad[t] = {tap.pad};")
        return
    out(f"for (long t = 0; t < {rows[0] * width + cols[0]}; t++) pad[t] = {tap.pad};")
    gap = width - (cols[1] - cols[0])
    if gap:
        out(f"for (long q = {rows[0]}; q < {rows[1] - 1}; q++) "
            f"for (long t = q * {width}L + {cols[1]}; t < q * {width}L + {cols[1] + gap}; t++) pad[t] = {tap.pad};")
    out(f"for (long t = {(rows[1] - 1) * width + cols[1]}; t < {size}; t++) pad[t] = {tap.pad};")


#: the full-rows method sums several output rows in one pass (as many as keep this many
#: accumulator vectors, at most MAX_ROWS_PER_PASS): each input vector it loads serves every
#: row whose window holds it (7x7 taps: 10 input rows for 4 output rows, not 28)
FULL_ROWS_ACCUMULATORS, MAX_ROWS_PER_PASS = 16, 4


def rows_per_pass(layout: FullRows) -> int:
    """Output rows the full-rows method sums in one pass."""
    widest = max(count for _, count in layout.segments())
    return max(1, min(MAX_ROWS_PER_PASS, FULL_ROWS_ACCUMULATORS // widest))


def _full_rows_body(out: Lines, name, x: Im2Col, layout: FullRows, epilogue, extra_args, tap: Tap) -> None:
    # passes of a few output rows, each summed in registers a few vectors at a time and
    # stored straight into the output (at a column stride: into `row`, then every sw-th
    # column of it), their epilogue run while they are in L1; the plane method's chunks of
    # the flattened plane went through a plane-sized buffer and a copy (112x112: 100 KB of
    # stack per channel)
    vl, sw, rows = layout.vl, x.stride[1], rows_per_pass(layout)
    _fill_border(out, x, layout, tap)
    fill_phases(out, x, (1, 1), layout.width, layout.height * layout.width, layout.height)
    if sw > 1:
        out(f"float row[{rows}][{-(-layout.columns // vl) * vl}] __attribute__((aligned(64)));")
    whole = x.out_h // rows * rows
    if whole:
        out.open(f"for (long oh = 0; oh < {whole}; oh += {rows})")
        _full_rows_pass(out, name, x, layout, rows, epilogue, extra_args, tap)
        out.close()
    if x.out_h > whole:  # the last rows, fewer than a pass
        out.open("")
        out(f"const long oh = {whole};")
        _full_rows_pass(out, name, x, layout, x.out_h - whole, epilogue, extra_args, tap)
        out.close()


def _full_rows_pass(out: Lines, name, x: Im2Col, layout: FullRows, rows: int, epilogue, extra_args, tap: Tap) -> None:
    """Output rows ``oh`` to ``oh + rows - 1``: every input row of their windows is loaded
    once per tap column and added into each of them that reads it; then the epilogue, once
    over the rows (one contiguous run of the output: one call, not one per row)."""
    vector, vl, (kh, kw), (sh, sw), (dh, dw) = f"fl_dwv{layout.vl}", layout.vl, x.kernel, x.stride, x.dilation
    for first, count in layout.segments():
        out.open("")
        accs = [[f"a{i}_{u}" for u in range(count)] for i in range(rows)]
        out(f"{vector} {', '.join(f'{a} = ({vector}){{0}} + {tap.init}' for line in accs for a in line)};")
        for r in range((rows - 1) * sh + (kh - 1) * dh + 1):  # input rows below oh * sh
            readers = [(i, (r - i * sh) // dh) for i in range(rows)
                       if r >= i * sh and (r - i * sh) % dh == 0 and (r - i * sh) // dh < kh]
            if not readers:
                continue
            for kx in range(kw):
                out.open("")
                out(f"const float *src = pad + (oh * {sh} + {r}) * {layout.width}L + {first + kx * dw};")
                for u in range(count):
                    out(f"{vector} x{u} = *(const fl_dwvu{vl} *)(src + {u * vl});")
                for i, ky in readers:
                    weight = f"const float tap = w[{ky * kw + kx}]; " if tap.weighted else ""
                    for u in range(count):
                        update = tap.vector_update.format(acc=accs[i][u], src=f"x{u}", mask=f"fl_dwm{vl}",
                                                          vector=vector)
                        out(f"{{ {weight}{update} }}")
                out.close()
        for i in range(rows):
            _store_row(out, x, vl, accs[i], first, i)
        out.close()
    for i in range(rows if sw > 1 else 0):
        out("#pragma omp simd")
        out(f"for (long ow = 0; ow < {x.out_w}; ow++) y[(oh + {i}) * {x.out_w}L + ow] = row[{i}][ow * {sw}];")
    if epilogue is not None:  # the pass's rows are one contiguous run of the output
        out(f"{name}_epilogue(y + oh * {x.out_w}L, 0, 1, oh * {x.out_w}L, {rows * x.out_w}, o0, o1{extra_args});")


def _store_row(out: Lines, x: Im2Col, vl: int, accs: list[str], first: int, i: int) -> None:
    """A segment of pass row ``i`` into the output (at a column stride: into ``row[i]``).
    (Storing a partial vector whole, over the next row's start that its own stores then
    overwrite, was no faster.)"""
    for u, a in enumerate(accs):
        column = first + u * vl
        if x.stride[1] > 1:
            out(f"*(fl_dwvu{vl} *)(row[{i}] + {column}) = {a};")
        elif column + vl <= x.out_w:
            out(f"*(fl_dwvu{vl} *)(y + (oh + {i}) * {x.out_w}L + {column}) = {a};")
        else:  # the row's last, partial vector
            out(f"__builtin_memcpy(y + (oh + {i}) * {x.out_w}L + {column}, &{a}, {x.out_w - column} * sizeof(float));")


def reads_position(epilogue: Epilogue) -> bool:
    """Whether the epilogue's statements name the element's column ``j`` (the flattened
    output position): a load or store at the element (a residual, a second output) does, a
    per-channel scale or a clip does not."""
    return any(re.search(r"\bj\b", line) for line in statements_text(epilogue.body, C))


def fill_phases(out: Lines, x: Im2Col, steps: tuple[int, int], width: int, phase_floats: int, height: int) -> None:
    """Copy the channel's input into its phase planes of ``steps`` (the stride's for the
    plane method, the dilation's for the correlation), ``height`` x ``width`` each,
    ``phase_floats`` apart (the padding is already there): per phase, the rows and columns
    that fall inside the input, bounds known here."""
    (sh, sw), (ph, pw) = steps, x.pads
    for py in range(sh):
        rows = _valid_columns(py - ph, sh, x.in_h, height)
        for px in range(sw):
            cols = _valid_columns(px - pw, sw, x.in_w, width)
            if rows[1] <= rows[0] or cols[1] <= cols[0]:
                continue
            base = (py * sw + px) * phase_floats
            out.open(f"for (long q = {rows[0]}; q < {rows[1]}; q++)")
            out(f"const float *in = plane + (q * {sh} + ({py - ph})) * {x.in_w}L + ({px - pw});")
            dst = f"pad + {base} + q * {width}L"
            if sw == 1:
                out(f"__builtin_memcpy({dst} + {cols[0]}, in + {cols[0]}, {cols[1] - cols[0]} * sizeof(float));")
            else:
                out(f"float *d = {dst};")
                out("#pragma omp simd")
                out(f"for (long u = {cols[0]}; u < {cols[1]}; u++) d[u] = in[u * {sw}];")
            out.close()


def _update(tap: Tap, acc: str, src: str) -> str:
    return tap.update.format(acc=acc, src=src)


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


def view_offset(view) -> str:
    terms = [f"{view.offset}L"] + [f"o{d} * {s}L" for d, s in enumerate(view.outer_strides) if s]
    return " + ".join(terms)


__all__ = ["DEPTHWISE", "MAX_POOL", "SUM_POOL", "Correlation", "FullRows", "Planes", "Tap", "correlation_for",
           "depthwise_kernel", "fill_phases", "full_rows_for", "is_depthwise", "lanes_for", "plane_vector_types",
           "planes_for", "reads_position", "rows_per_pass", "tap_offset", "view_offset"]
