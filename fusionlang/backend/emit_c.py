"""Print a lowered group as one C function (the CPU twin of the CUDA kernel).

Parameters are the group's global arrays (inputs ``const``, then outputs), all
``restrict``: the memory planner never lets a kernel's outputs overlap its inputs.
Contracted intermediates are locals declared at their scope (:func:`lower.declaration_sites`).
Every optimization decision (OpenMP pragmas, split reduction streams, NaN flags, lane
checks, streamed stores, prefetches) is a pass over the loop IR (:mod:`.codegen_passes`),
recorded on each loop as ``For.plan``; the printer prints what the plans say.

A kernel that can fail takes the error record ``fl_err`` last (see :mod:`.failures`): one
that checks loaded indices (``fl_index``; in a SIMD loop ``fl_index_lane``, which reduces
a flag and the bad value beside the loop's other reductions, so the loop still vectorizes)
or allocates heap locals (``fl_alloc``, checked; out of memory leaves through ``fl_out``,
which frees what is held). Nothing in a kernel exits or aborts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable, cast

import sympy as sp

from fusionlang.backend.ccompile import vector_math_declarations
from fusionlang.backend.cexpr import (C, Flavor, IndexPrinter, ValuePrinter, ctype, float_literal, helpers,
                                      integer_literal, sanitize)
from fusionlang.backend.failures import ALLOC, INDEX, IndexSite
from fusionlang.backend.half import narrow, widen
from fusionlang.backend.storage_codecs import FLOAT_CODED, codec
from fusionlang.backend.inplace import reuse_outputs
from fusionlang.backend.collapse import collapse_rows
from fusionlang.backend.transpose_tiles import tile_transposes
from fusionlang.backend.codegen_passes import (OMP_REDUCTION, STACK_LIMIT, STREAM_IDENTITY, CodegenOptions, is_heap,
                                               itemsize, plan_codegen)
from fusionlang.backend.loopir import Assign, For, If, Load, LoopCodegen, Storage, StreamedStore, assigns
from fusionlang.backend.lower import LoweredGroup, declaration_sites
from fusionlang.ir.types import HALF_FLOATS, is_float_dtype
from fusionlang.ops.access import as_expr
from fusionlang.ops.scalar import BitCast, CheckedIndex

#: __builtin_prefetch's locality (3: into L1)
PREFETCH_LOCALITY = 3


@dataclass
class CFunction:
    name: str
    source: str
    #: value names (or aux arrays) of the parameters, in order
    params: list
    nests: int
    #: its checked indices, by site number; with heap locals, whether it takes ``fl_err``
    sites: list = field(default_factory=list)
    fallible: bool = False
    #: its hot loops are explicit vector code or ``omp simd`` loops (the GEMM template), which
    #: -O2 vectorizes as well as -O3 (ccompile.TEMPLATE_OPT)
    vector_code: bool = False
    #: the shared routines it calls and only declares, by name: their definitions
    #: (gemm_template._shared), compiled once per library however many kernels call them
    helpers: dict = field(default_factory=dict)


#: heap locals are allocated through this; compiled with -DFL_ALLOC_LIMIT=N, any request above
#: N bytes fails, which is how tests make an allocation fail on purpose
ALLOC_C = """static inline void* fl_alloc(size_t n) {
#ifdef FL_ALLOC_LIMIT
  if (n > (size_t)(FL_ALLOC_LIMIT)) return NULL;
#endif
  return malloc(n);
}
"""


#: a non-temporal store of one aligned vector of FL_STREAM_LANES floats (see backend.streaming),
#: and the fence after a kernel's last one; without x86 vector streaming, plain stores. Written
#: with the compilers' builtins on vector types, not <immintrin.h>: parsing that header cost
#: 0.15 s of every translation unit's 0.3 to 0.45 s under GCC 12 (a third of a cold compile).
STREAM_C = """#if defined(__x86_64__) && defined(__AVX512F__)
#define FL_STREAM_LANES 16
#elif defined(__x86_64__) && defined(__AVX__)
#define FL_STREAM_LANES 8
#endif
#ifdef FL_STREAM_LANES
typedef float fl_stream_vec __attribute__((vector_size(4 * FL_STREAM_LANES), aligned(4 * FL_STREAM_LANES)));
#if defined(__clang__)
static inline void fl_stream_lanes(float *dst, const float *src) {
  __builtin_nontemporal_store(*(const fl_stream_vec *)src, (fl_stream_vec *)dst);
}
#elif FL_STREAM_LANES == 16
static inline void fl_stream_lanes(float *dst, const float *src) { __builtin_ia32_movntps512(dst, *(const fl_stream_vec *)src); }
#else
static inline void fl_stream_lanes(float *dst, const float *src) { __builtin_ia32_movntps256(dst, *(const fl_stream_vec *)src); }
#endif
static inline void fl_stream_fence(void) { __builtin_ia32_sfence(); }
#else
#define FL_STREAM_LANES 4
static inline void fl_stream_lanes(float *dst, const float *src) { for (int i = 0; i < 4; i++) dst[i] = src[i]; }
static inline void fl_stream_fence(void) {}
#endif
"""


def _prelude(flavor: Flavor) -> str:
    # SIMD variants of libm functions (libmvec) let loops calling expf/erff vectorize
    return ("#include <stdint.h>\n#include <stdlib.h>\n#include <math.h>\n" + vector_math_declarations() + "\n"
            + helpers(flavor) + ALLOC_C + (STREAM_C if flavor is C else ""))




C_PRELUDE = _prelude(C)


class CPrinter:
    """Prints a planned group's loop IR as C statements (sequential code: the whole C
    function, or what one CUDA thread runs). ``declare``: how a local is declared, (lines,
    lines freeing it at the end of its scope); the C one by default (see :meth:`decl`)."""

    def __init__(self, group: LoweredGroup, flavor: Flavor, check_indices: bool = True, first_site: int = 0,
                 declare: Callable[[Storage, str], tuple[list[str], list[str]]] | None = None):
        self.g = group
        self.declaration = declare or self.decl
        #: id(load) -> what it prints as instead (a lane of a vector loaded before the statement)
        self.load_target: dict[int, str] = {}
        #: array id -> the row buffer its stores go to, while printing a streamed loop
        self.row_target: dict[int, str] = {}
        self.streams = False  # printed a non-temporal store (the function ends with a fence)
        self.flavor = flavor
        self.check_indices = check_indices
        #: checked indices printed so far (site numbers start at ``first_site``)
        self.sites: list[IndexSite] = []
        self.first_site = first_site
        self.site_of: dict[tuple, int] = {}
        #: site -> (flag, value) of the SIMD loop being printed that checks it (see lane_checks)
        self.lane_flags: dict[int, tuple[str, str]] = {}
        #: heap locals (C type, name): declared NULL at the top, freed on every way out
        self.heap: list[tuple[str, str]] = []
        self.names: dict[int, str] = {}
        for k, a in enumerate(group.params):
            self.names[a.id] = f"p{k}"
        for st in group.locals():
            self.names[st.array.id] = f"{'s' if st.kind == 'scalar' else 'b'}{st.array.id}"
        self.top, self.inner = declaration_sites(group)
        #: accumulator array id -> its NaN flag, inside a loop reducing it (``plan.nan_flags``)
        self.flags: dict[int, str] = {}
        #: loop variable -> printed replacement, while printing one stream of a split loop
        self.shifted: dict[sp.Symbol, str] = {}
        #: scalar array id -> the name of its hoisted reciprocal, while printing a loop that
        #: multiplies by it instead of dividing (``plan.reciprocals``)
        self.reciprocal: dict[int, str] = {}
        self.lines: list[str] = []

    # ----- pieces -------------------------------------------------------------------
    def storage(self, array) -> Storage:
        return self.g.storage[array.id]

    def ref(self, array, index, index_printer) -> str:
        st = self.storage(array)
        name = self.names[array.id]
        if array.id in self.row_target:
            return self.row_target[array.id]
        if st.kind == "scalar":
            return name
        return f"{name}[{index_printer(st.offset(index))}]"

    @property
    def fallible(self) -> bool:
        """Does the function take the error record (see backend.failures)?"""
        return bool(self.sites or self.heap)

    def site(self, ld: Load, e) -> int:
        """The site number of checked index ``e`` of load ``ld`` (the same load printed again,
        in split streams, is the same site)."""
        key = (id(ld), e)
        if key not in self.site_of:
            node, op = ld.origin or ("?", "?")
            self.site_of[key] = self.first_site + len(self.sites)
            self.sites.append(IndexSite(node, op, int(e.args[2]), int(e.args[1])))
        return self.site_of[key]

    def checked_index(self, ld: Load):
        """The IndexPrinter hook printing ``ld``'s loaded indices, checked."""
        def check(e, value: str) -> str:
            site = self.site(ld, e)
            if site in self.lane_flags:
                flag, bad = self.lane_flags[site]
                return f"fl_index_lane({value}, {int(e.args[1])}, &{flag}, &{bad})"
            return f"fl_index({value}, {int(e.args[1])}, {site}, fl_err)"
        return check if self.check_indices else None

    def lane_checks(self, f: For, ind: str) -> tuple[str, list[str]]:
        """The lane flags of SIMD loop ``f`` (``plan.lane_checks``): each checked index
        or-reduces a flag and min-reduces the bad value; the error record is filled after the
        loop. Returns the reduction clauses and the lines to print after the loop."""
        clauses, after = [], []
        for site in self.checked_sites(f.body):
            flag, bad = f"fl_bad{site}", f"fl_badv{site}"
            self.lane_flags[site] = (flag, bad)
            self.lines.append(f"{ind}int64_t {flag} = 0, {bad} = INT64_MAX;")
            clauses.append(f" reduction(|:{flag}) reduction(min:{bad})")
            after.append(f"{ind}if ({flag}) {{ fl_err[0] = {INDEX}; fl_err[1] = {site}; fl_err[2] = {bad}; }}")
        return "".join(clauses), after

    def checked_sites(self, body: list) -> list[int]:
        """Sites of the checked indices loaded in ``body``."""
        sites = []
        for a in assigns(body):
            for ld in a.loads.values():
                exprs = list(ld.index) + [g for g, _ in ld.guard] + ([ld.cond] if ld.cond is not None else [])
                for e in exprs:
                    for checked in sorted(as_expr(e).atoms(CheckedIndex), key=str):
                        if self.site(ld, checked) not in sites:
                            sites.append(self.site(ld, checked))
        return sites

    def load(self, ld: Load, dtype: str, symbol) -> str:
        if id(ld) in self.load_target:
            return self.load_target[id(ld)]
        ip = IndexPrinter(symbol, self.checked_index(ld))
        ref = self.ref(ld.array, ld.index, ip)
        if coded := codec(ld.array.dtype):  # a narrow type's byte (float8, 4- or 2-bit), decoded
            ref = f"{coded[0]}({ref})"
        else:
            ref = widen(ld.array.dtype, ref)
        checks = [f"({ip(e)} >= 0 && {ip(e)} < {n})" for e, n in ld.guard]
        if ld.cond is not None:
            checks.append(ip(ld.cond))
        if not checks:
            return ref
        pad = float_literal(ld.pad if ld.pad is not None else 0.0, dtype, self.flavor)
        return f"(({' && '.join(checks)}) ? {ref} : {pad})"

    def assign(self, a: Assign) -> str:
        dtype = a.stmt.compute_dtype
        rendered: dict[sp.Symbol, str] = {}

        def symbol(s: sp.Symbol) -> str:
            if s in a.loads:
                if s not in rendered:
                    rendered[s] = self.load(a.loads[s], dtype, symbol)
                    if a.loads[s].array.dtype == "uint16":
                        # C promotes it to int, where 65535 * 65535 overflows; as unsigned
                        # int, a product or difference wraps. A statement storing an
                        # integer computes in integers (its compute dtype is float64 only
                        # for what is printed as a float: a double product of two uint16s
                        # past 2**32 converted to uint16 is undefined, x86 gave 0 for 1)
                        stores_float = is_float_dtype(a.array.dtype)
                        wide = ctype(dtype, self.flavor) if is_float_dtype(dtype) and stores_float else "unsigned int"
                        rendered[s] = f"(({wide}){rendered[s]})"
                text = rendered[s]
                return text
            return self.shifted.get(s, s.name)

        def index_symbol(s: sp.Symbol) -> str:
            if s in a.loads:  # an indirect index: the loaded value, as an integer
                return f"(({self.flavor.int_type})({symbol(s)}))"
            return self.shifted.get(s, s.name)

        expr, reciprocals = self.with_reciprocal_symbols(a)

        def integer(s: sp.Symbol) -> bool:
            if s in reciprocals:
                return False
            return not is_float_dtype(a.loads[s].array.dtype) if s in a.loads else True

        def unsigned64(s: sp.Symbol) -> bool:
            return s in a.loads and a.loads[s].array.dtype == "uint64"

        vp = ValuePrinter(dtype, self.flavor, symbol, integer, unsigned64)
        target = self.ref(a.array, a.index, IndexPrinter(index_symbol))
        out_dtype = a.array.dtype
        value = vp.doprint(expr)
        if coded := codec(out_dtype):  # (never an accumulator: those hold the compute dtype)
            return f"{target} = {coded[1]}({value});"
        if a.reduce is None and isinstance(as_expr(a.value), sp.Integer) and out_dtype.startswith(("int", "uint")):
            # exact, as an integer (a double literal rounds 2**64 - 1 to 2**64, out of range)
            return f"{target} = {integer_literal(int(as_expr(a.value)))};"
        if a.reduce is not None:
            flag = self.flags.get(a.array.id)
            if flag is not None:
                op = ">" if a.reduce == "max" else "<"
                t = ctype(dtype, self.flavor)
                select = f"{target} = {target} {op} fl_v ? {target} : fl_v;"
                return f"{{ {t} fl_v = {value}; {select} {flag} |= fl_v != fl_v; }}"
            if a.reduce == "sum":
                return f"{target} += {value};"
            if a.reduce == "prod":
                return f"{target} *= {value};"
            fn = f"fl_{a.reduce}{'f' if dtype == 'float32' else 'd'}"
            if out_dtype in ("int64", "uint64"):  # an integer accumulator (poly._accumulator_dtype)
                fn = f"fl_{'u' if out_dtype == 'uint64' else 'i'}{a.reduce}"
            return f"{target} = {fn}({target}, {value});"
        if out_dtype == "bool":
            return f"{target} = (({value}) != 0);"
        if out_dtype in HALF_FLOATS:  # rounded once, from the float32 (or a loaded double) it was computed in
            double = any(ld.array.dtype == "float64" for ld in a.loads.values())
            return f"{target} = {narrow(out_dtype, value, double)};"
        if out_dtype in ("uint64", "uint32") and _converts_a_float(a, expr):
            # C leaves a float past the type's range undefined (AVX-512 gave UINT32_MAX)
            return f"{target} = fl_f2u{out_dtype[4:]}({value});"
        if out_dtype not in ("float32", "float64") or out_dtype != dtype:
            return f"{target} = ({ctype(out_dtype, self.flavor)})({value});"
        return f"{target} = {value};"

    # ----- dividing by a loop-invariant scalar: multiply by its reciprocal ------------------
    def with_reciprocals(self, f: For, depth: int, print_loop) -> None:
        """Print loop ``f`` (by ``print_loop(depth)``) multiplying by the reciprocal of each
        scalar its plan hoists (``plan.reciprocals``), computed once before it. The reciprocal
        is used only where the divisor is a normal number whose reciprocal is normal too, so
        x * (1 / s) is x / s within an ulp or so (the tolerance every check allows); zeros,
        infinities, NaN and the extremes keep the division, in a second copy of the loop."""
        ind = "  " * depth
        conditions = []
        for aid, dtype in f.plan.reciprocals.items():
            t, name = ctype(dtype, self.flavor), self.names[aid]
            self.lines.append(f"{ind}const {t} fl_rcp{aid} = ({t})1 / {name};")
            conditions.append(_normal_reciprocal(name, dtype))
        self.lines.append(f"{ind}if ({' && '.join(conditions)}) {{")
        self.reciprocal = {aid: f"fl_rcp{aid}" for aid in f.plan.reciprocals}
        print_loop(depth + 1)
        self.reciprocal = {}
        self.lines.append(f"{ind}}} else {{")
        print_loop(depth + 1)
        self.lines.append(f"{ind}}}")

    def with_reciprocal_symbols(self, a: Assign) -> tuple[sp.Expr, set]:
        """``a``'s value with 1 / s replaced by the hoisted reciprocal's symbol, and those symbols."""
        expr, used = a.value, set()
        for sym, ld in a.loads.items():
            if ld.array.id in self.reciprocal:
                r = sp.Symbol(self.reciprocal[ld.array.id])
                expr = as_expr(expr).subs(sp.Pow(sym, -1), r)
                used.add(r)
        return expr, used

    def decl(self, st: Storage, ind: str) -> tuple[list[str], list[str]]:
        t = ctype(st.array.dtype, self.flavor)
        name = self.names[st.array.id]
        if st.kind == "scalar":
            return [f"{ind}{t} {name};"], []
        nbytes = st.size * itemsize(st.array.dtype)
        if is_heap(st):
            # checked: out of memory fills the error record and leaves through fl_out,
            # which frees what is held (every heap pointer is NULL when not held)
            self.heap.append((t, name))
            return ([f"{ind}{name} = ({t}*)fl_alloc({nbytes});",
                     f"{ind}if (!{name}) {{ fl_err[0] = {ALLOC}; fl_err[2] = {nbytes}; goto fl_out; }}"],
                    [f"{ind}free({name}); {name} = NULL;"])
        # explicitly aligned: vector loads/stores want it, and GCC 12 at -march=native
        # (AVX-512) otherwise places small arrays in the red zone misaligned
        return [f"{ind}{t} {name}[{st.size}] __attribute__((aligned(64)));"], []

    # ----- structure ----------------------------------------------------------------
    def body(self, nodes: list, depth: int, after: dict | None = None) -> None:
        """Print ``nodes``; ``after`` maps id(node) -> lines printed right after it."""
        ind = "  " * depth
        for n in nodes:
            if isinstance(n, Assign):
                self.lines.append(ind + self.assign(n))
            elif isinstance(n, If):
                ip = IndexPrinter()
                self.lines.append(f"{ind}if ({ip(n.cond)}) {{")
                self.body(n.then, depth + 1)
                if n.orelse:
                    self.lines.append(f"{ind}}} else {{")
                    self.body(n.orelse, depth + 1)
                self.lines.append(f"{ind}}}")
            elif isinstance(n, For):
                self.loop(n, depth)
            if after and id(n) in after:
                self.lines.extend(after[id(n)])

    def loop(self, f: For, depth: int) -> None:
        if f.plan.reciprocals:
            self.with_reciprocals(f, depth, lambda d: self.loop_once(f, d))
        else:
            self.loop_once(f, depth)

    def loop_once(self, f: For, depth: int) -> None:
        plan = f.plan
        if plan.streamed_store is not None:
            self.streamed_loop(f, depth, plan.streamed_store)
            return
        if plan.split_streams > 1:
            self.split_reduction(f, depth)
            return
        ind = "  " * depth
        ip = IndexPrinter()
        pragma = self.pragma(plan)
        flags = {aid: f"{self.names[aid]}_nan" for aid in plan.nan_flags}
        for aid, flag in flags.items():
            acc = self.names[aid]
            self.lines.append(f"{ind}int {flag} = {acc} != {acc};")
            pragma += f" reduction(|:{flag})"
        self.flags.update(flags)
        checks, after = self.lane_checks(f, ind) if plan.lane_checks else ("", [])
        pragma += checks
        if pragma:
            self.lines.append(f"{ind}{pragma}")
        v = f.var.name
        self.lines.append(f"{ind}for ({self.flavor.int_type} {v} = {ip(f.init)}; {ip.loop_cond(f.cond)}; {v} += {f.step}) {{")
        frees = self.declare(self.inner.get(id(f), []), ind + "  ")
        self.body(f.body, depth + 1, self.prefetches(plan, depth + 1))
        self.lines.extend(frees)
        self.lines.append(f"{ind}}}")
        for aid, flag in flags.items():
            nan = float_literal(float("nan"), self.g.storage[aid].array.dtype, self.flavor)
            self.lines.append(f"{ind}if ({flag}) {self.names[aid]} = {nan};")
            del self.flags[aid]
        self.lines.extend(after)
        self.lane_flags.clear()

    def pragma(self, plan: LoopCodegen) -> str:
        """The OpenMP pragma line of a loop's plan."""
        if plan.pragma == "parallel":
            return "#pragma omp parallel for schedule(static)"
        if plan.pragma != "simd":
            return ""
        clauses = [f"reduction({r.clause}:{self.names[r.acc]})" for r in plan.reductions]
        return " ".join(["#pragma omp simd"] + clauses)

    def streamed_loop(self, f: For, depth: int, streamed: StreamedStore) -> None:
        """``f`` with its row stored by non-temporal vector stores: plain stores up to the
        first vector boundary of the output, then chunks of FL_STREAM_LANES computed into a
        vector-sized buffer (kept in a register) and streamed, then plain stores again."""
        store, offset, first, last = streamed.store, streamed.offset, streamed.first, streamed.last
        ind, v, it = "  " * depth, f.var.name, self.flavor.int_type
        start = IndexPrinter()(offset.xreplace({f.var: sp.Integer(first)}))
        lines = self.lines
        lines.append(f"{ind}{{")
        lines.append(f"{ind}  float *fl_dst = &{self.names[store.array.id]}[{start}];")
        lines.append(f"{ind}  {it} {v} = {first};")
        self.plain_pass(f, depth + 1,
                        f"; {v} <= {last} && ((uintptr_t)(fl_dst + ({v} - {first})) & (FL_STREAM_LANES * 4 - 1))")
        lines.append(f"{ind}  for (; {v} + FL_STREAM_LANES - 1 <= {last}; {v} += FL_STREAM_LANES) {{")
        lines.append(f"{ind}    float fl_row[FL_STREAM_LANES] __attribute__((aligned(64)));")
        lines.append(f"{ind}    #pragma omp simd")
        lines.append(f"{ind}    for ({it} fl_l = {v}; fl_l < {v} + FL_STREAM_LANES; fl_l += 1) {{")
        self.shifted = {f.var: "fl_l"}
        self.row_target[store.array.id] = f"fl_row[fl_l - {v}]"
        self.declare(self.inner.get(id(f), []), ind + "      ")  # scalars only: nothing to free
        self.body(f.body, depth + 3)
        del self.row_target[store.array.id]
        self.shifted = {}
        lines.append(f"{ind}    }}")
        lines.append(f"{ind}    fl_stream_lanes(fl_dst + ({v} - {first}), fl_row);")
        lines.append(f"{ind}  }}")
        self.plain_pass(f, depth + 1, f"; {v} <= {last}")
        lines.append(f"{ind}}}")
        self.streams = True

    def plain_pass(self, f: For, depth: int, header: str) -> None:
        """``f``'s body in a loop ``for (<header>; v += 1)`` on the variable declared before."""
        ind = "  " * depth
        self.lines.append(f"{ind}for ({header}; {f.var.name} += 1) {{")
        self.declare(self.inner.get(id(f), []), ind + "  ")
        self.body(f.body, depth + 1)
        self.lines.append(f"{ind}}}")

    def declare(self, storages, ind: str) -> list[str]:
        """Print the declarations of ``storages``; returns the lines that free them at the
        end of their scope."""
        frees = []
        for st in storages:
            d, fr = self.declaration(st, ind)
            self.lines.extend(d)
            frees.extend(fr)
        return frees

    def split_reduction(self, f: For, depth: int) -> None:
        """Print ``f`` as one loop over a 1/``streams`` share of its iterations whose body
        runs every share, each accumulating into its own copy of the accumulators
        (the first copy is the accumulator itself, so a value carried in is kept)."""
        ind = "  " * depth
        streams = f.plan.split_streams
        first, last = cast(tuple[int, int], f.plan.span)  # set with split_streams
        share = (last - first + 1) // streams
        accs = [r.acc for r in f.plan.reductions]
        own = {aid: self.names[aid] for aid in accs}
        copies = {aid: [own[aid]] + [f"{own[aid]}_{k}" for k in range(1, streams)] for aid in accs}
        clauses = []
        for r in f.plan.reductions:
            ident = float_literal(STREAM_IDENTITY[r.op], r.dtype, self.flavor)
            inits = ", ".join(f"{c} = {ident}" for c in copies[r.acc][1:])
            self.lines.append(f"{ind}{ctype(r.dtype, self.flavor)} {inits};")
            clauses.append(f"reduction({r.clause}:{', '.join(copies[r.acc])})")
        self.lines.append(f"{ind}#pragma omp simd {' '.join(clauses)}")
        v = f.var.name
        self.lines.append(f"{ind}for ({self.flavor.int_type} {v} = {first}; {v} <= {first + share - 1}; {v} += 1) {{")
        frees = self.declare(self.inner.get(id(f), []), ind + "  ")
        for k in range(streams):
            if k:
                self.shifted = {f.var: f"({v} + {k * share})"}
            for aid in accs:
                self.names[aid] = copies[aid][k]
            self.body(f.body, depth + 1)
        self.shifted = {}
        self.names.update(own)
        self.lines.extend(frees)
        self.lines.append(f"{ind}}}")
        for r in f.plan.reductions:
            self.lines.append(f"{ind}{own[r.acc]} = {_pairwise(copies[r.acc], OMP_REDUCTION[r.op])};")

    def prefetches(self, plan: LoopCodegen, depth: int) -> dict[int, list[str]]:
        """The prefetch lines of ``plan``, by id() of the loop they follow."""
        ind, lines = "  " * depth, []
        for row in plan.prefetch:
            ip = IndexPrinter()
            where = ip(row.where)
            loop = f"for ({self.flavor.int_type} fl_q = {row.first}; fl_q <= {row.last}; fl_q += {row.step})"
            lines += [f"{ind}if ({ip(row.guard)}) {{",
                      f"{ind}  {loop} __builtin_prefetch(&{self.names[row.array.id]}[{where}], 0, {PREFETCH_LOCALITY});",
                      f"{ind}}}"]
        return {id(plan.prefetch[0].after): lines} if lines else {}

    def function_body(self) -> list[str]:
        """The statements of the function, printed once (what :meth:`function` wraps)."""
        self.lines = []
        frees = self.declare(self.top, "  ")
        self.body(self.g.body, 1)
        self.lines.extend(frees)
        return self.lines

    def function(self, name: str, comment: str, body: list[str]) -> str:
        """The whole C function named ``name`` around ``body`` (from :meth:`function_body`)."""
        params = []
        for a in self.g.params:
            t = ctype(a.dtype, self.flavor)
            const = "const " if a.role == "input" else ""
            params.append(f"{const}{t}* restrict {self.names[a.id]}")
        if self.fallible:
            params.append("int64_t* restrict fl_err")
        head = f"void {name}({', '.join(params) if params else 'void'})"
        lines = [f"/* {comment} */", head + " {"]
        lines += [f"  {t}* restrict {n} = NULL;" for t, n in self.heap]
        lines += body
        if self.streams:
            lines.append("  fl_stream_fence();")
        if self.heap:
            lines.append("fl_out:")
            lines += [f"  free({n});" for _, n in self.heap]
        lines.append("}")
        return "\n".join(lines) + "\n"


def _normal_reciprocal(name: str, dtype: str) -> str:
    """C condition: ``name`` and its reciprocal are both normal numbers."""
    if dtype == "float32":
        return f"(fabsf({name}) >= 1.17549435e-38f && fabsf({name}) <= 8.50705917e+37f)"
    return f"(fabs({name}) >= 2.2250738585072014e-308 && fabs({name}) <= 4.4942328371557898e+307)"


def _pairwise(terms: list[str], op: str) -> str:
    """``terms`` combined with ``op`` as a balanced tree: ((a + b) + (c + d))."""
    while len(terms) > 1:
        terms = [f"({terms[i]} {op} {terms[i + 1]})" if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


def group_comment(group: LoweredGroup, label: str) -> str:
    nodes = ", ".join(f"{sanitize(n.name)} ({sanitize(n.op)})" for n in group.prog.nodes[:12])
    more = f" and {len(group.prog.nodes) - 12} more" if len(group.prog.nodes) > 12 else ""
    return f"{sanitize(label, 60)}: {nodes}{more}; {group.nests} loop nest(s), {group.scheduled.tree.strategy}"


def emit_function(group: LoweredGroup, label: str = "group", *, openmp: bool = False,
                  check_indices: bool = True, streamed: frozenset = frozenset()) -> CFunction:
    """The C function of one lowered group, named by a hash of its text (dedupes repeats).
    ``check_indices``: check every loaded index (gather) against its axis. ``streamed``:
    values whose row stores may stream past the caches (see backend.streaming)."""
    group = plan_codegen(tile_transposes(collapse_rows(reuse_outputs(group, keep=streamed))),
                         CodegenOptions("c", openmp, check_indices, streamed))
    printer = CPrinter(group, C, check_indices)
    body = printer.function_body()
    # named by the hash of the function under stand-in name and comment, so repeats dedupe
    stand_in = printer.function("@NAME@", "@COMMENT@", body)
    name = f"fl_k_{hashlib.sha256(stand_in.encode()).hexdigest()[:16]}"
    source = printer.function(name, group_comment(group, label), body)
    return CFunction(name, source, list(group.params), group.nests, printer.sites, printer.fallible)


def _converts_a_float(a: Assign, expr) -> bool:
    """Does the statement store a float value (read from a float array) as an integer? A
    bit cast stores the float's bits, not its value."""
    return any(is_float_dtype(ld.array.dtype) for ld in a.loads.values()) and not isinstance(as_expr(expr), BitCast)


__all__ = ["CFunction", "CPrinter", "C_PRELUDE", "STACK_LIMIT", "emit_function", "group_comment"]
