"""The models of a sweep: a folder's ``.onnx`` files, or a text file listing paths."""

from __future__ import annotations

from pathlib import Path

from fusionlang.errors import InputError


def zoo_models(zoo: str) -> list[str]:
    """The model paths ZOO names, in a stable order: a folder's ``*.onnx`` files by name,
    or a text file's lines (paths relative to the file; blank lines and ``#`` comments
    skipped). InputError when ZOO is neither or names no model; a listed model that
    does not exist is kept (its row fails), so one typo does not stop the sweep."""
    path = Path(zoo)
    if path.is_dir():
        models = sorted(str(p) for p in path.glob("*.onnx") if p.is_file())
    elif path.is_file():
        models = _listed(path)
    else:
        raise InputError(f"sweep: {zoo!r} is neither a folder of .onnx models nor a file listing them")
    if not models:
        raise InputError(f"sweep: {zoo!r} holds no model (a folder of .onnx files, or a text file of paths)")
    return models


def _listed(listing: Path) -> list[str]:
    try:
        text = listing.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"sweep: cannot read the model list {str(listing)!r}: {exc}") from None
    models = []
    for number, line in enumerate(text.splitlines(), 1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        if "\0" in entry:
            raise InputError(f"{listing}:{number}: a model path holds a NUL byte")
        models.append(str(listing.parent / entry))
    return models
