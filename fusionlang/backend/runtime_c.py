"""Running compiled C: one shared library, one arena, one foreign call per run.

The library holds every distinct kernel function and a driver ``fl_run(void **slots)``
that calls them in plan order. A slot is a pointer: a feed, a constant (uploaded once), or
a place in the arena (allocated once). With ``sanitize`` every buffer is its own allocation
so AddressSanitizer's redzones surround each one. With ``profile`` the driver also adds the
nanoseconds each call took to an array of its own slot (per compiled graph, not a global of
the library, which two compiled graphs of one source share).
"""

from __future__ import annotations

import time
from typing import Mapping

import numpy as np

from fusionlang.backend.ccompile import LOOP_OPT, SINGLE_UNIT, TEMPLATE_OPT, build_library, load_library
from fusionlang.backend.c_program import ARENA, CONST, FEED, CProgram, DriverCall, Layout, OutputSource
from fusionlang.backend.cexpr import C, ctype
from fusionlang.backend.chunks import chunk_kernels
from fusionlang.backend.emit_c import C_PRELUDE, CFunction, emit_function
from fusionlang.backend.kernel_build import KernelBuild
from fusionlang.backend.kernel_info import KernelInfo
from fusionlang.backend.lower import LoweredGroup
from fusionlang.backend.attention_template import AttentionKernel, attention_function
from fusionlang.backend.lrn_template import LrnKernel, lrn_function
from fusionlang.backend.segment_template import SegmentKernel, segment_function
from fusionlang.backend.transpose_template import TransposeKernel, transpose_function
from fusionlang.backend.memory import ALIGN
from fusionlang.backend.outputs import stored_as
from fusionlang.backend.gemm_template import DRIVER_PREFIX
from fusionlang.backend.template import emit_template
from fusionlang.instrument import logger, timed
from fusionlang.stages import CODEGEN, COMPILE, format_seconds


def _part_function(part: LoweredGroup | LrnKernel | AttentionKernel | SegmentKernel | TransposeKernel, label: str,
                   build: KernelBuild) -> CFunction:
    """The C function of a loop nest, of an LRN run as the LRN template, of an attention
    block run as the attention template, or of a segment_sum or a transpose run as its
    direct kernel."""
    if isinstance(part, LrnKernel):
        return lrn_function(part, label, openmp=build.openmp)
    if isinstance(part, AttentionKernel):
        return attention_function(part, label, openmp=build.openmp)
    if isinstance(part, SegmentKernel):
        return segment_function(part, label)
    if isinstance(part, TransposeKernel):
        return transpose_function(part, label)
    return emit_function(part, label, openmp=build.openmp, check_indices=build.check_indices,
                         streamed=build.streamed)


class CRuntime:
    """The kernels of a :class:`.kernel_build.KernelBuild` as one shared library: ``kernels``
    and ``source`` say what was built, ``run`` and ``execute`` run it."""

    def __init__(self, build: KernelBuild):
        self.graph, self.buffers, self.constants = build.graph, build.buffers, build.constants
        self.kernels: list[KernelInfo] = []
        self.slots: dict[tuple, int] = {}
        self.slot_arrays: dict[int, np.ndarray] = {}  # keeps constants alive
        functions: dict[str, str] = {}
        helpers: dict[str, str] = {}
        vector_code: set[str] = set()
        calls = []
        #: the index in ``kernels`` of each call's kernel (a template group makes up to 3 calls)
        self.call_kernel: list[int] = []
        for group in build.plan.groups:
            with timed(CODEGEN, "print C", detail=f"group {group.id}"):
                parts, main, strategy, (detail, flops) = self._functions(build, group)
            if not parts or main is None:  # (main is None exactly when parts is empty)
                continue
            for fn in parts:
                functions.setdefault(fn.name, fn.source)
                helpers.update(fn.helpers)
                if fn.vector_code:
                    vector_code.add(fn.name)
                calls.append((fn, [self._slot_of(a) for a in fn.params]))
                self.call_kernel.append(len(self.kernels))
            self.kernels.append(KernelInfo(group.id, main.name, sum(fn.nests for fn in parts),
                                         _shown_source(parts), list(group.nodes), strategy,
                                         [a.value for a in main.params], detail=detail, flops=flops))
        self.functions = functions
        #: the routines the GEMM kernels share (micro-kernels, packers), by name
        self.helpers = helpers
        #: (function, slot of each parameter) in launch order
        self.calls = calls
        #: nanoseconds spent in each call since the last reset_profile (profile=True only):
        #: call k's wall time at [2k], the process's CPU time over the call at [2k + 1]
        self.profile_ns: np.ndarray | None = None
        profile_slot = None
        if build.profile:
            profile_slot = self.slots[("aux", "profile")] = len(self.slots)
            self.profile_ns = self.slot_arrays[profile_slot] = np.zeros(max(2, 2 * len(calls)), np.int64)
        self.driver = self._driver(calls, build, profile_slot)
        self.source = C_PRELUDE + "\n" + "".join(helpers.values()) + "\n".join(functions.values()) + "\n" + self.driver
        units = self._units(functions, vector_code)
        compiler_started = time.perf_counter()
        with timed(COMPILE, "C compiler"):
            self.library_path = build_library([u for u, _ in units], openmp=build.openmp, sanitize=build.sanitize,
                                              opts=[opt for _, opt in units], pool=not build.share_libgomp)
        #: seconds the C compiler took (0 when the kernel cache held the library)
        self.compiler_seconds = time.perf_counter() - compiler_started
        logger(COMPILE).info("%d translation units -> %s (%s)", len(units), self.library_path.name,
                             format_seconds(self.compiler_seconds))
        self.layout, constants = self._layout()
        with timed(COMPILE, "load library"):
            self.program = CProgram(load_library(self.library_path, openmp=build.openmp), self.layout, constants, sanitize=build.sanitize)
        self.lib = self.program.lib

    def _units(self, functions: dict[str, str], vector_code: set[str]) -> list[tuple[str, str]]:
        """(translation unit, its optimization level): the template kernels and the loop-nest
        kernels chunked apart (:mod:`.chunks`), so each unit gets the level its code needs,
        and the helpers the GEMM and LRN kernels share in one of them only, compiled once for all
        the units that call them (squeezenet: 2 of 5 micro-kernels were compiled twice); a
        graph of a few kernels is one unit (at the loop nests' level if it has any)."""
        if len(functions) <= SINGLE_UNIT:
            return [(self.source, TEMPLATE_OPT if set(functions) <= vector_code else LOOP_OPT)]
        units = []
        for names, opt in (([n for n in functions if n not in vector_code], LOOP_OPT),
                           ([n for n in functions if n in vector_code], TEMPLATE_OPT)):
            units += [(C_PRELUDE + "\n".join(functions[name] for name in chunk), opt) for chunk in chunk_kernels(names)]
        # these ride with the smallest unit (of the template kernels' level, for the helpers
        # they call): a compiler run of their own cost 0.03 s
        if self.helpers:  # only template kernels (GEMM, LRN) call helpers: there is a unit of their level
            self._ride(units, "".join(self.helpers.values()), TEMPLATE_OPT)
        self._ride(units, self.driver, None)
        return units

    @staticmethod
    def _ride(units: list[tuple[str, str]], text: str, opt: str | None) -> None:
        """Append ``text`` to the smallest unit compiled at ``opt`` (None: of any level)."""
        fits = [k for k, (_, level) in enumerate(units) if opt in (None, level)]
        smallest = min(fits, key=lambda k: len(units[k][0]))
        units[smallest] = (units[smallest][0] + "\n" + text, units[smallest][1])

    @staticmethod
    def _functions(build: KernelBuild, group) -> tuple[list[CFunction], CFunction | None, str, tuple[str, int]]:
        """(the C functions one group runs, in order; the one that names it; its strategy;
        a template's problem and its flops): one loop-nest kernel, or the template call
        with the loop nests of the parts before and after it."""
        label = f"group {group.id}"
        planned = build.templates.get(group.id)
        if planned is None:
            lowered = build.lowered.get(group.id)
            if lowered is None:
                return [], None, "", ("", 0)
            fn = _part_function(lowered, label, build)
            problem = (lowered.detail, lowered.flops) if isinstance(lowered, AttentionKernel) else ("", 0)
            return [fn], fn, lowered.strategy, problem
        helpers: dict[str, str] = {}
        name, source, fallible, kind = emit_template(planned, label, openmp=build.openmp, helpers=helpers)
        main = CFunction(name, source, list(planned.params), 1, fallible=fallible, vector_code=kind == "GEMM",
                         helpers=helpers)
        parts = [main]
        if planned.before is not None:
            parts.insert(0, _part_function(planned.before, f"{label}, before its template", build))
        if planned.after is not None:
            parts.append(_part_function(planned.after, f"{label}, after its template", build))
        problem = planned.problem
        outer = "".join(f" x{n}" for n in problem.outer if n > 1)
        flops = problem.flops if kind != "pooling" else 0  # a pool's taps are compares, not multiply-adds
        return parts, main, "gemm template", (f"{kind} m={problem.m} n={problem.n} k={problem.k}{outer}", flops)

    # ----- slots ----------------------------------------------------------------------
    def _slot_of(self, array) -> int:
        if array.data is not None:
            key = ("aux", id(array))
            if key not in self.slots:
                self.slots[key] = len(self.slots)
                self.slot_arrays[self.slots[key]] = np.ascontiguousarray(array.data)
            return self.slots[key]
        root = self.buffers.root(array.value)
        key = ("value", root)
        if key not in self.slots:
            self.slots[key] = len(self.slots)
        return self.slots[key]

    @staticmethod
    def _driver(calls, build: KernelBuild, profile_slot: int | None = None) -> str:
        """``int fl_run(void** slots, int64_t* err)``: the kernels in order; it stops after a
        fallible kernel that filled the error record, noting which call that was. With a
        ``profile_slot``, each call's wall time (CLOCK_MONOTONIC) and the process's CPU time
        over it (CLOCK_PROCESS_CPUTIME_ID: every thread's) are added to the int64 array in
        that slot, at [2k] and [2k + 1]. CPU time is what a kernel costs on a shared, busy
        machine, where wall time also counts the moments the kernel waited for a core."""
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
            call = f"{fn.name}({', '.join(casts)});"
            if profile_slot is None:
                body.append(f"  {call}")
            else:
                body.append(f"  clock_gettime(CLOCK_MONOTONIC, &t0); clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0); "
                            f"{call} clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1); clock_gettime(CLOCK_MONOTONIC, &t1);")
                body.append(f"  prof[{2 * k}] += FL_NS(t0, t1); prof[{2 * k + 1}] += FL_NS(c0, c1);")
            if fn.fallible:
                rest = " if (fl_pool_rest) fl_pool_rest();" if build.openmp else ""
                body.append(f"  if (err[0]) {{ err[3] = {k};{rest} return 1; }}")
        head = "#include <stdint.h>\n#include <stddef.h>\n"
        if build.openmp and build.threads is not None:
            head += "#include <omp.h>\n"
            body.insert(0, f"  omp_set_num_threads({build.threads});")
        if build.openmp:
            # the thread pool's (backend.thread_pool; weak: a libgomp build has none):
            # idle workers sleep once the run is over, not spin into the caller's code, and
            # the caller has its own affinity back (on the error returns above too)
            head += "void fl_pool_rest(void) __attribute__((weak));\n"
            body.append("  if (fl_pool_rest) fl_pool_rest();")
        if profile_slot is not None:
            head += "#include <time.h>\n"
            head += "#define FL_NS(a, b) (((b).tv_sec - (a).tv_sec) * 1000000000LL + ((b).tv_nsec - (a).tv_nsec))\n"
            body.insert(0, f"  int64_t *prof = (int64_t *)s[{profile_slot}];\n  struct timespec t0, t1, c0, c1;")
        return (head + "\n".join(protos.values())
                + "\nint fl_run(void** s, int64_t* err) {\n" + "\n".join(body) + "\n  return 0;\n}\n")

    def _layout(self) -> tuple[Layout, list[np.ndarray]]:
        """The slot table, arena and outputs as :class:`.c_program.Layout` says them, and
        the constants its slots and outputs name by number."""
        constants: list[np.ndarray] = []

        def constant(array) -> int:
            constants.append(np.ascontiguousarray(array))
            return len(constants) - 1

        buffers = self.buffers
        slots: list[tuple[str, str | int]] = []
        for kind, key in self.slots:  # a dict keeps slot order
            if kind == "aux":
                slots.append((CONST, constant(self.slot_arrays[self.slots[(kind, key)]])))
                continue
            role = {"const": CONST, "arena": ARENA, "input": FEED}[buffers.buffers[key].kind]
            slots.append((role, constant(self.constants[key]) if role == CONST else key))
        arena = {b.value: (b.offset, b.nbytes) for b in buffers.buffers.values() if b.kind == "arena"}
        calls = tuple(DriverCall(fn.name, tuple(fn.sites)) for fn, _ in self.calls)
        layout = Layout(tuple(slots), arena, buffers.arena_bytes, ALIGN, self._output_sources(constant), calls)
        return layout, constants

    def _output_sources(self, constant) -> tuple[OutputSource, ...]:
        """Where each graph output is read (``constant(array)`` numbers a constant one)."""
        sources = []
        for name in self.graph.outputs:
            t = self.graph.types[name]
            kind, root = stored_as(self.buffers, name)
            number = constant(self.constants[root]) if kind == "const" else -1
            sources.append(OutputSource(name, tuple(t.shape), t.dtype, kind, root, number))
        return tuple(sources)

    # ----- running ----------------------------------------------------------------------
    def execute(self, feeds: Mapping[str, np.ndarray]) -> None:
        self.program.execute(feeds)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.program.run(feeds)

    def reset_profile(self) -> None:
        assert self.profile_ns is not None, "compiled without profile=True"
        self.profile_ns[:] = 0

    def kernel_seconds(self, clock: str = "wall") -> list[float]:
        """Seconds spent in each kernel (in ``kernels`` order) since the last reset, its
        parts before and after a template included: wall time, or with ``clock="cpu"`` the
        process's CPU time (all threads) over its calls."""
        totals = [0.0] * len(self.kernels)
        assert self.profile_ns is not None, "compiled without profile=True"
        column = {"wall": 0, "cpu": 1}[clock]
        for k, ns in zip(self.call_kernel, self.profile_ns[column::2].tolist()):
            totals[k] += ns * 1e-9
        return totals


def _shown_source(parts) -> str:
    """A group's source as a reader wants it: its functions and the shared GEMM drivers they
    call (the loops and the epilogue; the library compiles each driver once), not the
    micro-kernels and packers every GEMM shares."""
    drivers = {name: text for fn in parts for name, text in fn.helpers.items() if name.startswith(DRIVER_PREFIX)}
    return "\n".join([fn.source for fn in parts] + list(drivers.values()))


__all__ = ["CRuntime"]

