"""Paths the user gave on the command line: every OS error on one is bad input.

A model, an ``--input`` array, a ``--json`` or ``--report`` file, an ``--output-dir``:
whatever the operating system says about them (missing, a directory, a fifo, a device,
no permission, disk full) becomes one InputError line naming the path, exit 2:

    fusionlang: error: cannot write 'out/plan.json': no such directory 'out'

Inputs must be regular files: a fifo or a device would block or never end. Outputs are
checked before the work starts (a missing folder should not cost a compile first), and
the write itself maps what it raises, for what no check can foresee (a full disk).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from fusionlang.errors import InputError


def path_error(action: str, path, reason: str) -> InputError:
    """``cannot <action> 'PATH': <reason>`` (the path as repr: control characters escaped)."""
    return InputError(f"cannot {action} {os.fspath(path)!r}: {reason}")


def reason(exc: Exception) -> str:
    """What the operating system said, without the errno and the path it repeats (a
    ValueError from os: a NUL byte in the path)."""
    if isinstance(exc, OSError):
        return exc.strerror.lower() if exc.strerror else str(exc)
    return "the path contains a NUL byte" if "null" in str(exc).lower() else str(exc)


def readable_file(path, what: str = "") -> str:
    """``path`` if it names a regular file this process can open; InputError otherwise.
    ``what`` ("model", ...) goes into the message: ``cannot read model 'PATH': ...``."""
    action = f"read {what}".rstrip()
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise path_error(action, path, reason(exc)) from None
    if stat.S_ISDIR(mode):
        raise path_error(action, path, "it is a directory")
    if not stat.S_ISREG(mode):
        raise path_error(action, path, "not a regular file (a fifo, socket or device)")
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise path_error(action, path, reason(exc)) from None
    return os.fspath(path)


def check_writable_file(path) -> Path:
    """Refuse, before any work, an output file that cannot be created: its folder is
    missing or not a folder, or the path is a directory. (A device is the user's choice:
    ``--json /dev/null`` discards the plan; ``/dev/full`` fails as the write does.)"""
    target = Path(path)
    try:
        if target.is_dir():
            raise path_error("write", path, "it is a directory")
        folder = target.parent
        if not folder.exists():
            raise path_error("write", path, f"no such directory {str(folder)!r}")
        if not folder.is_dir():
            raise path_error("write", path, f"{str(folder)!r} is not a directory")
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte
        raise path_error("write", path, reason(exc)) from None
    return target


@contextlib.contextmanager
def writing(path):
    """Map the OS errors of writing ``path`` inside the block to InputError."""
    try:
        yield Path(path)
    except OSError as exc:
        raise path_error("write", path, reason(exc)) from None


def write_text(path, text: str) -> Path:
    """Write ``text`` (UTF-8) to the user's ``path``; InputError on any OS error."""
    target = check_writable_file(path)
    with writing(path):
        target.write_text(text, encoding="utf-8")
    return target


def check_output_directory(path) -> None:
    """Refuse, before any work, a folder that cannot be created: the path or its nearest
    existing ancestor is not a directory."""
    try:
        folder = Path(path)
        if folder.exists() and not folder.is_dir():
            raise path_error("write to", path, "not a directory")
        ancestor = next((a for a in folder.absolute().parents if a.exists()), None)
        if ancestor is not None and not ancestor.is_dir():
            raise path_error("write to", path, f"{str(ancestor)!r} is not a directory")
    except (OSError, ValueError) as exc:
        raise path_error("write to", path, reason(exc)) from None


def output_directory(path) -> Path:
    """The folder ``path``, created with its parents if missing; InputError when it is a
    file, a device (/dev/null) or cannot be created."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise path_error("write to", path, "not a directory") from None
    except (OSError, ValueError) as exc:
        raise path_error("write to", path, reason(exc)) from None
    if not folder.is_dir():
        raise path_error("write to", path, "not a directory")
    return folder

