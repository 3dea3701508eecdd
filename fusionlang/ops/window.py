"""Sliding-window geometry shared by conv and pooling ops (N-d, strides, pads, dilations)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy on first use: registering the op does not need it
    from fusionlang.ops.lazy import sp
from numpy.lib.stride_tricks import sliding_window_view

from fusionlang.ops.access import i_sym, r_sym
from fusionlang.ops.registry import Attr, OpCall

WINDOW_ATTRS = {
    "kernel_shape": Attr("ints", (), "window extent per spatial axis (conv: taken from the weight)"),
    "strides": Attr("ints", (), "default 1 per spatial axis"),
    "pads": Attr("ints", (), "begin pads then end pads; default 0"),
    "dilations": Attr("ints", (), "default 1 per spatial axis"),
}


@dataclass(frozen=True)
class Window:
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    dilations: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.kernel)

    def output_shape(self, spatial: tuple[int, ...], ceil_mode: bool = False) -> tuple[int, ...]:
        out = []
        for n, k, s, pb, pe, d in zip(spatial, self.kernel, self.strides, self.pads_begin, self.pads_end,
                                      self.dilations):
            span = n + pb + pe - d * (k - 1) - 1
            size = (math.ceil(span / s) if ceil_mode else span // s) + 1
            if ceil_mode and (size - 1) * s >= n + pb:
                size -= 1  # the last window would start in the end padding
            out.append(size)
        return tuple(out)

    def input_index(self, first_out_axis: int, first_red_axis: int) -> tuple[sp.Expr, ...]:
        """Spatial input index of output position i and window offset r."""
        return tuple(
            i_sym(first_out_axis + a) * s - pb + r_sym(first_red_axis + a) * d
            for a, (s, pb, d) in enumerate(zip(self.strides, self.pads_begin, self.dilations))
        )

    def windows(self, x: np.ndarray, pad_value: float, out_spatial: tuple[int, ...]) -> np.ndarray:
        """View of x (N, C, *spatial) as (N, C, *out_spatial, *kernel) windows."""
        spatial_axes = tuple(range(2, 2 + self.rank))
        widths = [(0, 0), (0, 0)]
        for a, n in enumerate(x.shape[2:]):
            needed = (out_spatial[a] - 1) * self.strides[a] + self.dilations[a] * (self.kernel[a] - 1) + 1
            end = max(self.pads_end[a], needed - n - self.pads_begin[a])
            widths.append((self.pads_begin[a], end))
        if any(w != (0, 0) for w in widths):
            x = np.pad(x, widths, constant_values=pad_value)
        spans = [d * (k - 1) + 1 for k, d in zip(self.kernel, self.dilations)]
        view = sliding_window_view(x, spans, axis=spatial_axes)
        select = [slice(None), slice(None)]
        select += [slice(0, (o - 1) * s + 1, s) for o, s in zip(out_spatial, self.strides)]
        select += [slice(None, None, d) for d in self.dilations]
        return view[tuple(select)]


def window_of(call: OpCall, spatial_rank: int, kernel: tuple[int, ...]) -> Window:
    a = call.attrs
    strides = a["strides"] or (1,) * spatial_rank
    dilations = a["dilations"] or (1,) * spatial_rank
    pads = a["pads"] or (0,) * (2 * spatial_rank)
    if len(kernel) != spatial_rank:
        raise call.fail(f"kernel_shape {list(kernel)} does not match {spatial_rank} spatial axes")
    for name, value, want in (("strides", strides, spatial_rank), ("dilations", dilations, spatial_rank),
                              ("pads", pads, 2 * spatial_rank)):
        if len(value) != want:
            raise call.fail(f"{name} {list(value)} should have {want} entries")
    for name, value in (("kernel_shape", kernel), ("strides", strides), ("dilations", dilations)):
        if min(value, default=1) < 1:
            raise call.fail(f"{name} {list(value)} must be positive")
    if min(pads, default=0) < 0:
        raise call.fail(f"pads {list(pads)} must be non-negative")
    return Window(tuple(kernel), tuple(strides), tuple(pads[:spatial_rank]), tuple(pads[spatial_rank:]),
                  tuple(dilations))
