"""Running a compiled C library: its slot table, its arena, one foreign call per run.

What a run needs besides the library is a :class:`Layout`: what each slot of the driver
``fl_run(void **slots, int64_t *err)`` points at (a feed, a constant, a place in the
arena), where each arena buffer lies, where each graph output is read from, and which
function each driver call is (for the error record, :mod:`.failures`). The compiler's C
runtime (:mod:`.runtime_c`) builds one from its buffer plan; a saved artifact
(:mod:`.artifact`) stores it as JSON and loads it back. Both run through
:class:`CProgram`, which imports only NumPy and ctypes, so a loaded artifact runs without
the compiler's libraries (islpy, sympy, lark).
"""

from __future__ import annotations

import ctypes
import sys
from typing import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from fusionlang.backend.failures import RECORD, IndexSite, failure

#: the roles of a slot: a feed (key: the input's name), a constant (key: its index in the
#: constants list), a buffer of the arena (key: the buffer's value)
FEED, CONST, ARENA = "feed", "const", "arena"


@dataclass(frozen=True)
class OutputSource:
    """Where graph output ``name`` is read after a run: ``kind`` "input" (the feed
    ``root``), "const" (constant number ``constant``) or "arena" (the buffer ``root``,
    read as this output's shape and dtype)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    kind: str
    root: str
    constant: int = -1

    def to_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "kind": self.kind,
                "root": self.root, "constant": self.constant}

    @classmethod
    def from_dict(cls, d: dict) -> OutputSource:
        return cls(d["name"], tuple(d["shape"]), d["dtype"], d["kind"], d["root"], d["constant"])


@dataclass(frozen=True)
class DriverCall:
    """One call of the driver: the function, and the checked indices its error record numbers."""

    function: str
    sites: tuple[IndexSite, ...]

    def to_dict(self) -> dict:
        return {"function": self.function, "sites": [vars(s) for s in self.sites]}

    @classmethod
    def from_dict(cls, d: dict) -> DriverCall:
        return cls(d["function"], tuple(IndexSite(**s) for s in d["sites"]))


@dataclass(frozen=True)
class Layout:
    """Everything a run of the library needs besides its code and its constants."""

    #: (role, key) of each slot, in slot order (roles: FEED, CONST, ARENA)
    slots: tuple[tuple[str, str | int], ...]
    #: arena buffer value -> (byte offset in the arena, bytes)
    arena: dict[str, tuple[int, int]]
    arena_bytes: int
    #: the arena's base address is a multiple of this
    align: int
    outputs: tuple[OutputSource, ...]
    calls: tuple[DriverCall, ...]

    def to_dict(self) -> dict:
        return {"slots": [list(s) for s in self.slots], "arena": {k: list(v) for k, v in self.arena.items()},
                "arena_bytes": self.arena_bytes, "align": self.align,
                "outputs": [o.to_dict() for o in self.outputs], "calls": [c.to_dict() for c in self.calls],
                "error_record": {"int64_slots": RECORD, "fields": ["kind", "site", "value", "call"]}}

    @classmethod
    def from_dict(cls, d: dict) -> Layout:
        return cls(tuple((role, key) for role, key in d["slots"]), {k: (v[0], v[1]) for k, v in d["arena"].items()},
                   d["arena_bytes"], d["align"], tuple(OutputSource.from_dict(o) for o in d["outputs"]),
                   tuple(DriverCall.from_dict(c) for c in d["calls"]))


class CProgram:
    """A loaded library with its slot table filled: ``execute`` runs it on checked feeds,
    ``run`` also returns the outputs. ``constants`` are held as given (a slot points into
    them), so an array the library writes (the profile counters) shows what it wrote."""

    def __init__(self, lib: ctypes.CDLL, layout: Layout, constants: list[np.ndarray], *, sanitize: bool = False):
        self.lib, self.layout, self.constants = lib, layout, constants
        self.entry = lib.fl_run
        self.entry.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.entry.restype = ctypes.c_int
        self.errors = np.zeros(RECORD, np.int64)
        self.table = (ctypes.c_void_p * max(1, len(layout.slots)))()
        #: input name -> its slot, filled on each run
        self.feed_slots = [(slot, str(key)) for slot, (role, key) in enumerate(layout.slots) if role == FEED]
        self.arena_slots = {key: slot for slot, (role, key) in enumerate(layout.slots) if role == ARENA}
        self.sources = {source.name: source for source in layout.outputs}
        #: output name -> the array the last run returned (see _output_array)
        self._returned: dict[str, np.ndarray] = {}
        self._allocate(sanitize)

    def _allocate(self, sanitize: bool) -> None:
        """One arena, or with ``sanitize`` one allocation per buffer, so AddressSanitizer's
        redzones surround each."""
        self.arena = None
        self.separate: dict[str, np.ndarray] = {}
        if sanitize:
            self.separate = {value: np.zeros(max(nbytes, 1), np.uint8)
                             for value, (_, nbytes) in self.layout.arena.items()}
        else:
            align = self.layout.align
            self.arena = np.zeros(self.layout.arena_bytes + align, np.uint8)
            self.base = (-self.arena.ctypes.data) % align
        for slot, (role, key) in enumerate(self.layout.slots):
            if role == CONST:  # a constant's key is its number, an arena value's its name
                self.table[slot] = self.constants[int(key)].ctypes.data
            elif role == ARENA:
                self.table[slot] = self._address(str(key))

    def _address(self, value: str) -> int:
        if self.arena is None:
            return self.separate[value].ctypes.data
        return self.arena.ctypes.data + self.base + self.layout.arena[value][0]

    def _array(self, source: OutputSource) -> np.ndarray:
        """A view of an arena output's current contents."""
        if self.arena is None:
            raw, start = self.separate[source.root], 0
        else:
            raw, start = self.arena, self.base + self.layout.arena[source.root][0]
        count = int(np.prod(source.shape, dtype=np.int64))
        return np.frombuffer(raw, dtype=np.dtype(source.dtype), count=count, offset=start).reshape(source.shape)

    def execute(self, feeds: Mapping[str, np.ndarray]) -> None:
        """Run on checked, C-contiguous feeds; the outputs stay where the kernels wrote them."""
        for slot, name in self.feed_slots:
            self.table[slot] = feeds[name].ctypes.data
        self.errors[:] = 0
        if self.entry(ctypes.cast(self.table, ctypes.c_void_p), self.errors.ctypes.data):
            call = self.layout.calls[int(self.errors[3])]
            raise failure(self.errors, list(call.sites), call.function)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run, with each output the kernels can write straight into an array the caller
        receives (copying a 16 MiB output out of the arena cost 1.7 to 2 ms)."""
        direct = {name: self._output_array(name) for name in self.direct_outputs}
        for name, array in direct.items():
            self.table[self.arena_slots[self.sources[name].root]] = array.ctypes.data
        try:
            self.execute(feeds)
        finally:  # execute() alone (benchmarks) keeps using the arena, never the caller's arrays
            for name in direct:
                root = self.sources[name].root
                self.table[self.arena_slots[root]] = self._address(root)
        return {source.name: self._read(source, feeds, direct) for source in self.layout.outputs}

    def _read(self, source: OutputSource, feeds: Mapping[str, np.ndarray], direct: dict[str, np.ndarray]) -> np.ndarray:
        """A fresh array of one output (as :func:`.outputs.gather_outputs` reads them)."""
        if source.kind == "input":
            return feeds[source.root].reshape(source.shape).copy()
        if source.kind == "const":
            return np.asarray(self.constants[source.constant]).reshape(source.shape).copy()
        return direct[source.name] if source.name in direct else self._array(source).copy()

    def _output_array(self, name: str) -> np.ndarray:
        """The array the last run returned for ``name`` if nothing else holds it any more
        (no caller variable, no view of it), else a fresh one. A fresh 16 MiB array costs
        its page faults on first write: 1 to 1.5 ms per run of a 4096 x 1024 block, when the
        allocator hands the memory back to the system between runs. Reusing an array only
        its last owner dropped changes nothing anyone can see."""
        # two references: the dict's and getrefcount's argument (CPython's count)
        if name in self._returned and sys.getrefcount(self._returned[name]) == 2:
            return self._returned[name]
        source = self.sources[name]
        self._returned[name] = array = np.empty(source.shape, source.dtype)
        return array

    @cached_property
    def direct_outputs(self) -> tuple[str, ...]:
        """Graph outputs that are the whole of an arena buffer no other output re-labels
        (the buffer's own value, or a view of all of its bytes: a reshape): the kernels may
        write that buffer into the caller's array. Outputs that share a buffer, cover part
        of one, fed inputs or constants are copied as before. (A training forward returns
        its saved activations reshaped: BERT's copied 13 of 66 outputs, 2.8 ms a step.)"""
        if self.arena is None:
            return ()
        roots = [s.root for s in self.layout.outputs]
        return tuple(s.name for s in self.layout.outputs
                     if s.kind == "arena" and roots.count(s.root) == 1 and s.root in self.arena_slots
                     and _nbytes(s) == self.layout.arena[s.root][1])


def _nbytes(source: OutputSource) -> int:
    return int(np.prod(source.shape, dtype=np.int64)) * np.dtype(source.dtype).itemsize


__all__ = ["ARENA", "CONST", "FEED", "CProgram", "DriverCall", "Layout", "OutputSource"]
