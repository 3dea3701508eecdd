"""Running compiled C: one shared library, one arena, one foreign call per run.

The library holds every distinct kernel function and a driver ``fl_run(void **slots)``
that calls them in plan order. A slot is a pointer: a feed, a constant (uploaded once), or
a place in the arena (allocated once). With ``sanitize`` every buffer is its own allocation
so AddressSanitizer's redzones surround each one.
"""

from __future__ import annotations

import ctypes

import numpy as np

from fusionlang.backend.cexpr import C, ctype
from fusionlang.backend.ccompile import SINGLE_UNIT, build_library, load_library
from fusionlang.backend.emit_c import C_PRELUDE, emit_function
from fusionlang.backend.failures import RECORD, failure
from fusionlang.backend.memory import ALIGN
from fusionlang.backend.outputs import gather_outputs


class CRuntime:
    def __init__(self, cg):
        from fusionlang.backend.runtime import KernelInfo

        self.cg = cg
        self.slots: dict[tuple, int] = {}
        self.slot_arrays: dict[int, np.ndarray] = {}  # keeps constants alive
        functions: dict[str, str] = {}
        calls = []
        for group in cg.plan.groups:
            lowered = cg.lowered.get(group.id)
            if lowered is None:
                continue
            fn = emit_function(lowered, f"group {group.id}", openmp=cg.openmp, check_indices=cg.check_indices)
            functions.setdefault(fn.name, fn.source)
            args = [self._slot_of(a) for a in fn.params]
            calls.append((fn, args))
            cg.kernels.append(KernelInfo(group.id, fn.name, fn.nests, fn.source, list(group.nodes),
                                         lowered.scheduled.tree.strategy,
                                         [a.value for a in fn.params]))
        self.functions = functions
        #: (function, slot of each parameter) in launch order
        self.calls = calls
        self.driver = self._driver(calls)
        self.source = C_PRELUDE + "\n" + "\n".join(functions.values()) + "\n" + self.driver
        if len(functions) <= SINGLE_UNIT:
            units = [self.source]
        else:
            units = [C_PRELUDE + src for src in functions.values()] + [self.driver]
        self.library_path = build_library(units, openmp=cg.openmp, sanitize=cg.sanitize)
        self.lib = load_library(self.library_path)
        self.entry = self.lib.fl_run
        self.entry.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.entry.restype = ctypes.c_int
        self.errors = np.zeros(RECORD, np.int64)
        self.table = (ctypes.c_void_p * max(1, len(self.slots)))()
        self._allocate()

    # ----- slots ----------------------------------------------------------------------
    def _slot_of(self, array) -> int:
        if array.data is not None:
            key = ("aux", id(array))
            if key not in self.slots:
                self.slots[key] = len(self.slots)
                self.slot_arrays[self.slots[key]] = np.ascontiguousarray(array.data)
            return self.slots[key]
        root = self.cg.buffers.root(array.value)
        key = ("value", root)
        if key not in self.slots:
            self.slots[key] = len(self.slots)
        return self.slots[key]

    def _driver(self, calls) -> str:
        """``int fl_run(void** slots, int64_t* err)``: the kernels in order; it stops after a
        fallible kernel that filled the error record, noting which call that was."""
        protos, body = {}, []
        for k, (fn, args) in enumerate(calls):
            params = []
            casts = []
            for a, slot in zip(fn.params, args):
                t = ctype(a.dtype, C)
                const = "const " if a.role == "input" else ""
                params.append(f"{const}{t}*")
                casts.append(f"({const}{t}*)s[{slot}]")
            if fn.fallible:
                params.append("int64_t*")
                casts.append("err")
            protos[fn.name] = f"void {fn.name}({', '.join(params) if params else 'void'});"
            body.append(f"  {fn.name}({', '.join(casts)});")
            if fn.fallible:
                body.append(f"  if (err[0]) {{ err[3] = {k}; return 1; }}")
        return ("#include <stdint.h>\n#include <stddef.h>\n" + "\n".join(protos.values())
                + "\nint fl_run(void** s, int64_t* err) {\n" + "\n".join(body) + "\n  return 0;\n}\n")

    def _allocate(self) -> None:
        cg = self.cg
        buffers = cg.buffers
        self.arena = None
        self.separate: dict[str, np.ndarray] = {}
        if cg.sanitize:
            for b in buffers.buffers.values():
                if b.kind == "arena":
                    self.separate[b.value] = np.zeros(max(b.nbytes, 1), np.uint8)
        else:
            self.arena = np.zeros(buffers.arena_bytes + ALIGN, np.uint8)
            self.base = (-self.arena.ctypes.data) % ALIGN
        for (kind, key), slot in self.slots.items():
            if kind == "aux":
                self.table[slot] = self.slot_arrays[slot].ctypes.data
                continue
            b = buffers.buffers[key]
            if b.kind == "const":
                arr = np.ascontiguousarray(cg.constants[key])
                self.slot_arrays[slot] = arr
                self.table[slot] = arr.ctypes.data
            elif b.kind == "arena":
                self.table[slot] = self._address(key)

    def _address(self, value: str) -> int:
        if self.arena is None:
            return self.separate[value].ctypes.data
        return self.arena.ctypes.data + self.base + self.cg.buffers.buffers[value].offset

    def _array(self, value: str) -> np.ndarray:
        """A view of a value's current contents (arena or separate buffer)."""
        t = self.cg.graph.types[value]
        root = self.cg.buffers.root(value)
        if self.arena is None:
            raw = self.separate[root]
            start = 0
        else:
            raw = self.arena
            start = self.base + self.cg.buffers.buffers[root].offset
        count = t.size
        return np.frombuffer(raw, dtype=np.dtype(t.dtype), count=count, offset=start).reshape(t.shape)

    # ----- running ----------------------------------------------------------------------
    def execute(self, feeds: dict[str, np.ndarray]) -> None:
        cg = self.cg
        for (kind, key), slot in self.slots.items():
            if kind == "value" and cg.buffers.buffers[key].kind == "input":
                self.table[slot] = feeds[key].ctypes.data
        self.errors[:] = 0
        if self.entry(ctypes.cast(self.table, ctypes.c_void_p), self.errors.ctypes.data):
            fn, _ = self.calls[int(self.errors[3])]
            raise failure(self.errors, fn.sites, fn.name)

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.execute(feeds)
        return gather_outputs(self.cg, feeds, lambda name, b, t: self._array(name).copy())


__all__ = ["CRuntime"]
