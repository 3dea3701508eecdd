"""The depthwise kernel against a direct convolution: both of its methods (the padded phase
planes, the row loop for wide strided rows or large planes), every attribute, an epilogue."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gemm_template import _conv_reference

from fusionlang.backend import depthwise_template
from fusionlang.backend.ccompile import build_library, load_library
from fusionlang.backend.depthwise_template import depthwise_kernel, is_depthwise
from fusionlang.backend.epilogue import Text
from fusionlang.backend.gemm_template import Epilogue, GemmProblem, Im2Col, Operand


def _problem(batch, channels, h, w, kernel, stride, dilation, pads):
    oh = (h + 2 * pads[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    ow = (w + 2 * pads[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    taps = kernel[0] * kernel[1]
    return GemmProblem(1, oh * ow, taps, Operand(taps, 1, 0, (0, taps)),
                       Im2Col(1, h, w, kernel, stride, dilation, pads, oh, ow, 0, (channels * h * w, h * w)),
                       Operand(oh * ow, 1, 0, (channels * oh * ow, oh * ow)), (batch, channels)), (oh, ow)


@settings(max_examples=25)
@given(batch=st.integers(1, 2), channels=st.integers(1, 5), h=st.integers(1, 12), w=st.integers(1, 12),
       kernel=st.tuples(st.integers(1, 3), st.integers(1, 5)), stride=st.tuples(st.integers(1, 2), st.integers(1, 3)),
       dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)), pads=st.tuples(st.integers(0, 2), st.integers(0, 2)),
       plane_limit=st.sampled_from([0, 128 * 1024]), seed=st.integers(0, 2**16))
def test_depthwise_kernel_matches_a_direct_convolution(batch, channels, h, w, kernel, stride, dilation, pads,
                                                       plane_limit, seed):
    problem, (oh, ow) = _problem(batch, channels, h, w, kernel, stride, dilation, pads)
    if oh < 1 or ow < 1:
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, channels, h, w)).astype(np.float32)
    weight = rng.standard_normal((channels, 1) + kernel).astype(np.float32)
    bias = rng.standard_normal(channels).astype(np.float32)
    epi = Epilogue((Text("v = v + bias[o1];"), Text("v = v > 0.0f ? v : 0.1f * v;")), ("const float *restrict bias",))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(depthwise_template, "PLANE_BYTES", plane_limit)  # 0: always the row body
        src = "#include <stdlib.h>\n" + depthwise_kernel("fl_dw_test", problem, epi)
    fn = load_library(build_library([src])).fl_dw_test
    y = np.full((batch, channels, oh, ow), np.nan, np.float32)
    assert fn(*(a.ctypes.data_as(ctypes.c_void_p) for a in (weight, x, y, bias))) == 0
    want = _conv_reference(x, weight, stride, dilation, pads, channels) + bias[None, :, None, None]
    np.testing.assert_allclose(y, np.where(want > 0, want, 0.1 * want), rtol=1e-4, atol=1e-4)


def test_only_one_channel_per_group_is_depthwise():
    problem, _ = _problem(1, 4, 6, 6, (3, 3), (1, 1), (1, 1), (1, 1))
    assert is_depthwise(problem)
    gemm = GemmProblem(2, 36, 9, Operand(9, 1, 0, (0, 18)),
                       Im2Col(1, 6, 6, (3, 3), (1, 1), (1, 1), (1, 1), 6, 6, 0, (144, 36)),
                       Operand(36, 1, 0, (288, 72)), (1, 4))
    assert not is_depthwise(gemm)
    with pytest.raises(ValueError, match="depthwise"):
        depthwise_kernel("k", gemm)
