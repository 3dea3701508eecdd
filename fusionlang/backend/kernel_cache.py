"""The on-disk cache of compiled kernels: where it is, when it is trusted, what it holds.

Where: ``$FUSIONLANG_CACHE_DIR``, else ``$XDG_CACHE_HOME/fusionlang``, else
``~/.cache/fusionlang``; entries live in its ``c/`` subdirectory. Both are created with
mode 0700.

Trust: the cache loads shared libraries, so whoever can write into it can run code in
every process that uses it. A directory (the root or ``c/``) owned by another user, or
writable by group or others, is therefore not used; nor is one that cannot be created or
written (a read-only directory, a path that is a file, a full disk). Kernels then compile
in a private temporary directory of this process, removed at exit, and one line on
stderr says why: a cache problem never stops a compile.

Entries: each is named by the first digits of its key, the SHA-256 of what produced it
(fusionlang's version, compiler, processor, flags, source: :func:`entry_key`). The check
file beside it (``NAME.sha256``) holds the full key and the SHA-256 of the entry's bytes,
and the entry is used only when both agree: a truncated or half-written entry, or one
copied from another key together with its check file, is built again, never loaded.
Builds happen in scratch directories (``tmp-build-PID-*``) inside the cache and enter it
by atomic renames; scratch left by a killed build is removed when a later process opens
the cache.

Size: after each publish, least recently used entries (by mtime; a hit touches its entry)
are removed until the cache holds at most ``$FUSIONLANG_CACHE_MAX_BYTES`` (default
2 GiB). Entries used within :data:`BUILD_WINDOW_S` are kept, so a build never loses the
objects it is about to link.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import stat
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from fusionlang.errors import CodegenError, InputError
from fusionlang.version import VERSION

DIR_VARIABLE = "FUSIONLANG_CACHE_DIR"
LIMIT_VARIABLE = "FUSIONLANG_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 2 * 1024**3

#: how long one build may take: older scratch directories of finished processes are
#: debris, and an entry used more recently may be waiting for its link, so is not evicted
BUILD_WINDOW_S = 3600

SCRATCH_PREFIX = "tmp-build-"
CHECK_SUFFIX = ".sha256"

#: hex digits of an entry's key in its file name
NAME_KEY_DIGITS = 24

_lock = threading.RLock()
_unwritable: dict[str, str] = {}  # entry directory -> why writing to it failed (this process)
_cleaned: set[str] = set()  # entry directories whose debris this process removed
_noticed: set[str] = set()  # entry directories this process said it does not use
_private: Path | None = None


def cache_root() -> Path:
    if os.environ.get(DIR_VARIABLE):
        return Path(os.environ[DIR_VARIABLE])
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # the XDG spec: a relative path is invalid and ignored
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fusionlang"


def entries_dir() -> Path:
    """The shared directory of entries (whether or not it can be used)."""
    return cache_root() / "c"


def cache_dir() -> Path:
    """Where entries are read and published: :func:`entries_dir` when it is private to this
    user and writable, else this process's private temporary directory (said once on stderr)."""
    entries = entries_dir()
    with _lock:
        problem = cache_problem(entries)
        if problem is None:
            return entries
        if str(entries) not in _noticed:
            _noticed.add(str(entries))
            print(f"fusionlang: kernel cache {problem}; not using it: compiling in a private temporary "
                  "directory, removed at exit", file=sys.stderr)
        return _private_dir()


def cache_problem(entries: Path) -> str | None:
    """Why ``entries`` (and the cache root above it) must not be used, or None; creates them
    (mode 0700) where missing and, once a process, removes the debris of killed builds."""
    with _lock:
        if str(entries) in _unwritable:
            return _unwritable[str(entries)]
        for path in (entries.parent, entries):
            problem = _create_private(path) or _trust_problem(path)
            if problem:
                return problem
        if str(entries) not in _cleaned:
            _cleaned.add(str(entries))
            _remove_debris(entries)
    return None


def _create_private(path: Path) -> str | None:
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except FileExistsError:
        pass  # not a directory: _trust_problem names it
    except OSError as exc:
        return f"{path} cannot be created ({exc.strerror or exc})"
    return None


def _trust_problem(path: Path) -> str | None:
    """Why libraries must not be loaded from directory ``path``: someone else could have
    put them there. A symbolic link is followed only when it is this user's own."""
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            if info.st_uid != os.getuid():
                return f"{path} is a symbolic link owned by uid {info.st_uid}"
            info = os.stat(path)
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror or exc})"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a directory"
    if info.st_uid != os.getuid():
        return f"{path} is owned by uid {info.st_uid}"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def _private_dir() -> Path:
    global _private
    if _private is None:
        _private = Path(tempfile.mkdtemp(prefix="fusionlang-kernels-"))  # mode 0700
        atexit.register(shutil.rmtree, _private, ignore_errors=True)
    return _private


def _remove_debris(entries: Path) -> None:
    """Scratch directories of builds that were killed (old, and their process is gone)."""
    stale = time.time() - BUILD_WINDOW_S
    for child in _scan(entries):
        if _is_debris(child, stale):
            shutil.rmtree(child.path, ignore_errors=True)


def _is_debris(child: os.DirEntry, stale: float) -> bool:
    try:
        return (child.name.startswith(SCRATCH_PREFIX) and child.is_dir(follow_symlinks=False)
                and child.stat(follow_symlinks=False).st_mtime < stale and not _builder_alive(child.name))
    except OSError:
        return False  # removed meanwhile: by its own build, or another process's cleanup


def _builder_alive(scratch_name: str) -> bool:
    pid = scratch_name[len(SCRATCH_PREFIX):].split("-")[0]
    if not pid.isdigit() or int(pid) >= 2**31:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, as another user's process
    return True


def _scan(directory: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as found:
            return list(found)
    except OSError:
        return []


# -- entries ---------------------------------------------------------------------------


def entry_key(*parts: str) -> str:
    """The key of an entry produced from ``parts`` (compiler, flags, source...): the full
    SHA-256, in hex, of them and fusionlang's version."""
    h = hashlib.sha256()
    for part in (VERSION, *parts):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def entry_path(key: str, prefix: str = "", suffix: str = "") -> Path:
    return cache_dir() / f"{prefix}{key[:NAME_KEY_DIGITS]}{suffix}"


def _check_file(path: Path) -> Path:
    return path.with_name(path.name + CHECK_SUFFIX)


def sha256_hex(data: bytes) -> str:
    """The SHA-256 that binds bytes to what was built (check files, saved artifacts)."""
    return hashlib.sha256(data).hexdigest()


def _digest(path: Path) -> str:
    return sha256_hex(path.read_bytes())


def verified(path: Path, key: str | None = None) -> bool:
    """Is ``path`` an entry whose check file binds its bytes to its key: the key in its
    name, and ``key`` when given? (A file copied from another entry is not.)"""
    try:
        recorded_key, digest = _check_file(path).read_text().split()
        # an entry and check file copied under another name carry the key they were built for
        if recorded_key[:NAME_KEY_DIGITS] not in path.name or (key is not None and key != recorded_key):
            return False
        return digest == _digest(path)
    except (OSError, ValueError):
        return False


def cached_build(path: Path, build, key: str) -> Path:
    """``path`` when the cache holds it intact under ``key``, else built by ``build(out,
    tmp)`` (write ``out``; ``tmp`` is a private scratch directory) and published. Where the
    cache cannot be written, it is built in this process's private directory instead."""
    if verified(path, key):
        _touch(path)
        return path
    try:
        return _publish(path, build, key)
    except OSError as exc:
        if path.parent == _private:
            raise CodegenError(f"cannot write compiled kernels to {path.parent}: {exc.strerror or exc}") from None
        with _lock:
            _unwritable.setdefault(str(path.parent), f"{path.parent} cannot be written ({exc.strerror or exc})")
        return cached_build(cache_dir() / path.name, build, key)


def _publish(path: Path, build, key: str) -> Path:
    """Build into a scratch directory, then rename the entry, then its check file: a
    reader between the two renames sees a mismatch and builds once more; it never loads a
    file that is not whole."""
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=f"{SCRATCH_PREFIX}{os.getpid()}-") as tmp:
        out = Path(tmp) / path.name
        build(out, Path(tmp))
        record = _check_file(out)
        record.write_text(f"{key} {_digest(out)}\n")
        os.replace(out, path)
        os.replace(record, _check_file(path))
    _evict(path.parent, keep=path)
    return path


def _touch(path: Path) -> None:
    try:
        os.utime(path)  # its mtime says when it was last used
    except OSError:
        pass  # a read-only cache still serves its entries


# -- size ------------------------------------------------------------------------------


def max_bytes() -> int:
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    if not text.isdigit() or len(text) > 30:
        raise InputError(f"{LIMIT_VARIABLE}={text!r}: expected a number of bytes")
    return int(text)


@dataclass(frozen=True)
class Entry:
    path: Path
    size: int  # with its check file
    used: float  # mtime


def list_entries(directory: Path) -> list[Entry]:
    found = []
    for child in _scan(directory):
        try:
            if child.name.endswith(CHECK_SUFFIX) or not child.is_file(follow_symlinks=False):
                continue
            info = child.stat(follow_symlinks=False)
        except OSError:
            continue  # removed meanwhile
        path = Path(child.path)
        found.append(Entry(path, info.st_size + _size(_check_file(path)), info.st_mtime))
    return found


def _size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _remove(entry: Entry) -> bool:
    try:
        entry.path.unlink()
    except OSError:
        return False
    _check_file(entry.path).unlink(missing_ok=True)
    return True


def _evict(directory: Path, keep: Path) -> None:
    """Remove least recently used entries until ``directory`` holds at most :func:`max_bytes`."""
    found = list_entries(directory)
    total, limit = sum(e.size for e in found), max_bytes()
    recent = time.time() - BUILD_WINDOW_S
    for entry in sorted(found, key=lambda e: e.used):
        if total <= limit:
            break
        if entry.path != keep and entry.used < recent and _remove(entry):
            total -= entry.size


# -- what the `cache` command shows and does ---------------------------------------------


@dataclass(frozen=True)
class CacheReport:
    path: str
    entries: int
    bytes: int
    limit: int
    in_use: bool
    problem: str | None


def cache_report() -> CacheReport:
    directory = entries_dir()
    problem = cache_problem(directory)
    found = list_entries(directory)
    return CacheReport(str(directory), len(found), sum(e.size for e in found), max_bytes(), problem is None,
                       problem)


def clear_cache() -> tuple[int, int]:
    """Remove every entry of the shared cache: (entries removed, bytes freed). Refused
    (InputError) for a cache this user does not own alone."""
    directory = entries_dir()
    problem = cache_problem(directory)
    if problem is not None:
        raise InputError(f"kernel cache {problem}; not clearing it")
    removed = [e for e in list_entries(directory) if _remove(e)]
    return len(removed), sum(e.size for e in removed)


__all__ = ["CacheReport", "DIR_VARIABLE", "LIMIT_VARIABLE", "cache_dir", "cache_problem", "cache_report",
           "cache_root", "cached_build", "clear_cache", "entries_dir", "entry_key", "entry_path",
           "list_entries", "max_bytes", "sha256_hex", "verified"]
