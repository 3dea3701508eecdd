"""Run compiled C kernels built with AddressSanitizer (executed in a subprocess that has
libasan preloaded; see test_asan.py). Usage: asan_child.py [small | MODEL...]"""

from __future__ import annotations

import sys

import numpy as np
from helpers import gelu, layer_norm, random_feeds, softmax

import fusionlang.backend as backend
from fusionlang import reference
from fusionlang.engine.plan import per_node_plan, single_group_plan
from fusionlang.ops import GraphBuilder


def small_graphs():
    b = GraphBuilder("norms")
    x = b.input("x", (7, 33))
    y = softmax(b, x)
    z = layer_norm(b, y, b.constant(np.ones(33, np.float32)), b.constant(np.zeros(33, np.float32)))
    b.output(gelu(b, z), softmax(b, x, log=True))
    yield b.build()
    b = GraphBuilder("windows")
    x = b.input("x", (2, 3, 11, 11))
    w = b.constant(np.random.default_rng(0).standard_normal((5, 3, 3, 3)).astype(np.float32))
    c = b.relu(b.conv(x, w, pads=[1, 1, 1, 1], strides=[2, 2]))
    p = b.max_pool(b.add(c, b.constant(np.float32(1.0))), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    a = b.average_pool(c, kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 1, 1])
    g = b.gather(b.flatten(p, axis=1), b.constant(np.array([4, -1, 0], np.int64)), axis=1)
    b.output(g, b.lrn(a, size=3), b.concat(c, c, axis=1))
    yield b.build()
    # depthwise convs and pools on the plane method: every tap's furthest read of the
    # padded phase planes, at strides 1 and 2, odd planes, dilation, asymmetric pads
    b = GraphBuilder("depthwise")
    x = b.input("x", (2, 4, 9, 9))
    rng = np.random.default_rng(1)
    w3 = b.constant(rng.standard_normal((4, 1, 3, 3)).astype(np.float32))
    w5 = b.constant(rng.standard_normal((4, 1, 5, 5)).astype(np.float32))
    d1 = b.relu(b.conv(x, w3, pads=[1, 1, 1, 1], group=4))
    d2 = b.conv(d1, w5, pads=[2, 1, 2, 2], strides=[2, 2], group=4)
    d3 = b.conv(x, w3, pads=[2, 2, 2, 2], dilations=[2, 2], strides=[2, 1], group=4)
    b.output(d2, d3, b.max_pool(d1, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    yield b.build()
    # the full-rows method (rows of a vector or more at 16 floats a vector; 14 wide with
    # 7x7 taps): each pass's furthest reads of the padded plane, at strides 1 and 2, a
    # dilated window, asymmetric pads, a pool
    b = GraphBuilder("depthwise_full_rows")
    x, z = b.input("x", (1, 3, 21, 40)), b.input("z", (1, 3, 14, 14))
    w3, w7 = (b.constant(np.random.default_rng(k).standard_normal((3, 1, k, k)).astype(np.float32)) for k in (3, 7))
    outputs = [b.relu(b.conv(x, w3, pads=[1, 0, 1, 2], group=3)), b.conv(z, w7, pads=[3] * 4, group=3)]
    outputs += [b.conv(x, w3, pads=[1] * 4, strides=[2, 2], group=3),
                b.conv(x, w3, pads=[2] * 4, dilations=[2, 2], group=3),
                b.max_pool(x, kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)]
    b.output(*outputs)
    yield b.build()
    # 4x4 planes of 20 channels: 16 in lanes (gathered across the channels), 4 on their own
    b = GraphBuilder("depthwise_lanes")
    x = b.input("x", (2, 20, 4, 4))
    w = b.constant(np.random.default_rng(2).standard_normal((20, 1, 3, 3)).astype(np.float32))
    b.output(b.relu(b.conv(x, w, pads=[1, 1, 1, 1], group=20)))
    yield b.build()
    # dense stride-1 convs read in place from their padded planes: the last rows' vectors
    # read past the planes (a 7x7 plane, a dilated window, pads on one side)
    b = GraphBuilder("dense_in_place")
    x = b.input("x", (1, 8, 7, 7))
    rng = np.random.default_rng(3)
    c1 = b.relu(b.conv(x, b.constant(rng.standard_normal((8, 8, 3, 3)).astype(np.float32)), pads=[1, 1, 1, 1]))
    c2 = b.conv(c1, b.constant(rng.standard_normal((6, 8, 3, 3)).astype(np.float32)), pads=[2, 0, 2, 0],
                dilations=[2, 1])
    b.output(b.add(c1, x), c2)
    yield b.build()
    # pointwise convs reading their input's rows in place (few output channels; a plane of
    # 529 floats, 33 vectors and one: the last sliver copied, its last column by the column
    # kernel) and a 7x7 plane's 49 columns (3 vectors and the column kernel's one)
    b = GraphBuilder("pointwise_rows")
    x, z = b.input("x", (1, 16, 23, 23)), b.input("z", (1, 24, 7, 7))
    rng = np.random.default_rng(4)
    p1 = b.relu(b.conv(x, b.constant(rng.standard_normal((16, 16, 1, 1)).astype(np.float32))))
    p2 = b.conv(p1, b.constant(rng.standard_normal((24, 16, 1, 1)).astype(np.float32)))
    b.output(p2, b.conv(z, b.constant(rng.standard_normal((40, 24, 1, 1)).astype(np.float32))))
    yield b.build()


def check(graph, feeds, plan) -> None:
    got = backend.compile(plan, sanitize=True).run(feeds)
    want = reference.run(graph, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-4, err_msg=name)


def canary() -> None:
    """Write one element past a buffer: ASan must catch it (proves the setup works)."""
    import ctypes

    from fusionlang.backend.ccompile import build_library, load_library

    lib = load_library(build_library(["void poke(float* p, long n) { p[n] = 1.0f; }\n"], sanitize=True))
    buf = np.zeros(16, np.float32)
    lib.poke(ctypes.c_void_p(buf.ctypes.data), ctypes.c_long(16))


def main(args) -> int:
    if args == ["canary"]:
        canary()
    elif args == ["small"]:
        for graph in small_graphs():
            feeds = random_feeds(graph)
            check(graph, feeds, per_node_plan(graph))
            check(graph, feeds, single_group_plan(graph))
    else:
        from light import feeds_and_expected, fused_plan

        for name in args:
            plan = fused_plan(name)
            feeds, expected = feeds_and_expected(name)
            feeds = {k: v for k, v in feeds.items() if k in plan.graph.inputs}
            out = backend.compile(plan, sanitize=True).run(feeds)[plan.graph.outputs[0]]
            np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-5)
    print("asan-clean")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
