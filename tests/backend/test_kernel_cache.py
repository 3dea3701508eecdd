"""The kernel cache checks what it loads: an entry whose bytes do not match the hash kept
beside it (truncated, overwritten, half written), or that was copied from another key's
entry, is built again, never loaded; concurrent builds of one entry all succeed. A cache
another user could write into, or one that cannot be written, is not used, and compiles
still succeed; debris of killed builds is removed; the size bound evicts the least
recently used entries."""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import time
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import fusionlang
from fusionlang import reference
from fusionlang.backend import kernel_cache
from fusionlang.backend.ccompile import build_library, cache_dir, load_library, verified
from fusionlang.errors import InputError

SOURCE = "int answer(void) { return 42; }\n"
OTHER = "int other(void) { return 7; }\n"


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSIONLANG_CACHE_DIR", str(tmp_path))
    return tmp_path


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


def overwrite(path: Path) -> None:
    path.write_bytes(b"\x7fELF garbage" * (path.stat().st_size // 12))


def drop_hash(path: Path) -> None:
    path.with_name(path.name + ".sha256").unlink()


def forge_hash(path: Path) -> None:
    path.with_name(path.name + ".sha256").write_text("0" * 64)


DAMAGE = {"truncated": truncate, "overwritten": overwrite, "hash missing": drop_hash, "hash wrong": forge_hash}


def answer(path: Path) -> int:
    fn = load_library(path).answer
    fn.restype = ctypes.c_int
    return fn()


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_library_is_rebuilt(fresh_cache, damage):
    lib = build_library([SOURCE])
    assert verified(lib)
    DAMAGE[damage](lib)
    assert not verified(lib)
    again = build_library([SOURCE])
    assert again == lib and verified(lib)
    assert answer(lib) == 42


def test_a_damaged_object_is_rebuilt_before_linking(fresh_cache):
    build_library([SOURCE, OTHER])
    objects = sorted(cache_dir().glob("*.o"))
    assert len(objects) == 2
    for lib in cache_dir().glob("lib*.so"):
        lib.unlink()  # so the link runs again and reads the objects
    truncate(objects[0])
    lib = build_library([SOURCE, OTHER])
    assert all(verified(o) for o in objects) and answer(lib) == 42


def test_concurrent_builds_of_one_entry_all_succeed(fresh_cache):
    source = "int answer(void) { return 40 + 2; }\n"
    with ThreadPoolExecutor(6) as pool:
        paths = list(pool.map(lambda _: build_library([source]), range(6)))
    assert len(set(paths)) == 1 and verified(paths[0]) and answer(paths[0]) == 42
    assert not [p for p in cache_dir().iterdir() if p.is_dir()]  # no scratch left behind


def small_graph():
    b = fusionlang.ops.GraphBuilder("cached")
    x = b.input("x", (4, 8), "float32")
    b.output(b.exp(b.relu(x)))
    return b.build()


def test_a_compiled_graph_runs_after_its_cached_library_is_corrupted(fresh_cache):
    # built in another process, so this one has not loaded the library being corrupted
    script = ("import fusionlang; from test_kernel_cache import small_graph; "
              "fusionlang.compile(fusionlang.fuse(small_graph(), 'apollo'))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=300)
    libraries = list(cache_dir().glob("lib*.so"))
    assert libraries
    for lib in libraries:
        overwrite(lib)
    graph = small_graph()
    feeds = {"x": np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)}
    got = fusionlang.compile(fusionlang.fuse(graph, "apollo")).run(feeds)
    np.testing.assert_allclose(got["exp_1"], reference.run(graph, feeds)["exp_1"], rtol=1e-6)
    assert all(verified(lib) for lib in libraries)


SEVEN = "int answer(void) { return 7; }\n"


def check_file(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def test_a_library_copied_over_another_keys_entry_is_not_loaded(fresh_cache):
    forty_two, seven = build_library([SOURCE]), build_library([SEVEN])
    assert forty_two != seven
    # another entry's library with its own, valid check file: the swap the review made
    shutil.copy(forty_two, seven)
    shutil.copy(check_file(forty_two), check_file(seven))
    assert not verified(seven)
    assert build_library([SEVEN]) == seven and verified(seven)
    assert answer(seven) == 7


def notices(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("fusionlang: kernel cache ")]


def assert_builds_privately(fresh_cache, capsys, why: str) -> None:
    """Builds succeed outside the refused cache, said in one line, once."""
    libraries = [build_library([SOURCE]), build_library([SOURCE]), build_library([SEVEN])]
    assert [answer(lib) for lib in libraries] == [42, 42, 7]
    assert not any(lib.is_relative_to(fresh_cache) for lib in libraries)
    lines = notices(capsys)
    assert len(lines) == 1 and why in lines[0], lines
    assert lines[0].endswith("not using it: compiling in a private temporary directory, removed at exit")


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o775])
@pytest.mark.parametrize("where", ["root", "c"])
def test_a_cache_writable_by_others_is_refused(fresh_cache, capsys, mode, where):
    planted = build_library([SOURCE])  # a valid entry: still never loaded from a shared dir
    refused = fresh_cache if where == "root" else fresh_cache / "c"
    os.chmod(refused, mode)
    assert_builds_privately(fresh_cache, capsys, f"kernel cache {refused} is writable by others (mode {mode:o})")
    assert planted.exists()


needs_root = pytest.mark.skipif(os.getuid() != 0, reason="giving a directory away needs root")


@needs_root
@pytest.mark.parametrize("where", ["root", "c"])
def test_a_cache_owned_by_another_user_is_refused(fresh_cache, capsys, where):
    build_library([SOURCE])
    refused = fresh_cache if where == "root" else fresh_cache / "c"
    os.chown(refused, 65534, 65534)
    assert_builds_privately(fresh_cache, capsys, f"kernel cache {refused} is owned by uid 65534")


@needs_root
def test_a_symlinked_cache_owned_by_another_user_is_refused(tmp_path, monkeypatch, capsys):
    target, link = tmp_path / "target", tmp_path / "link"
    (target / "c").mkdir(mode=0o700, parents=True)
    target.chmod(0o700)
    link.symlink_to(target)
    os.lchown(link, 65534, 65534)
    monkeypatch.setenv("FUSIONLANG_CACHE_DIR", str(link))
    assert_builds_privately(tmp_path, capsys, f"kernel cache {link} is a symbolic link owned by uid 65534")


def test_a_symlinked_cache_of_ones_own_is_used(tmp_path, monkeypatch, capsys):
    target, link = tmp_path / "target", tmp_path / "link"
    target.mkdir(mode=0o700)
    link.symlink_to(target)
    monkeypatch.setenv("FUSIONLANG_CACHE_DIR", str(link))
    assert build_library([SOURCE]).parent == link / "c" and not notices(capsys)


def test_a_cache_path_that_is_a_file_still_compiles(tmp_path, monkeypatch, capsys):
    path = tmp_path / "cache"
    path.write_text("not a directory")
    monkeypatch.setenv("FUSIONLANG_CACHE_DIR", str(path))
    assert_builds_privately(tmp_path, capsys, f"kernel cache {path} is not a directory")


def test_a_full_disk_still_compiles(fresh_cache, monkeypatch, capsys):
    real_replace = os.replace

    def replace(src, dst):
        if Path(dst).is_relative_to(fresh_cache):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    assert_builds_privately(fresh_cache, capsys,
                            f"kernel cache {fresh_cache / 'c'} cannot be written (No space left on device)")
    assert not list((fresh_cache / "c").iterdir())  # no entry, no scratch left behind


def test_the_cache_is_created_private(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSIONLANG_CACHE_DIR", str(tmp_path / "new" / "cache"))
    build_library([SOURCE])
    for path in (tmp_path / "new" / "cache", tmp_path / "new" / "cache" / "c"):
        assert path.stat().st_mode & 0o777 == 0o700


def test_the_cache_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.delenv("FUSIONLANG_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "fusionlang" / "c"
    monkeypatch.setenv("FUSIONLANG_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine" / "c"


def scratch(parent: Path, name: str, age_s: float) -> Path:
    path = parent / name
    (path / "half-built").mkdir(parents=True)
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_scratch_of_killed_builds_is_removed_when_the_cache_opens(fresh_cache):
    entries = fresh_cache / "c"
    gone = 2**31 - 1  # no process has this id
    old_and_gone = [scratch(entries, f"tmp-build-{gone}-abc", 7200), scratch(entries, "tmp-build-xyz", 7200)]
    kept = [scratch(entries, f"tmp-build-{gone}-new", 60),  # its build may still be running
            scratch(entries, f"tmp-build-{os.getpid()}-old", 7200),  # its process is alive
            scratch(entries, "not-scratch", 7200)]
    assert answer(build_library([SOURCE])) == 42
    assert not any(p.exists() for p in old_and_gone) and all(p.exists() for p in kept)


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def size(path: Path) -> int:
    return path.stat().st_size + check_file(path).stat().st_size


def test_the_size_bound_evicts_the_least_recently_used_entries(fresh_cache, monkeypatch):
    first, second = build_library([SOURCE]), build_library([SEVEN])
    age(first, 3 * 3600)
    age(second, 2 * 3600)
    assert build_library([SOURCE]) == first and time.time() - first.stat().st_mtime < 60  # a hit touches it
    age(first, 1 * 3600 + 60)  # used after the second, both long ago
    monkeypatch.setenv("FUSIONLANG_CACHE_MAX_BYTES", str(size(first) + size(second) + size(second) // 2))
    third = build_library(["int answer(void) { return 3; }\n"])
    assert first.exists() and third.exists()
    assert not second.exists() and not check_file(second).exists()
    assert answer(third) == 3 and answer(build_library([SEVEN])) == 7  # built again


def test_the_entry_just_published_is_never_evicted(fresh_cache, monkeypatch):
    monkeypatch.setenv("FUSIONLANG_CACHE_MAX_BYTES", "1")
    old = build_library([SEVEN])
    age(old, 2 * 3600)
    lib = build_library([SOURCE])
    assert verified(lib) and answer(lib) == 42 and not old.exists()


def test_a_bad_size_bound_is_one_line(fresh_cache, monkeypatch):
    monkeypatch.setenv("FUSIONLANG_CACHE_MAX_BYTES", "2G")
    with pytest.raises(InputError, match="FUSIONLANG_CACHE_MAX_BYTES='2G': expected a number of bytes"):
        kernel_cache.max_bytes()
