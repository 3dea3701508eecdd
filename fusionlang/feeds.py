"""What a feed must be: an array of each named input's shape, in a dtype that holds its
values. Here, not in :mod:`fusionlang.ops`, because a loaded artifact
(:mod:`fusionlang.backend.artifact`) checks its feeds with no graph and without the
op registry's imports; the reference interpreter and compiled graphs check them here too,
so all three refuse a feed with the same words."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from fusionlang.errors import InputError


def check_inputs(inputs: Mapping[str, tuple[tuple[int, ...], np.dtype]],
                 feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``feeds`` checked against ``inputs`` (name -> (shape, dtype), in input order):
    every input given, nothing else, each of its shape; an array of another dtype is
    converted when that keeps its values. InputError otherwise."""
    names = list(inputs)
    missing = [name for name in names if name not in feeds]
    if missing:
        raise InputError(f"missing input {missing[0]!r} (graph inputs: {', '.join(names)})")
    extra = sorted(set(feeds) - set(names))
    if extra:
        raise InputError(f"unknown input {extra[0]!r} (graph inputs: {', '.join(names)})")
    arrays = {}
    for name, (shape, dtype) in inputs.items():
        array = np.asarray(feeds[name])
        if tuple(array.shape) != tuple(shape):
            raise InputError(f"input {name!r}: expected shape {list(shape)}, got {list(array.shape)}")
        if array.dtype != dtype:
            array = _converted(name, array, dtype)
        arrays[name] = array
    return arrays


def _converted(name: str, array: np.ndarray, want: np.dtype) -> np.ndarray:
    """``array`` as ``want`` when the conversion keeps every value (integers exactly,
    finite floats finite: float64 feeds for a float32 input round, as users mean them), else
    an InputError naming the first value it would change. NumPy's same-kind cast turned
    int64 300 into int8 44 without a word."""
    integers = array.dtype.kind in "iu" and want.kind in "iu"  # signed <-> unsigned: the values decide
    if not (integers or np.can_cast(array.dtype, want, casting="same_kind")):
        # (NumPy saves bfloat16 as raw 2-byte records, which load back as void)
        hint = "; pass bfloat16 values as float32, which .npy files can hold" if want.name == "bfloat16" else ""
        raise InputError(f"input {name!r}: expected dtype {want.name}, got {array.dtype}{hint}")
    with np.errstate(all="ignore"):
        out = array.astype(want)
        if want.kind in "iub":
            changed = out.astype(array.dtype) != array
        else:  # a float: only a finite value that becomes infinite is lost
            changed = np.isfinite(array.astype(np.float64)) & ~np.isfinite(out.astype(np.float64))
    if changed.any():
        index = tuple(int(i) for i in np.argwhere(changed)[0])
        raise InputError(f"input {name!r}: expected dtype {want.name}, got {array.dtype} holding {array[index].item()!r} "
                         f"at {list(index)}, which {want.name} cannot hold (convert the feed first)")
    return out


__all__ = ["check_inputs"]
