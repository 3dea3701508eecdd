"""The kernel cache checks what it loads: an entry whose bytes do not match the hash kept
beside it (truncated, overwritten, half written) is built again, never loaded; concurrent
builds of one entry all succeed."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import fusionlang
from fusionlang import reference
from fusionlang.backend.ccompile import build_library, cache_dir, load_library, verified

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
