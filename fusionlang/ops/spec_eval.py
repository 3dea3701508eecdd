"""Evaluate access specs directly with NumPy, over the whole iteration grid.

This is the executable meaning of a Stmt. Tests compare it with each op's reference
implementation, so the loop form the backend compiles is checked against the NumPy
semantics op by op. It materializes domain x reduction grids: small shapes only.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from fusionlang.ops.access import Read, Stmt, acc_sym, i_sym, r_sym
from fusionlang.ops.scalar import evaluate

_IDENTITY = {"sum": 0.0, "prod": 1.0, "max": -np.inf, "min": np.inf}
_REDUCE: dict[str, Callable[..., np.ndarray]] = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


def run_stmts(stmts: list[Stmt], inputs: list[np.ndarray | None], out_types) -> list[np.ndarray]:
    """Outputs of a node computed from its statements."""
    outputs = [np.zeros(t.shape, dtype=t.dtype) for t in out_types]
    for stmt in stmts:
        _run_stmt(stmt, inputs, outputs[stmt.output])
    return outputs


def _grid(stmt: Stmt) -> dict[str, np.ndarray]:
    extents = tuple(stmt.domain) + tuple(stmt.reduce_extents)
    grids = np.indices(extents, dtype=np.int64) if extents else np.zeros((0,), np.int64)
    env = {}
    for k in range(len(stmt.domain)):
        env[i_sym(k).name] = grids[k]
    for k in range(len(stmt.reduce_extents)):
        env[r_sym(k).name] = grids[len(stmt.domain) + k]
    return env


def _load(read: Read, source: np.ndarray, env: dict, shape: tuple[int, ...]) -> np.ndarray:
    idx = [np.broadcast_to(np.asarray(evaluate(e, env, np.float64)).astype(np.int64), shape) for e in read.index]
    valid = np.ones(shape, bool)
    for axis, ix in enumerate(idx):
        valid &= (ix >= 0) & (ix < source.shape[axis])
    if read.cond is not None:
        valid &= np.broadcast_to(np.asarray(evaluate(read.cond, env, np.float64), bool), shape)
    if read.pad is None and not valid.all():
        raise AssertionError(f"read {read} goes out of range but has no pad value")
    clipped = [np.clip(ix, 0, max(n - 1, 0)) for ix, n in zip(idx, source.shape)]
    values = source[tuple(clipped)] if source.ndim else np.broadcast_to(source, shape)
    if read.pad is None:
        return values
    return np.where(valid, values, _pad_value(read.pad, source.dtype))


def _pad_value(pad: float, dtype: np.dtype) -> np.ndarray:
    if dtype.kind in "iu" and np.isinf(pad):
        # an infinite pad (the identity of max/min) saturates in integer tensors
        info = np.iinfo(dtype)
        return np.asarray(info.min if pad < 0 else info.max, dtype=dtype)
    return np.asarray(pad, dtype=dtype)


def _run_stmt(stmt: Stmt, inputs, out: np.ndarray) -> None:
    env = _grid(stmt)
    shape = tuple(stmt.domain) + tuple(stmt.reduce_extents)
    dtype = out.dtype if out.dtype.kind == "f" else np.float64
    for k, read in enumerate(stmt.reads):
        source = stmt.aux[read.source] if isinstance(read.source, str) else inputs[read.source]
        env[f"v{k}"] = _load(read, np.asarray(source), env, shape)
    body = np.broadcast_to(np.asarray(evaluate(stmt.body, env, dtype)), shape)
    if stmt.reduce is None:
        value = body
    else:
        axes = tuple(range(len(stmt.domain), len(shape)))
        acc = _reduce(stmt.reduce, body, axes) if axes else body
        # finalize sees the output grid: slice every bound array at reduction index 0
        final_env = {name: (arr[(...,) + (0,) * len(axes)] if np.ndim(arr) == len(shape) else arr)
                     for name, arr in env.items()}
        final_env[acc_sym().name] = acc
        expr = stmt.finalize if stmt.finalize is not None else acc_sym()
        value = np.broadcast_to(np.asarray(evaluate(expr, final_env, dtype)), tuple(stmt.domain))
    dom_env = {name: (arr[(...,) + (0,) * len(stmt.reduce_extents)] if np.ndim(arr) == len(shape) else arr)
               for name, arr in env.items()}
    where = [np.broadcast_to(np.asarray(evaluate(e, dom_env, np.float64)).astype(np.int64), tuple(stmt.domain))
             for e in stmt.write_index]
    out[tuple(where)] = np.asarray(value).astype(out.dtype, copy=False)


def _reduce(kind: str, body: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    if kind in ("max", "min"):
        # an empty box reduces to the identity
        return _REDUCE[kind](body, axis=axes, initial=_IDENTITY[kind])
    return _REDUCE[kind](body, axis=axes)


def identity_of(reduction: str) -> float:
    return _IDENTITY[reduction]


__all__ = ["identity_of", "run_stmts"]
