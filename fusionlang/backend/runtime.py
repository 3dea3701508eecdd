"""CompiledGraph: a FusionPlan turned into kernels, buffers and a run loop.

``compile(plan, target)`` schedules and lowers every kernel group, plans buffers once
(:mod:`.memory`), compiles the kernels (C: one shared library with a driver that calls the
kernels in plan order, so a run is one foreign call; CUDA: one CuPy module) and uploads
constants once. ``run(feeds)`` validates feeds, runs the groups in order and returns the
graph outputs as fresh NumPy arrays.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Mapping, cast

import numpy as np

from fusionlang.backend.artifact import save_artifact
from fusionlang.backend.attention_template import AttentionKernel, plan_attention
from fusionlang.backend.concat_inplace import Placement, concat_placements, drop_output_bound, split_at_concats
from fusionlang.backend.cuda_emu import EmuRuntime
from fusionlang.backend.cuda_gemm import PRECISIONS
from fusionlang.backend.kernel_build import KernelBuild
from fusionlang.backend.kernel_info import KernelInfo, KernelTime
from fusionlang.backend.lower import LoweredGroup, lower
from fusionlang.backend.lrn_template import LrnKernel, plan_lrn
from fusionlang.backend.segment_template import SegmentKernel, plan_segment_sum
from fusionlang.backend.transpose_template import TransposeKernel, plan_transpose
from fusionlang.backend.machine import host
from fusionlang.backend.memory import BufferPlan, plan_buffers
from fusionlang.backend.poly import build_program
from fusionlang.backend.runtime_c import CRuntime
from fusionlang.backend.runtime_cuda import CudaRuntime
from fusionlang.backend.schedule_store import ScheduleStore, schedule_key, schedule_target
from fusionlang.backend.streaming import streamed_values
from fusionlang.backend.template import PartSchedules, plan_template
from fusionlang.engine.plan import FusionPlan, Group
from fusionlang.errors import CodegenError, FuseError
from fusionlang.ops.checking import op_call
from fusionlang.ops.evaluate import evaluate_node
from fusionlang.ops.interpreter import check_feeds
from fusionlang.ops.registry import registry_of
from fusionlang.instrument import logger, timed
from fusionlang.stages import CODEGEN, RUN, Stats, format_seconds

#: target -> the runtime that builds and runs its kernels. "cuda-emu" runs the CUDA kernels
#: on the CPU with CUDA's execution model emulated (threads, barriers, warp shuffles): slow,
#: for testing generated CUDA without a GPU
RUNTIMES: dict[str, type[CRuntime] | type[CudaRuntime] | type[EmuRuntime]] = {
    "c": CRuntime, "cuda": CudaRuntime, "cuda-emu": EmuRuntime}
TARGETS = tuple(RUNTIMES)


def scheduling_target(target: str) -> str:
    """The target schedules are selected for when compiling for ``target`` (CodegenError
    for a target that is not one of :data:`TARGETS`)."""
    if target not in TARGETS:
        raise CodegenError(f"unknown target {target!r} (expected one of {', '.join(TARGETS)})")
    return schedule_target(target)


def lower_group(plan: FusionPlan, group: Group, target: str = "c", *, fuse: bool = True,
                constants=None, store: ScheduleStore | None = None) -> LoweredGroup:
    """``group`` as a loop nest: the schedule the plan holds for it (selected for the plan's
    target by the feedback check), or one ``store`` kept for a group of its structure, is
    replayed (:mod:`.schedule_store`), else one is selected now (and kept in ``store``)."""
    store = store if store is not None else ScheduleStore()
    prog = build_program(plan.graph, group.nodes, constants=constants)
    key = schedule_key(plan.graph, group.nodes, constants, target, fuse)
    planned = plan.schedules.get(group.id) if fuse and _planned_for(plan, target) else None
    return lower(store.scheduled(prog, key, target, fuse, planned))


def _planned_for(plan: FusionPlan, target: str) -> bool:
    """Whether the schedules ``plan`` holds were selected for ``target``."""
    return bool(plan.target) and schedule_target(plan.target) == target


def _fold_constants(plan: FusionPlan, group: Group, constants: dict) -> None:
    """A "const" group: evaluate it now (:func:`fusionlang.ops.evaluate.evaluate_node`)."""
    graph = plan.graph
    registry = registry_of(graph)
    for node in plan.nodes_of(group):
        missing = [v for v in node.present_inputs() if v not in constants]
        if missing:
            raise CodegenError(f"group {group.id} is marked const but node {node.name!r} reads {missing[0]!r}, "
                               f"which is not a constant")
        results = evaluate_node(node, [constants[v] if v else None for v in node.inputs], registry,
                                out_dtypes=[graph.types[out].dtype for out in node.outputs])
        for out, arr in zip(node.outputs, results):
            constants[out] = np.ascontiguousarray(arr.astype(graph.types[out].dtype, copy=False))


def _view_aliases(plan: FusionPlan, group: Group) -> dict[str, str] | None:
    """value -> aliased value for a group of pure views (None if some node is not one)."""
    graph = plan.graph
    registry = registry_of(graph)
    aliases = {}
    for node in plan.nodes_of(group):
        opdef = registry.get(node.op)
        present = node.present_inputs()
        if len(node.outputs) != 1 or not present or not opdef.is_view(op_call(graph, node, registry)):
            return None
        src = node.inputs[0]
        if graph.types[src].dtype != graph.types[node.outputs[0]].dtype or \
                graph.types[src].size != graph.types[node.outputs[0]].size:
            return None
        aliases[node.outputs[0]] = src
    return aliases


def lower_plan(plan: FusionPlan, target: str = "c", *, fuse: bool = True, templates: dict | None = None,
               placements: dict[str, Placement] | None = None, store: ScheduleStore | None = None):
    """(lowered kernel groups by id, constants incl. folded groups, view aliases).

    ``templates``: when a dict is given, groups whose complex op runs as the GEMM template of
    ``target`` (:func:`.template.plan_template`) are planned into it, by group id, and not
    lowered to loop nests. ``placements``: when a dict is given, the concats whose inputs
    can be written straight into their output (:mod:`.concat_inplace`) are recorded in it,
    input by input, and run nothing."""
    constants: dict[str, np.ndarray] = dict(plan.graph.constants)
    aliases: dict[str, str] = {}
    lowered: dict[int, LoweredGroup | LrnKernel | AttentionKernel | SegmentKernel | TransposeKernel] = {}
    store = store if store is not None else ScheduleStore()
    written: set[str] = set()  # values kernel groups store to memory
    in_place: dict[str, Group] = {}  # concat output -> its group, run in place
    for group in plan.groups:
        if group.kind == "const":
            _fold_constants(plan, group, constants)
            continue
        if group.kind == "view":
            found = _view_aliases(plan, group)
            if found is not None:
                aliases.update(found)
                continue
        if placements is not None:
            found = concat_placements(plan, group, written, placements)
            if found:
                placements.update(found)
                in_place[plan.nodes_of(group)[0].outputs[0]] = group
                written.update(group.outputs)
                continue
        written.update(group.outputs)
        _lower_kernel(plan, group, target, fuse, constants, templates, lowered, store)
    if placements is not None:
        for output in drop_output_bound(placements, set(plan.graph.outputs), aliases):
            _lower_kernel(plan, in_place[output], target, fuse, constants, templates, lowered, store)
    return lowered, constants, aliases


def _lower_kernel(plan: FusionPlan, group: Group, target: str, fuse: bool, constants: dict,
                  templates: dict | None, lowered: dict, store: ScheduleStore) -> None:
    if templates is not None:
        parts = PartSchedules(store, plan.template_schedules.get(group.id, {}) if _planned_for(plan, target) else {})
        planned = plan_template(plan, group, constants, target=target, parts=parts)
        if planned is not None:
            templates[group.id] = planned
            return
        direct = _direct_kernel(plan, group, constants) if target == "c" else None
        if direct is not None:
            lowered[group.id] = direct
            return
    lg = lower_group(plan, group, target, fuse=fuse, constants=constants, store=store)
    if lg.prog.stmts:
        lowered[group.id] = lg


def _direct_kernel(plan: FusionPlan, group: Group, constants: dict
                   ) -> LrnKernel | AttentionKernel | SegmentKernel | TransposeKernel | None:
    """The C target's kernel of its own for a whole group: an LRN alone, an attention
    block (scores, softmax and weighted sum), a segment_sum alone, or a transpose alone
    that moves the innermost axis."""
    names = list(group.nodes)
    return plan_lrn(plan.graph, names, constants) or plan_attention(plan.graph, names) or \
        plan_segment_sum(plan.graph, names) or plan_transpose(plan.graph, names)


@dataclasses.dataclass(frozen=True, slots=True)
class CompiledStats(Stats):
    """What :func:`fusionlang.compile` built and how long it took; the ``--json`` outputs
    carry these names."""

    #: "c", "cuda" or "cuda-emu"
    target: str
    #: the plan's groups (after compile cut concats in place)
    groups: int
    #: kernel launches per run
    kernels: int
    #: loop nests across the kernels (a templated kernel has none)
    loop_nests: int
    #: distinct kernel functions (a horizontal pack launches one for several groups)
    unique_kernels: int
    #: values that stayed in registers or on-chip memory: never given a buffer
    intermediates_never_allocated: int
    #: concat groups whose inputs are written into their output: they run nothing
    concats_in_place: int
    #: isl schedule searches compile made (0 for a plan fuse() made for this target)
    schedule_searches: int
    #: the memory plan's arena for intermediates, and what it would take unshared
    arena_bytes: int
    unshared_bytes: int
    #: the constants the kernels read (packed GEMM operands included)
    constant_bytes: int
    #: lowering, loop fusion and printing: everything but the compiler
    codegen_seconds: float
    #: the C compiler or NVRTC
    compile_seconds: float


class CompiledGraph:
    """Kernels, buffers and constants of one plan, ready to run."""

    def __init__(self, plan: FusionPlan, target: str | None = None, *, openmp: bool = False, sanitize: bool = False,
                 fuse: bool = True, check_indices: bool = True, templates: bool = True, threads: int | None = None,
                 precision: str = "fp32", profile: bool = False, share_libgomp: bool = False):
        target = target or plan.target or "c"
        scheduling_target(target)
        if precision not in PRECISIONS:
            raise CodegenError(f"precision={precision!r}: expected one of {', '.join(map(repr, PRECISIONS))}")
        if profile and target != "c":
            raise CodegenError(f"profile=True times the kernels of the C target only (this is {target!r})")
        start = time.perf_counter()
        plan.validate()
        with timed(CODEGEN, "split at concats"):  # a plan fuse() made for this target is cut already
            plan = split_at_concats(plan, cut_inside=target == "c")
        #: the schedules this compile selected, where the plan held none that replays
        self.schedule_store = ScheduleStore()
        self.plan = plan
        self.graph = plan.graph
        self.target = target
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise CodegenError(f"threads={threads!r}: expected a positive number of threads")
        #: OpenMP threads a C run uses: None for every core (with openmp), 1 for one thread
        self.threads = threads
        self.openmp = openmp or (threads is not None and threads > 1)
        #: OpenMP threads from the process's libgomp (PyTorch's), not the library's own pool
        self.share_libgomp = share_libgomp
        self.sanitize = sanitize
        #: loaded indices (gather) are checked against their axis; a bad one is an InputError
        self.check_indices = check_indices
        templated: dict = {}
        placements: dict[str, Placement] = {}
        with timed(CODEGEN, "lower groups"):
            lowered, self.constants, self.aliases = lower_plan(
                plan, "c" if target == "c" else "cuda", fuse=fuse,
                templates=templated if templates else None, placements=placements, store=self.schedule_store)
        fused_away = _never_allocated(plan, templated)
        with timed(CODEGEN, "plan buffers"):
            self.buffers: BufferPlan = plan_buffers(plan, self.constants, self.aliases, share=not sanitize,
                                                    scratch={gid: t.scratch for gid, t in templated.items()},
                                                    placements=placements)
        # one thread only: a non-temporal store is ordered for other threads by a fence the
        # printed kernels do not put before OpenMP's barriers
        streamed = streamed_values(plan.graph, host()) if target == "c" and not self.openmp else frozenset()
        build = KernelBuild(plan, lowered, templated, self.constants, self.buffers, openmp=self.openmp,
                            threads=threads, sanitize=sanitize, check_indices=check_indices, streamed=streamed,
                            precision=precision, profile=profile, share_libgomp=share_libgomp)
        self.profiled = profile
        # the build (polyhedral programs, loop IR: isl contexts, sympy trees) is not needed
        # to run and is let go here; so is the graph from before rewriting, so a compiled
        # graph holds little beyond its constants and buffers
        self._runtime = RUNTIMES[target](build)
        self.kernels: list[KernelInfo] = self._runtime.kernels
        self.plan = dataclasses.replace(plan, original=None)
        self.stats = CompiledStats(
            target=target,
            groups=len(plan.groups),
            kernels=sum(k.launches for k in self.kernels),
            loop_nests=sum(k.nests for k in self.kernels),
            unique_kernels=len({k.name for k in self.kernels}),
            intermediates_never_allocated=fused_away,
            concats_in_place=len({p.root for p in placements.values()}),
            schedule_searches=self.schedule_store.search_count,
            arena_bytes=self.buffers.arena_bytes,
            unshared_bytes=self.buffers.unshared_bytes,
            constant_bytes=int(sum(a.nbytes for a in self.constants.values())),
            # codegen: everything here but the compiler (lowering, loop fusion, printing)
            codegen_seconds=time.perf_counter() - start - self._runtime.compiler_seconds,
            compile_seconds=self._runtime.compiler_seconds,
        )
        logger(CODEGEN).info("%s: %d groups -> %d kernels (%d loop nests, %d templates), arena %d bytes, %s",
                             target, len(plan.groups), self.stats.kernels, self.stats.loop_nests,
                             len(templated), self.buffers.arena_bytes, format_seconds(self.stats.codegen_seconds))

    @property
    def sources(self) -> str:
        """All generated source text (C or CUDA)."""
        return self._runtime.source

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        with timed(RUN, "check feeds"):
            checked = self._checked_feeds(feeds)
        with timed(RUN, f"run ({self.target})"):
            return self._runtime.run(checked)

    def run_checked(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``run`` on feeds the caller has already checked (every input, its shape and
        dtype, C-contiguous), untimed: the per-call path of a caller that checks once per
        input shape (the torch backend keys its compiled graphs by shapes and dtypes)."""
        return self._runtime.run(feeds)

    def _checked_feeds(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The feeds checked against the graph's inputs, each as a C-contiguous array."""
        return {k: np.ascontiguousarray(v) for k, v in check_feeds(self.graph, feeds).items()}

    def execute(self, feeds: Mapping[str, np.ndarray]) -> None:
        """Run the kernels on already checked, contiguous feeds without collecting the
        outputs (what benchmarks time; ``run`` is this plus copying results out)."""
        self._runtime.execute(feeds)

    def profile(self, feeds: Mapping[str, np.ndarray], runs: int = 10) -> list[KernelTime]:
        """Run once untimed, then ``runs`` times, and return each kernel's mean wall time
        and process CPU time per run, in launch order (compile with ``profile=True``; C target). Where the time goes, kernel by
        kernel: the sum of the rest over the whole is what fusing them away could save."""
        if not self.profiled:
            raise CodegenError("profile() times kernels compiled with profile=True")
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise CodegenError(f"runs={runs!r}: expected a positive number of runs")
        arrays = self._checked_feeds(feeds)
        runtime = cast(CRuntime, self._runtime)  # profiled: compile let only the C target be
        runtime.execute(arrays)  # untimed: a first run's page faults are not a kernel's
        runtime.reset_profile()
        for _ in range(runs):
            runtime.execute(arrays)
        seconds = [s / runs for s in runtime.kernel_seconds()]
        cpu_seconds = [s / runs for s in runtime.kernel_seconds("cpu")]
        total = sum(seconds) or 1.0
        return [KernelTime(k, s, s / total, c) for k, s, c in zip(self.kernels, seconds, cpu_seconds)]

    def launch(self):
        """CUDA target: enqueue one run on the inputs of the last ``run``/``execute``, copying
        nothing in or out and not waiting for it; returns the CuPy stream it runs on (what GPU
        benchmarks time between CUDA events)."""
        if self.target != "cuda":
            raise CodegenError(f"launch() enqueues on a GPU stream: target 'cuda' only (this is {self.target!r})")
        self._runtime.launch()
        return self._runtime.stream

    def save(self, path, *, notes: dict | None = None) -> Path:
        """Save this compiled graph (C target) as an artifact directory at ``path``, which
        :func:`fusionlang.load` loads back, in another process too, without compiling
        (:mod:`.artifact`); ``notes`` (JSON data) are kept in its manifest. Returns the path."""
        return save_artifact(self, path, notes)

    def __repr__(self) -> str:
        return (f"<CompiledGraph {self.graph.name!r} target={self.target}: {self.stats.kernels} kernels, "
                f"{self.buffers.summary()}>")


def _never_allocated(plan: FusionPlan, templates: dict) -> int:
    """Values computed inside a kernel group that never reach memory: neither the group's
    outputs nor the scratch its template parts pass through memory."""
    count = 0
    for g in plan.groups:
        if g.kind != "kernel":
            continue
        scratch = set(templates[g.id].scratch) if g.id in templates else set()
        made = {v for n in plan.nodes_of(g) for v in n.outputs if v}
        count += len(made - set(g.outputs) - scratch)
    return count


def compile(plan: FusionPlan, target: str | None = None, *, openmp: bool = False, sanitize: bool = False,
            fuse: bool = True, check_indices: bool = True, templates: bool = True,
            threads: int | None = None, precision: str = "fp32", profile: bool = False,
            share_libgomp: bool = False) -> CompiledGraph:
    """Compile a fusion plan for ``target`` ("c", "cuda" or "cuda-emu"; default: the
    plan's own target, else "c"). The schedules the plan holds for that target are
    replayed; a group without one is scheduled now (``stats.schedule_searches``).

    ``check_indices=False`` drops the check of gathered indices: an index outside its axis
    then reads memory it should not (for indices known to be in range; the check is one
    compare per gathered index). With it, a bad index makes ``run`` raise InputError naming
    the node and the index. Out of memory in a kernel raises ResourceError.
    ``templates=False`` keeps conv and matmul groups as plain loop nests on the C target
    (see :mod:`.template`). ``threads=N`` runs the C target's parallel loops and GEMM tiles
    on N OpenMP threads (``openmp=True`` alone: every core, or ``OMP_NUM_THREADS``), run by
    the library's own pool (:mod:`.thread_pool`: idle threads spin briefly, then sleep),
    or with ``share_libgomp=True`` by the process's libgomp (PyTorch's, whose threads its
    own ops use between ours); the default is one thread. No sum is split across threads, so an
    OpenMP build gives the same bits on any number of them; the build without OpenMP
    (one thread) may differ from it in the last bit of a vectorized reduction.
    ``precision`` (CUDA targets): how conv and matmul multiply on tensor cores (sm_80 and
    newer): "fp32" (default) in three TF32 passes over split operands, as accurate as fp32;
    "tf32" in one pass, about three times the speed and 1e-3 relative error.
    ``profile=True`` (C target) times every kernel call; ``CompiledGraph.profile(feeds)``
    reports the times. Two clock reads a kernel call cost about 35 ns (18 ns each where
    measured), so it is off by default."""
    try:
        return CompiledGraph(plan, target, openmp=openmp, sanitize=sanitize, fuse=fuse, check_indices=check_indices,
                             templates=templates, threads=threads, precision=precision, profile=profile,
                             share_libgomp=share_libgomp)
    except FuseError:
        raise
    except RecursionError as exc:
        raise CodegenError(f"expression too deep to compile: {exc}") from None


__all__ = ["RUNTIMES", "TARGETS", "CompiledGraph", "CompiledStats", "KernelInfo", "KernelTime", "compile", "lower_group"]
