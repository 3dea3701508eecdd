"""What the C toolchain offers: libmvec's vector math is used only where the linker can
find it, which the compiler is asked about (no probe compile)."""

from __future__ import annotations

import os
import stat

import pytest

from fusionlang.backend import ccompile


@pytest.fixture
def fake_cc(tmp_path, monkeypatch):
    """A compiler that answers -print-file-name with the bare name (library not found)."""
    script = tmp_path / "cc"
    script.write_text('#!/bin/sh\ncase "$1" in -print-file-name=*) echo "${1#-print-file-name=}";; esac\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CC", str(script))
    ccompile.vector_math.cache_clear()
    yield script
    ccompile.vector_math.cache_clear()


def test_vector_math_is_off_when_the_linker_cannot_find_libmvec(fake_cc):
    assert ccompile.vector_math() == ()
    assert ccompile.link_libraries() == ["-lm"]
    assert ccompile.asan_runtime() is None


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="libmvec is x86-64 only")
def test_vector_math_is_on_where_the_compiler_finds_libmvec():
    ccompile.vector_math.cache_clear()
    try:
        found = ccompile.vector_math()
        linkable = ccompile._library_path("libmvec.so") is not None
    finally:
        ccompile.vector_math.cache_clear()
    assert bool(found) == linkable
    if found:
        assert "expf" in found and "-lmvec" in ccompile.link_libraries()
