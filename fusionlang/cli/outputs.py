"""Writing a run's outputs as ``DIR/<file>.npy``: the file name made from each output's
tensor name.

A tensor name comes from the model and may be anything: a path (``../../x``), control
characters, 5,000 characters, or two names that differ only in what is replaced. The
file name therefore

- keeps ASCII letters, digits, ``_``, ``.`` and ``-`` and replaces every other character
  with ``_``, and drops leading dots (no hidden files, no ``..``); an empty result is
  ``output``;
- is cut to :data:`MAX_STEM_BYTES` bytes, ending in ``-`` and 8 hex digits of the name's
  SHA-256 when cut, so long names that share a prefix stay apart;
- gets ``-2``, ``-3``, ... when it equals, ignoring case (case-insensitive file systems),
  the file of another output. Names that need no change keep their name; the others
  yield to them.

``run`` prints (and puts in ``--json`` as ``files``) which output went to which file.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from fusionlang.cli.paths import output_directory, writing

#: longest file name stem (bytes; ".npy" comes on top): below every file system's 255
MAX_STEM_BYTES = 200

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def safe_stem(name: str) -> str:
    """The file stem for tensor ``name``, before de-duplication (see the module docstring)."""
    stem = _UNSAFE.sub("_", name).lstrip(".") or "output"
    if len(stem) <= MAX_STEM_BYTES:
        return stem
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{stem[:MAX_STEM_BYTES - len(digest) - 1]}-{digest}"


def file_stems(names: list[str]) -> dict[str, str]:
    """output name -> a distinct file stem (case-insensitively distinct)."""
    stems = {name: safe_stem(name) for name in names}
    taken: set[str] = set()
    chosen: dict[str, str] = {}
    # names that are already safe file names claim them first
    for name in sorted(names, key=lambda n: stems[n] != n):
        stem = stems[name]
        candidate, k = stem, 1
        while candidate.lower() in taken:
            k += 1
            suffix = f"-{k}"
            candidate = stem[:MAX_STEM_BYTES - len(suffix)] + suffix
        taken.add(candidate.lower())
        chosen[name] = candidate
    return {name: chosen[name] for name in names}


def write_outputs(outputs: dict[str, np.ndarray], directory: str) -> dict[str, Path]:
    """Save every output under ``directory`` (created if missing); output name -> file.
    A bfloat16 output is saved as float32 (exactly): the .npy format has no bfloat16, NumPy
    would write raw 2-byte records that load back as an opaque void dtype."""
    folder = output_directory(directory)
    written = {}
    for name, stem in file_stems(list(outputs)).items():
        path = folder / f"{stem}.npy"
        with writing(path):
            array = outputs[name]
            np.save(path, array.astype(np.float32) if array.dtype.name == "bfloat16" else array)
        written[name] = path
    return written
