"""Running generated CUDA with CuPy: one RawModule, buffers and constants on the device.

The module holds every group's kernels and the horizontal packs (Apollo layer III:
independent single-kernel groups of ``plan.horizontal`` launched as one kernel). Buffers
live in one device arena planned like the C one; feeds are copied into device buffers
allocated once; constants are uploaded once at compile time. A run copies the feeds in,
replays the kernels as one CUDA graph (:mod:`.cuda_graph`) on the runtime's stream and
synchronizes once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Mapping

import numpy as np

from fusionlang.backend.cuda_gemm import prelude as gemm_prelude
from fusionlang.backend.cuda_graph import GraphLauncher
from fusionlang.backend.cuda_template import template_group
from fusionlang.backend.emit_cuda import CUDA_PRELUDE, CudaGroup, emit_group, horizontal_kernel
from fusionlang.backend.failures import RECORD, failure
from fusionlang.backend.kernel_build import KernelBuild
from fusionlang.backend.kernel_info import KernelInfo
from fusionlang.backend.memory import ALIGN
from fusionlang.backend.outputs import gather_outputs
from fusionlang.backend.storage_codecs import codec
from fusionlang.errors import CodegenError
from fusionlang.ir.types import HALF_FLOATS


@dataclass
class Launch:
    kernel: str
    grid: int
    block: int
    #: (member position in a pack, group id) per parameter group; see CudaProgram.launches
    groups: list[int]
    scratch: int = 0
    #: the kernel's own parameters and C types (a templated group's parts), else its groups'
    params: list | None = None
    param_types: list | None = None
    exact_block: bool = False

    def arrays(self, program: "CudaProgram") -> list:
        """The arrays passed to the kernel, in order (scratch and error record not included)."""
        if self.params is not None:
            return self.params
        return [a for gid in self.groups for a in program.groups[gid].params]

    def types(self, program: "CudaProgram") -> list[str]:
        if self.param_types is not None:
            return self.param_types
        return [t for gid in self.groups for t in program.groups[gid].param_types]


@dataclass
class CudaProgram:
    """All CUDA text of a plan and the launches a run makes, in order."""

    groups: dict[int, CudaGroup]
    packs: dict[str, str] = field(default_factory=dict)
    launches: list[Launch] = field(default_factory=list)
    #: how the GEMM template multiplies on tensor cores (cuda_gemm.PRECISIONS)
    precision: str = "fp32"

    @property
    def source(self) -> str:
        pieces: dict[str, str] = {}  # by the name each defines: a kernel two groups share, once
        for g in self.groups.values():
            for name, text in g.named_sources().items():
                pieces.setdefault(name, text)
        return "\n".join([self._prelude(self.groups.values()), *pieces.values(), *self.packs.values()])

    def sources(self) -> dict[str, str]:
        """Compilable translation units: one per distinct group, one per pack."""
        out: dict[str, str] = {}
        for g in self.groups.values():
            out.setdefault(g.name, self._prelude([g]) + g.source)
        for name, text in self.packs.items():
            members = [g for g in self.groups.values() if any(f"{u[0]}(" in text for u in g.units)]
            out[name] = CUDA_PRELUDE + "\n".join(dict.fromkeys(m.source for m in members)) + text
        return out

    @property
    def sites(self) -> list:
        """Every checked index of the program, by site number."""
        return [site for g in self.groups.values() for site in g.sites]

    @property
    def scratch_bytes(self) -> int:
        return max((k.scratch_bytes for g in self.groups.values() for k in g.kernels), default=0)

    def _prelude(self, groups) -> str:
        """The helpers every unit needs, and the GEMM template's where one of ``groups`` has one."""
        templated = any(k.mode == "gemm template" for g in groups for k in g.kernels)
        return CUDA_PRELUDE + (gemm_prelude(self.precision) if templated else "")


def build_cuda_program(plan, lowered: dict, check_indices: bool = True, templates: dict | None = None,
                       precision: str = "fp32") -> CudaProgram:
    """The CUDA text and launches of ``plan``'s ``lowered`` groups and of its ``templates``
    (group id -> TemplateGroup planned for CUDA: :mod:`.cuda_template`), horizontal packs
    included; the templates multiply at ``precision`` (:data:`.cuda_gemm.PRECISIONS`)."""
    templates = templates or {}
    groups: dict[int, CudaGroup] = {}
    sites = 0
    for group in plan.groups:
        label = f"group {group.id}"
        if group.id in templates:
            cg = template_group(templates[group.id], label, check_indices=check_indices, first_site=sites,
                                precision=precision)
        elif group.id in lowered:
            cg = emit_group(lowered[group.id], label, check_indices=check_indices, first_site=sites)
        else:
            continue
        sites += len(cg.sites)
        cg.group = group.id
        groups[group.id] = cg
    prog = CudaProgram(groups, precision=precision)
    packed: dict[int, str] = {}
    for k, members in enumerate(plan.horizontal):
        ok = [gid for gid in members if gid in groups and len(groups[gid].units) == 1
              and groups[gid].kernels[0].scratch_bytes == 0]
        if len(ok) < 2:
            continue
        name = f"fl_h_{k}_" + "_".join(groups[g].name[5:13] for g in ok)
        text, grid = horizontal_kernel(name, [groups[g] for g in ok])
        prog.packs[name] = text
        for gid in ok:
            packed[gid] = name
        prog.launches.append(Launch(name, grid, groups[ok[0]].kernels[0].block, ok))
    done_packs = set()
    ordered: list[Launch] = []
    for group in plan.groups:
        gid = group.id
        if gid not in groups:
            continue
        if gid in packed:
            name = packed[gid]
            if name not in done_packs:
                done_packs.add(name)
                ordered.extend(la for la in prog.launches if la.kernel == name)
            continue
        for kern in groups[gid].kernels:
            ordered.append(Launch(kern.name, kern.grid, kern.block, [gid], kern.scratch_bytes, kern.params,
                                  kern.param_types, kern.exact_block))
    prog.launches = ordered
    return prog


def kernel_infos(build: KernelBuild, program: CudaProgram) -> list[KernelInfo]:
    """KernelInfo per group; a horizontal pack's launch is counted on its first member."""
    infos = []
    first_of_pack = {la.groups[0] for la in program.launches if len(la.groups) > 1}
    packed = {gid for la in program.launches if len(la.groups) > 1 for gid in la.groups}
    for gid, g in program.groups.items():
        group = build.plan.group(gid)
        launches = (1 if gid in first_of_pack else 0) if gid in packed else len(g.kernels)
        strategy = "; ".join(k.strategy for k in g.kernels if k.strategy) if gid in build.templates else \
            build.lowered[gid].scheduled.tree.strategy
        infos.append(KernelInfo(gid, g.name, g.nests, g.source, list(group.nodes), strategy,
                                [a.value for a in g.params], launches=launches))
    return infos


def cuda_available() -> bool:
    """Whether CuPy is installed and sees at least one CUDA device."""
    try:
        import cupy  # here, not at the top: CuPy is optional and slow to import

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no driver, no device, no CuPy: all mean "no"
        return False


class CudaRuntime:
    """The kernels of a :class:`.kernel_build.KernelBuild` as one CuPy module: ``kernels``
    and ``source`` say what was built, ``run`` and ``execute`` run it."""

    def __init__(self, build: KernelBuild):
        if not cuda_available():
            raise CodegenError("target 'cuda' needs a CUDA device visible to CuPy (none found); use target 'c'")
        import cupy  # here, not at the top: CuPy is optional and slow to import

        self.cp = cupy
        self.graph, self.buffers, self.constants = build.graph, build.buffers, build.constants
        self.program = build_cuda_program(build.plan, build.lowered, build.check_indices, build.templates,
                                          build.precision)
        self.kernels = kernel_infos(build, self.program)
        self.source = self.program.source
        self.errors = cupy.zeros(RECORD, dtype=cupy.int64)
        compiler_started = time.perf_counter()
        self.module = cupy.RawModule(code=self.source, options=("-std=c++17",))
        # NVRTC compiles the module at the first look-up of one of its kernels
        functions = {name: self.module.get_function(name) for name in {la.kernel for la in self.program.launches}}
        #: seconds NVRTC took (CuPy caches compiled modules on disk: near 0 when it held this one)
        self.compiler_seconds = time.perf_counter() - compiler_started
        buffers = build.buffers
        self.arena = cupy.zeros(buffers.arena_bytes + ALIGN, dtype=cupy.uint8)
        self.scratch = cupy.zeros(max(self.program.scratch_bytes, 16), dtype=cupy.uint8)
        self.device: dict[str, Any] = {}  # cupy arrays
        for name, b in buffers.buffers.items():
            if b.kind == "const":
                self.device[name] = cupy.asarray(_as_stored(build.constants[name]))
            elif b.kind == "input":
                t = build.graph.types[name]
                self.device[name] = cupy.empty(t.shape, dtype=_stored_dtype(t.dtype))
        self.aux: dict[int, object] = {}
        self.stream = cupy.cuda.Stream(non_blocking=True)
        launches = [self._reset_errors]
        for la in self.program.launches:
            fn = functions[la.kernel]
            args = tuple([self._arg(a) for a in la.arrays(self.program)] + [self.scratch, self.errors])
            launches.append(partial(fn, (la.grid,), (la.block,), args))
        self.launcher = GraphLauncher(self.stream, launches)
        # the uploads above ran on the legacy default stream, which a non-blocking stream
        # does not wait for
        cupy.cuda.Device().synchronize()

    def _arg(self, array):
        cp = self.cp
        if array.data is not None:
            if id(array) not in self.aux:
                self.aux[id(array)] = cp.asarray(_as_stored(array.data))
            return self.aux[id(array)]
        root = self.buffers.root(array.value)
        b = self.buffers.buffers[root]
        if b.kind in ("const", "input"):
            return self.device[root]
        return self.arena[b.offset:b.offset + max(b.nbytes, 1)]

    def _reset_errors(self) -> None:
        self.errors.fill(0)

    def execute(self, feeds: Mapping[str, np.ndarray]) -> None:
        """Copy the feeds in, run the kernels (a CUDA graph after the first run: see
        :mod:`.cuda_graph`), and synchronize once, reading the error record."""
        for name, b in self.buffers.buffers.items():
            if b.kind == "input":
                self.device[name].set(_as_stored(feeds[name]), stream=self.stream)
        self.launch()
        record = self.errors.get(stream=self.stream)
        if record[0]:
            raise failure(record, self.program.sites, "(CUDA)")

    def launch(self) -> None:
        """Enqueue one run on the inputs already on the device, without waiting for it
        (what GPU benchmarks time, between CUDA events on ``stream``)."""
        self.launcher.run()

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.execute(feeds)

        def read(name, b, t):
            return self.arena[b.offset:b.offset + t.nbytes].get(stream=self.stream).view(t.dtype).reshape(t.shape)
        return gather_outputs(self.graph, self.buffers, self.constants, feeds, read)


def _stored_dtype(dtype: str):
    """The dtype CuPy holds a tensor of ``dtype`` as: 16-bit floats as their bit patterns
    (CuPy has no bfloat16; the kernels take both as unsigned short, see backend.half), the
    narrow storage types as their bytes (backend.storage_codecs), others as they are."""
    if dtype in HALF_FLOATS:
        return np.uint16
    return np.uint8 if codec(dtype) else dtype


def _as_stored(array) -> np.ndarray:
    """``array`` as CuPy can hold it (see :func:`_stored_dtype`): a view, never a conversion."""
    array = np.ascontiguousarray(array)
    name = array.dtype.name
    return array.view(_stored_dtype(name)) if name in HALF_FLOATS or codec(name) else array


__all__ = ["CudaProgram", "CudaRuntime", "build_cuda_program", "cuda_available", "kernel_infos"]
