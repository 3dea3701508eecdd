"""Collecting a compiled graph's outputs after a run, the same way for every runtime."""

from __future__ import annotations

from typing import Callable

import numpy as np


def stored_as(buffers, name: str) -> tuple[str, str]:
    """(kind, value) of the storage output ``name`` is read from: its buffer's kind
    ("input", "const", "arena") and the value it re-labels through views, if any; a
    value with no buffer is a constant."""
    root = buffers.root(name) if name in buffers.buffers else name
    buffer = buffers.buffers.get(root)
    return (buffer.kind if buffer is not None else "const"), root


def gather_outputs(graph, buffers, constants, feeds, read_buffer: Callable) -> dict[str, np.ndarray]:
    """Fresh arrays for the graph's outputs: an output that is a fed input or a constant
    (possibly through views) is copied from there, any other is ``read_buffer(name,
    buffer, type)`` from the runtime's own memory."""
    out = {}
    for name in graph.outputs:
        t = graph.types[name]
        kind, root = stored_as(buffers, name)
        buffer = buffers.buffers.get(root)
        if kind == "input":
            out[name] = feeds[root].reshape(t.shape).copy()
        elif kind == "const":
            out[name] = np.asarray(constants[root]).reshape(t.shape).copy()
        else:
            out[name] = read_buffer(name, buffer, t)
    return out


__all__ = ["gather_outputs", "stored_as"]
