"""Which kernels share a translation unit.

One compiler run per kernel spent half its time starting up and reading headers (densenet121:
130 kernels, 15 s of CPU one per unit, 7 s all in one). One unit for everything would
recompile every kernel when one changes and leave one core busy. So kernels are sorted by name
(a hash of their source) and cut into chunks where a kernel's name hash is 0 modulo
:data:`CHUNK_KERNELS`, once the chunk holds :data:`CHUNK_MIN` kernels: the boundaries
depend on the kernels themselves, not on their count or position, so a kernel added or
changed rebuilds its own chunk (and at most the next, when it moves where that one
starts), and the same kernels always make the same chunks (and hit the same cached objects).
"""

from __future__ import annotations

import hashlib

#: kernels per chunk on average
CHUNK_KERNELS = 16
#: no chunk ends before it holds this many kernels: a unit of one or two templates spent
#: most of its compile time on the micro-kernel every template unit compiles again
#: (squeezenet's 18 templates fell into 5 units)
CHUNK_MIN = 6


def _ends_chunk(name: str) -> bool:
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:4], "little") % CHUNK_KERNELS == 0


def chunk_kernels(names) -> list[list[str]]:
    """``names`` sorted and cut into content-defined chunks (see the module docstring)."""
    chunks, current = [], []
    for name in sorted(names):
        current.append(name)
        if len(current) >= CHUNK_MIN and _ends_chunk(name):
            chunks.append(current)
            current = []
    if current:
        chunks.append(current)
    return chunks


__all__ = ["CHUNK_KERNELS", "CHUNK_MIN", "chunk_kernels"]
