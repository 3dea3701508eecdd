"""The depthwise template's correlation method (a kernel far larger than its output plane:
a depthwise weight gradient, the forward's output gradient its kernel) against the direct
NumPy window reference, and where it is chosen."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_depthwise_planes import EPILOGUES, _check_against_the_reference, _conv, _out_size

from fusionlang.backend.depthwise_template import correlation_for, depthwise_kernel, planes_for


@st.composite
def weight_gradients(draw):
    """A depthwise weight gradient's convolution: an input plane 8x8 to 24x24, a kernel (the
    forward's output plane) of most of it, the forward's stride as dilation; the output (the
    forward's taps) up to 4x4, any padding on either side."""
    dilation = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    taps = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    pad = st.integers(0, 2)
    before, after = (draw(pad), draw(pad)), (draw(pad), draw(pad))
    size = (draw(st.integers(8, 24)), draw(st.integers(8, 24)))
    # the kernel that leaves `taps` outputs (or fewer, where the input is short)
    kernel = tuple(max(1, (n + b + a - s * (t - 1) - 1) // d + 1)
                   for n, b, a, s, t, d in zip(size, before, after, stride, taps, dilation))
    conv = dict(batch=draw(st.integers(1, 2)), channels=draw(st.integers(1, 5)), h=size[0], w=size[1],
                kernel=kernel, stride=stride, dilation=dilation, before=before, after=after)
    assume(min(_out_size(**conv)) >= 1)
    return conv


@settings(max_examples=40, deadline=None)
@given(conv=weight_gradients(), epilogue=st.sampled_from(sorted(EPILOGUES) + ["residual"]),
       vl=st.sampled_from([4, 8, 16]), seed=st.integers(0, 2**16))
def test_correlation_method_matches_the_window_reference(conv, epilogue, vl, seed):
    problem, _ = _conv(**conv)
    assume(correlation_for(problem.b, vl) is not None)
    _check_against_the_reference(conv, "depthwise", epilogue, vl, seed)


def test_a_weight_gradient_runs_the_correlation_method_and_a_forward_conv_does_not():
    # MobileNetV2's 3x3 weight gradients: the forward's 16x16 output plane at stride 2 over a
    # 32x32 input (a 4x4 output: the stride's leftover row), and 112x112 at stride 1
    for h, kernel, dilation in ((32, 16, 2), (112, 112, 1)):
        problem, _ = _conv(1, 8, h, h, (kernel, kernel), (1, 1), (dilation, dilation), (1, 1), (1, 1))
        layout = correlation_for(problem.b, 16)
        assert layout is not None and layout.length >= kernel * kernel
        assert "correlation" in depthwise_kernel("fl_dw", problem, vl=16).splitlines()[0]
    # forward convolutions keep their methods, a 7x7 kernel on a 2x2 plane too (49 taps for
    # 4 outputs: the lanes method's)
    for h, kernel in ((16, 3), (2, 7)):
        forward, _ = _conv(1, 16, h, h, (kernel, kernel), (1, 1), (1, 1), (kernel // 2,) * 2, (kernel // 2,) * 2)
        assert correlation_for(forward.b, 16) is None and planes_for(forward.b, 16) is not None
        assert "correlation" not in depthwise_kernel("fl_dw", forward, vl=16).splitlines()[0]
