"""Col2Im: sliding blocks (columns, as Im2Col lays them out) summed back into an image.

In pull form: each image element sums, over the offsets k of a block, the column entry of
the one block placement that puts offset k on it, if any: placement p along an axis with
p * stride - pad + k * dilation = y, inside the placements. A reduction over the block;
along a strided axis also over the placements (the one that fits is kept), so every index
stays affine.
"""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp

from fusionlang.ir.types import TensorType
from fusionlang.ops.access import Read, Stmt, i_sym, r_sym, v_sym
from fusionlang.ops.registry import Attr, OpCall, OpDef, register


def _geometry(call: OpCall) -> tuple[tuple, tuple, tuple, tuple, tuple, tuple]:
    """(image, block, dilations, pads begin, strides, placements per axis)."""
    x, a = call.input(0), call.attrs
    image, block = tuple(a["image_shape"]), tuple(a["block_shape"])
    rank = len(image)
    dilations = tuple(a["dilations"]) or (1,) * rank
    strides = tuple(a["strides"]) or (1,) * rank
    pads = tuple(a["pads"]) or (0,) * (2 * rank)
    if rank < 1 or len(block) != rank or len(dilations) != rank or len(strides) != rank or len(pads) != 2 * rank:
        raise call.fail(f"image_shape {list(image)}, block_shape {list(block)}, dilations, strides (one per axis) "
                        f"and pads (two per axis) disagree")
    if any(n < 1 for n in image + block + dilations + strides) or any(p < 0 for p in pads):
        raise call.fail("image and block sizes, dilations and strides must be >= 1, pads >= 0")
    placements = tuple((n + pads[d] + pads[rank + d] - dilations[d] * (b - 1) - 1) // strides[d] + 1
                       for d, (n, b) in enumerate(zip(image, block)))
    if any(p < 1 for p in placements):
        raise call.fail(f"a block of {list(block)} (dilated) does not fit the padded image {list(image)}")
    cells = prod(block)
    if x.rank != 3 or x.shape[1] % cells or x.shape[2] != prod(placements):
        raise call.fail(f"input must be [N, C * {cells}, {prod(placements)}] (a column per block placement), got {x}")
    return image, block, dilations, pads[:rank], strides, placements


def _infer(call: OpCall) -> list[TensorType]:
    image, block, *_ = _geometry(call)
    x = call.input(0)
    return [TensorType((x.shape[0], x.shape[1] // prod(block)) + image, x.dtype)]


def _reference(xs, attrs):
    x = xs[0]
    call = OpCall("col2im", "?", attrs, [TensorType.of(x)])
    image, block, dilations, pads, strides, placements = _geometry(call)
    n, channels = x.shape[0], x.shape[1] // prod(block)
    ends = tuple(attrs["pads"][len(image):]) if attrs["pads"] else (0,) * len(image)
    padded = np.zeros((n, channels) + tuple(i + b + e for i, b, e in zip(image, pads, ends)), np.float64)
    columns = x.reshape((n, channels) + block + placements).astype(np.float64)
    for k in np.ndindex(block):
        first = tuple(k[d] * dilations[d] for d in range(len(image)))
        window = tuple(slice(first[d], first[d] + strides[d] * (placements[d] - 1) + 1, strides[d])
                       for d in range(len(image)))
        padded[(slice(None), slice(None)) + window] += columns[(slice(None), slice(None)) + k]
    inside = tuple(slice(p, p + i) for p, i in zip(pads, image))
    return [np.ascontiguousarray(padded[(slice(None), slice(None)) + inside]).astype(x.dtype)]


def _access(call: OpCall) -> list[Stmt]:
    image, block, dilations, pads, strides, placements = _geometry(call)
    out = _infer(call)[0]
    rank = len(image)
    offset, place, conds, extents = sp.Integer(0), sp.Integer(0), [], list(block)
    strided: list[int] = []
    for d in range(rank):
        k, y = r_sym(d), i_sym(2 + d)
        reach = y + pads[d] - k * dilations[d]  # where the placement must start
        if strides[d] == 1:
            p = reach
        else:
            # the placement as a reduction index of its own, kept where it starts at reach: a
            # floor division of loop indices would leave the quasi-affine forms code needs
            p = r_sym(rank + len(strided))
            strided.append(d)
            extents.append(placements[d])
            conds.append(sp.Eq(p * strides[d], reach))
        conds += [reach >= 0, p < placements[d]]
        offset = offset * block[d] + k
        place = place * placements[d] + p
    index = (i_sym(0), i_sym(1) * prod(block) + offset, place)
    read = Read(0, index, pad=0.0, cond=sp.And(*conds))
    return [Stmt(0, out.shape, (read,), v_sym(0), reduce="sum", reduce_extents=tuple(extents))]


register(
    OpDef(
        name="col2im",
        inputs=("x",),
        attrs={"image_shape": Attr("ints", doc="the spatial shape of the image"),
               "block_shape": Attr("ints", doc="the spatial shape of a block"),
               "dilations": Attr("ints", (), "per axis (default 1)"),
               "pads": Attr("ints", (), "begin pads of every axis, then end pads (default 0)"),
               "strides": Attr("ints", (), "per axis (default 1)")},
        infer=_infer,
        reference=_reference,
        access=_access,
        doc="ONNX Col2Im: x [N, C * prod(block), placements] holds one column per block placement; each "
            "image element is the sum of the block entries placed on it.",
    )
)
