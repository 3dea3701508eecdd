"""Kernels share translation units in content-defined chunks (fusionlang.backend.chunks), template
kernels and loop nests apart, each unit at its optimization level (ccompile)."""

import hashlib
import re
import shlex
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import fusionlang
from fusionlang import reference
from fusionlang.backend import ccompile, runtime_c, template
from fusionlang.backend.ccompile import LOOP_OPT, TEMPLATE_OPT, compile_object
from fusionlang.backend.chunks import CHUNK_KERNELS, CHUNK_MIN, chunk_kernels
from fusionlang.ops import GraphBuilder


def _names(count, salt="k"):
    return [f"fl_k_{hashlib.sha256(f'{salt}{i}'.encode()).hexdigest()[:16]}" for i in range(count)]


def test_every_kernel_lands_in_one_chunk_in_name_order():
    names = _names(300)
    chunks = chunk_kernels(names)
    assert [n for chunk in chunks for n in chunk] == sorted(names)
    assert all(len(chunk) >= CHUNK_MIN for chunk in chunks[:-1])
    # far fewer compiler runs than kernels, yet more than one unit to compile in parallel
    assert 1 < len(chunks) < len(names) / (CHUNK_KERNELS / 4)


def test_a_new_kernel_rebuilds_only_its_own_chunk():
    names = _names(300)
    before = {tuple(c) for c in chunk_kernels(names)}
    for extra in _names(40, salt="extra"):
        after = {tuple(c) for c in chunk_kernels(names + [extra])}
        # the old chunk it joins is replaced (cut in two when the new kernel ends a chunk),
        # and at most the one after it (when the longer chunk now reaches CHUNK_MIN at an
        # earlier boundary); every other chunk stays as it was
        gone, new = before - after, after - before
        assert 1 <= len(gone) <= 2 and 1 <= len(new) <= 2
        assert sorted(n for c in new for n in c) == sorted([n for c in gone for n in c] + [extra])


def _conv_net(convs=4):
    """Convs (GEMM template kernels) separated by softmaxes (loop-nest kernels), each of
    its own width, so more distinct kernels than one unit takes (ccompile.SINGLE_UNIT)."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("units")
    y = b.input("x", (1, 4, 6, 6))
    for c in range(convs):
        w = rng.standard_normal((5 + c, 4 + c, 3, 3)).astype(np.float32)
        y = b.softmax(b.conv(y, b.constant(w), pads=(1, 1, 1, 1)), axis=1)
    b.output(y)
    return b.build(), {"x": rng.standard_normal((1, 4, 6, 6)).astype(np.float32)}


def _compiled_units(monkeypatch, graph):
    """(source, flags) of every translation unit compiling ``graph`` builds."""
    units = []

    def record(source, flag_list):
        units.append((source, flag_list))
        return compile_object(source, flag_list)

    monkeypatch.setattr(ccompile, "compile_object", record)
    monkeypatch.setenv("FUSIONLANG_CACHE_DIR", str(Path(tempfile.mkdtemp())))
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c")
    return compiled, units


def _at(flag_list: list[str], opt: str) -> bool:
    """Whether a unit's flags hold every flag of an optimization setting (``-O3 -m...``)."""
    return set(shlex.split(opt)) <= set(flag_list)


def test_template_kernels_and_loop_nests_compile_apart_each_at_its_level(monkeypatch):
    monkeypatch.setattr(template, "MIN_MACS", 0)
    monkeypatch.delenv("FUSIONLANG_COPT", raising=False)
    graph, feeds = _conv_net()
    compiled, units = _compiled_units(monkeypatch, graph)
    assert len(compiled.kernels) > ccompile.SINGLE_UNIT
    defined = [({kind for kind in re.findall(r"(?m)^void fl_([kt])_\w+\(.*\{$", source)}, flag_list)
               for source, flag_list in units]
    levels = {tuple(sorted(kinds)): flag_list for kinds, flag_list in defined if kinds}
    assert set(levels) == {("k",), ("t",)}  # loop nests ("k") and templates ("t") never share a unit
    assert _at(levels[("t",)], TEMPLATE_OPT) and not _at(levels[("t",)], LOOP_OPT)
    assert _at(levels[("k",)], LOOP_OPT) and not _at(levels[("k",)], TEMPLATE_OPT)
    want = reference.run(graph, feeds)
    got = compiled.run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)


def test_fusionlang_copt_sets_the_level_of_every_unit(monkeypatch):
    monkeypatch.setattr(template, "MIN_MACS", 0)
    monkeypatch.setenv("FUSIONLANG_COPT", "-O1")
    _, units = _compiled_units(monkeypatch, _conv_net()[0])
    assert units and all("-O1" in f and LOOP_OPT not in f and TEMPLATE_OPT not in f for _, f in units)


def test_gemm_helpers_compile_once_however_many_units_call_them(monkeypatch):
    # one kernel per unit, so every template unit calls the same micro-kernel and packer
    monkeypatch.setattr(template, "MIN_MACS", 0)
    monkeypatch.setattr(runtime_c, "chunk_kernels", lambda names: [[n] for n in sorted(names)])
    graph, feeds = _conv_net()
    compiled, units = _compiled_units(monkeypatch, graph)
    helper = re.compile(r'(?m)^__attribute__\(\(visibility\("hidden"\)\)\) (?:__attribute__\(\(\w+\)\) )?'
                        r'void (fl_gemm_\w+)\((.*)$')
    defined, declared = Counter(), Counter()
    for source, _ in units:
        for name, rest in helper.findall(source):
            (defined if rest.endswith("{") else declared)[name] += 1
    template_units = sum("void fl_t_" in source for source, _ in units)
    assert template_units >= 2 and defined and any(n.startswith("fl_gemm_micro_") for n in defined)
    assert set(defined.values()) == {1}, defined  # one definition per library
    assert all(declared[name] >= 2 for name in defined), declared  # called from several units
    for name in defined:  # hidden: not a symbol the library exports
        with pytest.raises(AttributeError):
            getattr(compiled._runtime.lib, name)
    want = reference.run(graph, feeds)
    got = compiled.run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)
