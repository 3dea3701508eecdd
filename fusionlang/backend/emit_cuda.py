"""Print a lowered group as CUDA kernels (CuPy RawModule source) from the same loop IR.

A group's IR splits into *units*, one kernel each (:func:`.cuda_passes.split_units`); which
mapping a unit takes and which rows move as float4 are passes too (:mod:`.cuda_passes`), as
are the loop decisions shared with C (:mod:`.codegen_passes`): this module prints them.

Two mappings of a unit's outer points:

* **thread**: one thread per outer point runs the inner code sequentially (elementwise
  chains; conv/matmul with their epilogue, each thread accumulating one output);
* **block**: one block per outer point; inner parallel loops are split across the block's
  threads, an inner reduction loop accumulates per-thread partials that a warp-shuffle +
  shared-memory reduction combines (every thread gets the result), and intermediates kept
  per point live in shared memory. This is Apollo's memory stitching (layer II): softmax,
  log_softmax and layer_norm run as one kernel whose row statistics never leave the chip.

Every unit is a ``__device__`` function of (block index, block count), wrapped by an
``extern "C" __global__`` kernel; Apollo's parallel stitching (layer III) launches
independent small units as one kernel by splitting the grid between them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from fusionlang.backend.cexpr import CUDA, IndexPrinter, ctype, float_literal, helpers, integer_literal
from fusionlang.backend.codegen_passes import CodegenOptions, itemsize, plan_codegen
from fusionlang.backend.cuda_passes import (BLOCK, THREAD_BUFFER_LIMIT, WARPS, VECTOR, Unit, UnitFacts, UnitPlan, VectorAccesses,
                                            cross_arrays, plan_units, split_units)
from fusionlang.backend.emit_c import CPrinter, group_comment
from fusionlang.backend.loopir import Assign, For, If, Storage, walk
from fusionlang.backend.lower import LoweredGroup
from fusionlang.errors import CodegenError

#: scratch memory per block-mapped kernel is kept below this by capping its grid
SCRATCH_LIMIT = 64 * 2**20
MAX_GRID = 1 << 20

_IDENTITY = {"sum": 0.0, "prod": 1.0, "max": float("-inf"), "min": float("inf")}

#: the accumulator dtypes a block all-reduce exists for: (suffix, CUDA type); integer results
#: accumulate in int64 or uint64 (poly._accumulator_dtype)
BLOCK_REDUCE_TYPES = {"float32": ("f", "float"), "float64": ("d", "double"), "int64": ("ll", "long long"),
                      "uint64": ("ull", "unsigned long long")}


def reduction_identity(op: str, dtype: str) -> str:
    """The literal a partial of ``op`` starts from, in the accumulator's ``dtype``."""
    if dtype in ("int64", "uint64"):
        if op in ("sum", "prod"):
            return str(int(_IDENTITY[op]))
        info = np.iinfo(dtype)
        return integer_literal(int(info.min if op == "max" else info.max))
    return float_literal(_IDENTITY[op], dtype, CUDA)


def reduce_helpers() -> str:
    """Block-wide all-reduce for each (op, type): every thread returns the block's result."""
    out = []
    for dtype, (suffix, t) in BLOCK_REDUCE_TYPES.items():
        # a signed integer accumulator only takes a max or a min (sums wrap in uint64)
        for op in ("max", "min") if dtype == "int64" else ("sum", "prod", "max", "min"):
            ident = reduction_identity(op, dtype)
            ext = {"ll": f"fl_i{op}(a, b)", "ull": f"fl_u{op}(a, b)"}.get(suffix, f"fl_{op}{suffix}(a, b)")
            combine = {"sum": "a + b", "prod": "a * b"}.get(op, ext)
            out.append(f"""static __device__ __forceinline__ {t} fl_{op}_{suffix}({t} a, {t} b) {{ return {combine}; }}
static __device__ {t} fl_block_{op}_{suffix}({t} v, {t}* sh) {{
  for (int o = 16; o > 0; o >>= 1) v = fl_{op}_{suffix}(v, __shfl_xor_sync(0xffffffffu, v, o));
  int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (lane == 0) sh[wid] = v;
  __syncthreads();
  v = (int)threadIdx.x < nw ? sh[threadIdx.x] : {ident};
  if (wid == 0) for (int o = 16; o > 0; o >>= 1) v = fl_{op}_{suffix}(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x == 0) sh[0] = v;
  __syncthreads();
  return sh[0];
}}
static __device__ __forceinline__ {t} fl_warp_{op}_{suffix}({t} v) {{
  for (int o = 16; o > 0; o >>= 1) v = fl_{op}_{suffix}(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}}""")
    return "\n".join(out) + "\n"


CUDA_PRELUDE = helpers(CUDA) + reduce_helpers()


@dataclass
class CudaKernel:
    """One launch: ``name<<<grid, block>>>(params..., scratch)``."""

    name: str
    grid: int
    block: int
    group: int
    mode: str
    #: bytes of the shared scratch area this kernel uses (offsets are baked in)
    scratch_bytes: int = 0
    #: its own parameters (arrays) and their C types, where they are not its group's
    params: list | None = None
    param_types: list | None = None
    #: the kernel needs exactly ``block`` threads (a template's warp tiles), not any multiple of 32
    exact_block: bool = False
    #: what the report shows as its strategy, where it is not the group's schedule
    strategy: str = ""


@dataclass
class CudaGroup:
    group: int
    source: str
    kernels: list[CudaKernel]
    params: list
    #: device functions per unit, for horizontal packing: (function name, grid, mode)
    units: list[tuple[str, int, str]] = field(default_factory=list)
    nests: int = 1
    #: C types of the parameters ("const float*"), scratch and error pointers not included
    param_types: list[str] = field(default_factory=list)
    name: str = ""
    #: checked indices, numbered across the program from the first one's number
    sites: list = field(default_factory=list)
    #: its source in named pieces, where it has several (a template and the loop nests
    #: around it); two groups may share a piece, which a program defines once
    pieces: dict[str, str] = field(default_factory=dict)

    def named_sources(self) -> dict[str, str]:
        """Each piece of source by the name it defines (the whole source, by the group's name)."""
        return self.pieces or {self.name: self.source}


class _CudaPrinter:
    """Prints a planned group as CUDA units: thread-level code is a C printer's
    (``self.c``, in the CUDA flavor, declaring locals our way); block level is ours."""

    def __init__(self, group: LoweredGroup, cross: dict[int, int], cross_bytes: int, check_indices: bool = True,
                 first_site: int = 0):
        self.c = CPrinter(group, CUDA, check_indices=check_indices, first_site=first_site, declare=self.decl)
        self.shared_decls: list[str] = []
        self.scratch = 0
        #: kernel-scope array id -> offset in the scratch area (shared between units: cuda_passes.cross_arrays)
        self.cross = cross
        self.cross_bytes = cross_bytes
        #: warp mode: each warp of a block is one outer point's team (short rows)
        self.warp = False

    # ----- what differs from the sequential printer -----------------------------------
    def decl(self, st: Storage, ind: str):
        t = ctype(st.array.dtype, self.c.flavor)
        name = self.c.names[st.array.id]
        if st.kind == "scalar":
            return [f"{ind}{t} {name};"], []
        if st.size > THREAD_BUFFER_LIMIT * 16:
            raise CodegenError(f"a per-thread buffer of {st.size} elements is too large for the GPU")
        return [f"{ind}{t} {name}[{st.size}];"], []

    def function_params(self) -> list[str]:
        params = []
        for a in self.c.g.params:
            t = ctype(a.dtype, self.c.flavor)
            const = "const " if a.role == "input" else ""
            params.append(f"{const}{t}* __restrict__ {self.c.names[a.id]}")
        params.append("unsigned char* __restrict__ fl_scratch")
        params.append("long long* __restrict__ fl_err")
        return params

    # ----- the cooperating threads: a block, or one warp of it (warp mode) ---------------
    @property
    def tid(self) -> str:
        return "fl_lane" if self.warp else "threadIdx.x"

    @property
    def nthreads(self) -> str:
        return "32" if self.warp else "blockDim.x"

    @property
    def sync(self) -> str:
        return "__syncwarp();" if self.warp else "__syncthreads();"

    def _shared_decl(self, t: str, name: str, size: int | None) -> str:
        """A shared array (or scalar, ``size`` None) of the block, or one per warp in warp mode."""
        if not self.warp:
            return f"  __shared__ {t} {name}{'' if size is None else f'[{size}]'};"
        if size is None:
            return f"  __shared__ {t} fl_w_{name}[{WARPS}]; {t}& {name} = fl_w_{name}[threadIdx.x >> 5];"
        return f"  __shared__ {t} fl_w_{name}[{WARPS}][{size}]; {t}* const {name} = fl_w_{name}[threadIdx.x >> 5];"

    # ----- placement of block-level arrays ----------------------------------------------
    def place_block_arrays(self, arrays: list[Storage], ind: str, per_block: bool) -> list[str]:
        """Declare arrays shared by a block's threads: scalars stay per-thread (all
        threads compute the same value), buffers go to shared memory or scratch as the
        unit's plan placed them (``self.shared``)."""
        lines = []
        for st in arrays:
            t = ctype(st.array.dtype, self.c.flavor)
            name = self.c.names[st.array.id]
            if st.kind == "scalar":
                lines.append(f"{ind}{t} {name};")
                continue
            nbytes = st.size * itemsize(st.array.dtype)
            if st.array.id in self.shared:
                self.shared_decls.append(self._shared_decl(t, name, st.size))
            else:
                offset = (self.scratch + 15) // 16 * 16
                self.scratch = offset + nbytes
                self.scratch_slices.append((name, t, offset, nbytes, per_block))
                lines.append(f"{ind}{t}* {name} = ({t}*)(fl_scratch + @SLICE{len(self.scratch_slices) - 1}@);")
        return lines

    # ----- block level ------------------------------------------------------------------
    def block_body(self, nodes: list, depth: int) -> None:
        ind = "  " * depth
        for n in nodes:
            if isinstance(n, Assign):
                st = self.c.g.storage.get(n.array.id)
                if st is not None and st.kind == "scalar":
                    self.c.lines.append(ind + self.c.assign(n))
                else:
                    self.c.lines.append(f"{ind}if ({self.tid} == 0) {{ {self.c.assign(n)} }}")
                    self.c.lines.append(f"{ind}{self.sync}")
            elif isinstance(n, If):
                ip = IndexPrinter()
                self.c.lines.append(f"{ind}if ({ip(n.cond)}) {{")
                self.block_body(n.then, depth + 1)
                if n.orelse:
                    self.c.lines.append(f"{ind}}} else {{")
                    self.block_body(n.orelse, depth + 1)
                self.c.lines.append(f"{ind}}}")
            elif isinstance(n, For):
                self.block_loop(n, depth)

    def block_loop(self, f: For, depth: int) -> None:
        """Print a loop of the point's team as its plan says (``plan.threads``)."""
        ind = "  " * depth
        ip = IndexPrinter()
        v = f.var.name
        it = self.c.flavor.int_type
        head = (f"for ({it} {v} = {ip(f.init)} + (({it}){self.tid}) * {f.step}; {ip.loop_cond(f.cond)}; "
                f"{v} += (({it}){self.nthreads}) * {f.step}) {{")
        if f.plan.threads == "split":
            def print_loop(d: int) -> None:
                self.c.lines.append("  " * d + head)
                self.loop_body(f, d + 1)
                self.c.lines.append("  " * d + "}")

            if f.plan.reciprocals:
                self.c.with_reciprocals(f, depth, print_loop)
            else:
                print_loop(depth)
            self.c.lines.append(f"{ind}{self.sync}")
            return
        if f.plan.threads == "reduce":
            # per-thread partials of each accumulator, then a block all-reduce
            saved = dict(self.c.names)
            partial = {}
            for aid in f.plan.block_scalars:
                kind = next(s.reduce for s in self.c.g.prog.stmts
                            if s.kind == "update" and s.acc is not None and s.acc.id == aid and s.reduce is not None)
                dtype = self.c.g.storage[aid].array.dtype
                pname = f"part{aid}"
                partial[aid] = (pname, kind, dtype)
                ident = reduction_identity(kind, dtype)
                self.c.lines.append(f"{ind}{ctype(dtype, self.c.flavor)} {pname} = {ident};")
                self.c.names[aid] = pname
            self.c.lines.append(ind + head)
            self.loop_body(f, depth + 1)
            self.c.lines.append(f"{ind}}}")
            self.c.names = saved
            for aid, (pname, kind, dtype) in partial.items():
                suffix = BLOCK_REDUCE_TYPES[dtype][0]
                name = self.c.names[aid]
                if self.warp:  # a warp's lanes all-reduce by shuffles alone
                    total = f"fl_warp_{kind}_{suffix}({pname})"
                else:
                    sh = f"fl_red_{suffix}"
                    self.uses_reduction.add(sh)
                    total = f"fl_block_{kind}_{suffix}({pname}, {sh})"
                self.c.lines.append(f"{ind}{name} = fl_{kind}_{suffix}({name}, {total});")
            self.c.lines.append(f"{ind}{self.sync}")
            return
        # a loop the threads cannot share: thread 0 runs it, then shares what it computed
        self.c.lines.append(f"{ind}if ({self.tid} == 0) {{")
        self.c.loop(f, depth + 1)
        written = f.plan.block_scalars
        for aid in written:
            t = ctype(self.c.g.storage[aid].array.dtype, self.c.flavor)
            self.shared_decls.append(self._shared_decl(t, f"bc{aid}", None))
            self.c.lines.append(f"{ind}  bc{aid} = {self.c.names[aid]};")
        self.c.lines.append(f"{ind}}}")
        self.c.lines.append(f"{ind}{self.sync}")
        for aid in written:
            self.c.lines.append(f"{ind}{self.c.names[aid]} = bc{aid};")
        if written:
            self.c.lines.append(f"{ind}{self.sync}")

    def loop_body(self, f: For, depth: int) -> None:
        ind = "  " * depth
        for st in self.c.inner.get(id(f), []):
            d, _ = self.decl(st, ind)
            self.c.lines.extend(d)
        self.c.body(f.body, depth)

    # ----- units --------------------------------------------------------------------------
    def unit(self, u: Unit, fname: str, facts: UnitFacts, plan: UnitPlan) -> tuple[str, int, str, int]:
        """Device function text, grid size, mode and scratch bytes of one unit, mapped as
        its plan says (see cuda_passes.UnitPlan)."""
        mode = plan.mode
        self.shared = plan.shared
        self.c.lines = []
        self.shared_decls = []
        self.scratch = 0
        self.scratch_slices: list[tuple] = []
        self.uses_reduction: set[str] = set()
        self.warp = mode == "warp"
        bounds, extents, npoints = facts.bounds, facts.extents, facts.npoints
        level_arrays, tops, cross = facts.level_arrays, facts.tops, facts.cross
        it = self.c.flavor.int_type
        params = ", ".join(self.function_params() + [f"{it} fl_bid", f"{it} fl_nb"])
        self.c.lines.append(f"static __device__ void {fname}({params}) {{")
        body_start = len(self.c.lines)
        for st in cross:
            t = ctype(st.array.dtype, self.c.flavor)
            where = f"fl_scratch + {self.cross[st.array.id]}LL"
            if st.kind == "scalar":
                self.c.lines.append(f"  {t} {self.c.names[st.array.id]} = *({t}*)({where});")
            else:
                self.c.lines.append(f"  {t}* {self.c.names[st.array.id]} = ({t}*)({where});")
        vector = VECTOR if plan.vector is not None else 1
        if plan.vector is not None:
            self._vector_unit(u, plan.vector, extents, bounds, npoints, tops + level_arrays)
        elif mode == "thread":
            self.c.lines.append(f"  for ({it} t = fl_bid * blockDim.x + threadIdx.x; t < {npoints}LL; "
                              f"t += fl_nb * blockDim.x) {{")
            self._decompose(u.outer, extents, bounds, "    ")
            for st in tops + level_arrays:
                d, _ = self.decl(st, "    ")
                self.c.lines.extend(d)
            self.c.body(u.inner, 2)
            self.c.lines.append("  }")
        else:
            decl_lines = self.place_block_arrays(tops, "  ", per_block=True)
            self.c.lines.extend(decl_lines)
            if self.warp:
                self.c.lines.append("  const int fl_lane = threadIdx.x & 31;")
                self.c.lines.append(f"  const {it} fl_wpb = blockDim.x >> 5;")
                self.c.lines.append(f"  for ({it} t = fl_bid * fl_wpb + (threadIdx.x >> 5); t < {npoints}LL; "
                                  f"t += fl_nb * fl_wpb) {{")
            else:
                self.c.lines.append(f"  for ({it} t = fl_bid; t < {npoints}LL; t += fl_nb) {{")
            self._decompose(u.outer, extents, bounds, "    ")
            self.c.lines.extend(self.place_block_arrays(level_arrays, "    ", per_block=True))
            self.block_body(u.inner, 2)
            self.c.lines.append(f"    {self.sync}")
            self.c.lines.append("  }")
            written = {n.array.id for n in walk(u.inner) if isinstance(n, Assign)}
            for st in cross:
                if st.kind == "scalar" and st.array.id in written:
                    t = ctype(st.array.dtype, self.c.flavor)
                    self.c.lines.append(f"  if (threadIdx.x == 0 && fl_bid == 0) *({t}*)(fl_scratch + "
                                      f"{self.cross[st.array.id]}LL) = {self.c.names[st.array.id]};")
        self.c.lines.append("}")
        shared = list(self.shared_decls)
        for sh in sorted(self.uses_reduction):
            t = dict(BLOCK_REDUCE_TYPES.values())[sh[len("fl_red_"):]]
            shared.append(f"  __shared__ {t} {sh}[32];")
        self.c.lines[body_start:body_start] = shared
        text = "\n".join(self.c.lines) + "\n"
        if mode == "thread":
            grid = max(1, min((npoints // vector + BLOCK - 1) // BLOCK, MAX_GRID))
        elif mode == "warp":
            grid = max(1, min((npoints + WARPS - 1) // WARPS, MAX_GRID))
        else:
            per_block = self.scratch
            grid = max(1, min(npoints, MAX_GRID))
            if per_block:
                grid = max(1, min(grid, SCRATCH_LIMIT // per_block))
        # each block gets its own slice of the scratch area, after the cross-unit arrays
        base = self.cross_bytes
        for k, (name, t, offset, nbytes, _) in enumerate(self.scratch_slices):
            text = text.replace(f"@SLICE{k}@", f"{base}LL + fl_bid % {grid} * {self.scratch}LL + {offset}")
        scratch_total = base + (self.scratch * grid if self.scratch_slices else 0)
        return text, grid, mode, scratch_total

    # ----- 16-byte accesses -----------------------------------------------------------------
    def _vector_unit(self, u: Unit, vector: VectorAccesses, extents, bounds, npoints: int,
                     decls: list[Storage]) -> None:
        """A thread-mapped unit whose threads each take VECTOR innermost neighbours: the
        float32 rows it reads and writes at unit stride move as float4 (one 16-byte load or
        store per row), the statements run once per neighbour on registers."""
        it = self.c.flavor.int_type
        last = u.outer[-1]
        loads, stores = vector.loads, vector.stores
        self.c.lines.append(f"  for ({it} t = fl_bid * blockDim.x + threadIdx.x; t < {npoints // VECTOR}LL; "
                          f"t += fl_nb * blockDim.x) {{")
        self._decompose(u.outer, extents[:-1] + [extents[-1] // VECTOR], bounds, "    ", VECTOR)
        first = {last.var: sp.Symbol(f"fl_{last.var.name}")}
        ip = IndexPrinter()
        rows: dict[tuple, str] = {}  # (array id, offset) -> its float4: a row read twice is loaded once
        for key, (aid, offset) in loads.items():
            if (aid, offset) not in rows:
                rows[aid, offset] = f"fl_l{len(rows)}"
                self.c.lines.append(f"    const float4 {rows[aid, offset]} = "
                                  f"*(const float4*)&{self.c.names[aid]}[{ip(offset.subs(first))}];")
            self.c.load_target[key] = f"((const float*)&{rows[aid, offset]})[fl_v]"
        for k in range(len(stores)):
            self.c.lines.append(f"    float4 fl_s{k};")
        for k, aid in enumerate(stores):
            self.c.row_target[aid] = f"((float*)&fl_s{k})[fl_v]"
        self.c.lines.append("#pragma unroll")
        self.c.lines.append(f"    for (int fl_v = 0; fl_v < {VECTOR}; fl_v++) {{")
        self.c.lines.append(f"      const {it} {last.var.name} = fl_{last.var.name} + fl_v * {last.step};")
        for st in decls:
            d, _ = self.decl(st, "      ")
            self.c.lines.extend(d)
        self.c.body(u.inner, 3)
        self.c.lines.append("    }")
        for k, (aid, offset) in enumerate(stores.items()):
            self.c.lines.append(f"    *(float4*)&{self.c.names[aid]}[{ip(offset.subs(first))}] = fl_s{k};")
            del self.c.row_target[aid]
        self.c.load_target.clear()
        self.c.lines.append("  }")

    def _decompose(self, outer: list[For], extents, bounds, ind: str, vector: int = 1) -> None:
        """The outer loop variables of point ``t``; with ``vector`` > 1, ``t`` counts groups
        of that many innermost points and the innermost variable is printed as the first
        of its group, ``fl_<var>``."""
        it = self.c.flavor.int_type
        rest = "t"
        for k, f in enumerate(outer):
            inner = 1
            for e in extents[k + 1:]:
                inner *= e
            first, _ = bounds[k]
            q = f"({rest} / {inner}LL)" if inner > 1 else rest
            q = f"({q} % {extents[k]}LL)" if k > 0 else q
            if vector > 1 and k == len(outer) - 1:
                self.c.lines.append(f"{ind}const {it} fl_{f.var.name} = {first} + {q} * {vector * f.step};")
            else:
                self.c.lines.append(f"{ind}const {it} {f.var.name} = {first} + {q} * {f.step};")


def emit_group(group: LoweredGroup, label: str = "group", *, check_indices: bool = True,
               first_site: int = 0) -> CudaGroup:
    """CUDA source (device units + global wrappers) and launches of one lowered group; its
    checked indices are numbered from ``first_site`` (see backend.failures)."""
    plan_codegen(group, CodegenOptions("cuda", check_indices=check_indices))
    units = split_units(group)
    cross, cross_bytes = cross_arrays(group, units)
    planned = plan_units(group, units, cross)
    printer = _CudaPrinter(group, cross, cross_bytes, check_indices=check_indices, first_site=first_site)
    texts, infos = [], []
    for k, (u, (facts, plan)) in enumerate(zip(units, planned)):
        text, grid, mode, scratch = printer.unit(u, f"@UNIT{k}@", facts, plan)
        texts.append(text)
        infos.append((grid, mode, scratch))
    body = "\n".join(texts)
    digest = hashlib.sha256(body.encode()).hexdigest()[:16]
    base = f"fl_c_{digest}"
    params = printer.function_params()
    args = ", ".join(p.rsplit(" ", 1)[-1].lstrip("*") for p in params)
    kernels, wrappers, unit_names = [], [], []
    for k, (grid, mode, scratch) in enumerate(infos):
        uname = f"{base}_u{k}"
        body = body.replace(f"@UNIT{k}@", uname)
        kname = f"{base}_k{k}"
        wrappers.append(f'extern "C" __global__ void __launch_bounds__({BLOCK}) {kname}({", ".join(params)}) '
                        f'{{ {uname}({args}, blockIdx.x, gridDim.x); }}')
        kernels.append(CudaKernel(kname, grid, BLOCK, -1, mode, scratch))
        unit_names.append((uname, grid, mode))
    source = f"/* {group_comment(group, label)} */\n" + body + "\n".join(wrappers) + "\n"
    types = [("const " if a.role == "input" else "") + ctype(a.dtype, CUDA) + "*" for a in group.params]
    return CudaGroup(-1, source, kernels, list(group.params), unit_names, group.nests, types, base, printer.c.sites)


def horizontal_kernel(name: str, members: list[CudaGroup]) -> tuple[str, int]:
    """One kernel running several independent single-unit groups side by side (layer III):
    the grid is split between them, block ranges in member order. Each member's
    parameters become ``h<k>_<j>``; all share the scratch pointer (members use none) and
    the error record."""
    params, lines, first = [], [], 0
    for k, g in enumerate(members):
        (uname, grid, _), = g.units
        names = []
        for j, t in enumerate(g.param_types):
            params.append(f"{t} __restrict__ h{k}_{j}")
            names.append(f"h{k}_{j}")
        names += ["fl_scratch", "fl_err"]
        lines.append(f"  if (b >= {first} && b < {first + grid}) {{ {uname}({', '.join(names)}, b - {first}, "
                     f"{grid}); return; }}")
        first += grid
    params += ["unsigned char* __restrict__ fl_scratch", "long long* __restrict__ fl_err"]
    head = f'extern "C" __global__ void __launch_bounds__({BLOCK}) {name}({", ".join(params)}) {{'
    return "\n".join([head, "  long long b = blockIdx.x;"] + lines + ["}"]) + "\n", first


__all__ = ["BLOCK", "CUDA_PRELUDE", "CudaGroup", "CudaKernel", "emit_group", "horizontal_kernel", "split_units"]
