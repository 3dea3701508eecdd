"""Kernels share translation units in content-defined chunks (fusionlang.backend.chunks)."""

import hashlib

from fusionlang.backend.chunks import CHUNK_KERNELS, chunk_kernels


def _names(count, salt="k"):
    return [f"fl_k_{hashlib.sha256(f'{salt}{i}'.encode()).hexdigest()[:16]}" for i in range(count)]


def test_every_kernel_lands_in_one_chunk_in_name_order():
    names = _names(300)
    chunks = chunk_kernels(names)
    assert [n for chunk in chunks for n in chunk] == sorted(names)
    # far fewer compiler runs than kernels, yet more than one unit to compile in parallel
    assert 1 < len(chunks) < len(names) / (CHUNK_KERNELS / 4)


def test_a_new_kernel_rebuilds_only_its_own_chunk():
    names = _names(300)
    before = {tuple(c) for c in chunk_kernels(names)}
    for extra in _names(20, salt="extra"):
        after = {tuple(c) for c in chunk_kernels(names + [extra])}
        # one old chunk is replaced, by itself plus the new kernel (cut in two when the
        # new kernel ends a chunk); every other chunk stays as it was
        gone, new = before - after, after - before
        assert len(gone) == 1 and 1 <= len(new) <= 2
        assert sorted(n for c in new for n in c) == sorted(list(next(iter(gone))) + [extra])
