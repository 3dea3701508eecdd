"""The inputs a command runs a model on: ``--input NAME=FILE.npy`` arrays, and seeded
noise (``--random-inputs SEED``) for the inputs no file gives.

Seeded integers stay in what the model accepts (token ids below the embedding size,
masks of 0 and 1: :mod:`fusionlang.cli.input_ranges`). A file is read only when it is a
regular file holding one ``.npy`` array (no pickles, no ``.npz`` archives) whose header
agrees with its length, so a corrupt or hostile header cannot make NumPy allocate what
the file does not hold.
"""

from __future__ import annotations

import os
from typing import Callable

import numpy as np

from fusionlang.cli.input_ranges import integer_range
from fusionlang.cli.paths import path_error, readable_file, reason
from fusionlang.errors import InputError

_NPY_MAGIC = b"\x93NUMPY"


def read_feeds(graph, items: list[str] | None, random_seed: int | None) -> dict[str, np.ndarray]:
    """name -> array for every graph input: from ``items`` (NAME=FILE.npy), the rest
    seeded noise when ``random_seed`` is given (InputError when it is not)."""
    return complete_feeds(graph, read_input_files(items), random_seed)


def read_input_files(items: list[str] | None) -> dict[str, np.ndarray]:
    """name -> array of each ``--input NAME=FILE.npy``."""
    feeds = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise InputError(f"--input {item!r}: expected NAME=FILE.npy")
        try:
            feeds[name] = read_array(path)
        except InputError as exc:
            raise InputError(f"--input {name}: {exc}") from None
    return feeds


def complete_feeds(graph, given: dict[str, np.ndarray], random_seed: int | None) -> dict[str, np.ndarray]:
    """``given`` and, for every graph input it lacks, seeded noise when ``random_seed``
    is given (InputError when it is not)."""
    return complete_inputs({n: graph.types[n] for n in graph.inputs}, given, random_seed,
                           lambda name: integer_range(graph, name))


def complete_inputs(types: dict, given: dict[str, np.ndarray], random_seed: int | None,
                    integer_range_of: Callable[[str], tuple[int, int]]) -> dict[str, np.ndarray]:
    """:func:`complete_feeds` for inputs of ``types`` (name -> TensorType, in input
    order), seeded integers of input ``name`` in ``integer_range_of(name)``."""
    feeds = dict(given)
    missing = [n for n in types if n not in feeds]
    if missing and random_seed is None:
        shapes = ", ".join(f"{n} {types[n]}" for n in missing)
        raise InputError(f"missing inputs: {shapes} (pass --input NAME=FILE.npy, or --random-inputs SEED)")
    rng = np.random.default_rng(random_seed)
    for name in missing:
        ttype = types[name]
        low, high = (0, 4) if ttype.is_float or ttype.dtype == "bool" else integer_range_of(name)
        feeds[name] = random_array(rng, ttype, low, high)
    return feeds


def random_array(rng: np.random.Generator, ttype, low: int = 0, high: int = 4) -> np.ndarray:
    """Seeded values of ``ttype``: normal floats, random booleans, integers in [low, high)
    (what the model accepts: :func:`fusionlang.cli.input_ranges.integer_range`)."""
    if ttype.is_float:
        return rng.standard_normal(ttype.shape).astype(ttype.dtype)
    if ttype.dtype == "bool":
        return rng.integers(0, 2, ttype.shape).astype(bool)
    return rng.integers(low, high, ttype.shape).astype(ttype.dtype)


def read_array(path: str) -> np.ndarray:
    """The one array of the ``.npy`` file ``path``; InputError naming the path otherwise."""
    readable_file(path)
    try:
        with open(path, "rb") as f:
            _check_header(f, os.fstat(f.fileno()).st_size, path)
            f.seek(0)
            array = np.load(f, allow_pickle=False)
    except InputError:
        raise
    except OSError as exc:
        raise path_error("read", path, reason(exc)) from None
    except (ValueError, EOFError) as exc:
        raise path_error("read", path, f"not a valid .npy file ({_first_line(exc)})") from None
    return array


def _check_header(f, size: int, path: str) -> None:
    """Refuse a file that is not .npy, or whose header declares more data than it holds."""
    if f.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
        raise path_error("read", path, "not a .npy file (an .npz archive, a pickle or other data)")
    f.seek(0)
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    else:  # 3.0 only allows UTF-8 field names of structured dtypes, which no graph input has
        raise path_error("read", path, f".npy format version {version[0]}.{version[1]} is not supported")
    if dtype.hasobject:
        raise path_error("read", path, "it holds Python objects (pickled data), which are never loaded")
    declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
    held = size - f.tell()
    if declared > held:
        raise path_error("read", path, f"its header declares shape {list(shape)} ({declared} bytes) "
                                       f"but the file holds {max(held, 0)} bytes of data")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
