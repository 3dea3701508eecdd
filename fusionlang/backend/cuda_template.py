"""Groups whose complex op runs as the CUDA GEMM template (:mod:`.cuda_gemm`).

The planning is the CPU template's (:func:`.template.plan_template` with ``target="cuda"``):
the same complex op, the same epilogue statements, the same parts before and after it. So
both targets fuse the same epilogues; only the kernel that computes the product differs.
Here the plan becomes a :class:`.emit_cuda.CudaGroup`: the loop nests of the parts before
and after the template (ordinary CUDA kernels, :func:`.emit_cuda.emit_group`) around the
tiled tensor-core kernel, whose epilogue is printed by the template's own printer in the
CUDA flavor. Each kernel carries its own parameter list, since the parts read different
arrays.
"""

from __future__ import annotations

import hashlib
from typing import cast

import sympy as sp

from fusionlang.backend.cexpr import CUDA, ctype
from fusionlang.backend.cuda_gemm import Names, Prologue, choose_tile, gemm_kernel, grid_size
from fusionlang.backend.emit_cuda import MAX_GRID, CudaGroup, CudaKernel, emit_group
from fusionlang.backend.gemm_template import GemmProblem, Im2Col, Operand
from fusionlang.backend.template import TemplateGroup, chain_statements, epilogue_body
from fusionlang.ops.access import i_sym


def template_kernel(tg: TemplateGroup, label: str, precision: str = "fp32") -> tuple[str, CudaKernel]:
    """(source, launch) of the tiled GEMM of ``tg`` with its epilogue; ``precision`` (set in
    the program's prelude) is named in the report."""
    params = kernel_params(tg)
    names = {id(a): f"p{k}" for k, a in enumerate(params)}
    decls = [f"{'const ' if a.role == 'input' else ''}{ctype(a.dtype, CUDA)}* __restrict__ {names[id(a)]}"
             for a in params]
    staged_b = tg.prologue is not None and tg.prologue.which == "b"
    problem = tg.problem if staged_b else direct_view(tg.problem)  # the prologue's coordinates are im2col's
    tile = choose_tile(problem)
    body = epilogue_body(tg, names)
    operands = [names.get(id(a), "0") for a in (tg.a_param, tg.b_param, tg.c_param)]  # "0": computed, not read
    prologue = _prologue(tg, names)

    def text(name: str) -> str:
        return gemm_kernel(name, problem, tile, decls, Names(*operands), body, element=tg.element,
                           c_dtype=tg.c_param.dtype, prologue=prologue)

    # named by the hash of its text under a stand-in name (the same for every kernel)
    name = f"fl_g_{hashlib.sha256(text('@NAME@').encode()).hexdigest()[:16]}"
    comment = (f"/* {label}: {tg.final.node.op} as the CUDA GEMM template, tile {tile.label}, "
               f"{len(tg.epilogue)} epilogue statement(s) */\n")
    types = [d.rsplit(" ", 1)[0].replace(" __restrict__", "") for d in decls]
    kernel = CudaKernel(name, grid_size(problem, tile, MAX_GRID), tile.threads, -1, "gemm template",
                        params=params, param_types=types, exact_block=True,
                        strategy=f"GEMM template {tile.label}, {_multiplies(tg.element, precision)}")
    return comment + text(name), kernel


def kernel_params(tg: TemplateGroup) -> list:
    """The template kernel's arrays: the group's, less an operand a staged prologue computes,
    plus what that prologue reads."""
    if tg.prologue is None:
        return list(tg.params)
    computed = tg.a_param if tg.prologue.which == "a" else tg.b_param
    params = [a for a in tg.params if a is not computed]
    for a in tg.prologue.inputs:
        if all(a is not p for p in params):
            params.append(a)
    return params


def _prologue(tg: TemplateGroup, names: dict[int, str]) -> Prologue | None:
    """The staged prologue's text over the operand tensor's index ``fl_x0, fl_x1, ...``."""
    pro = tg.prologue
    if pro is None:
        return None
    operand = tg.a_param if pro.which == "a" else tg.b_param
    index = {i_sym(d): sp.Symbol(f"fl_x{d}", integer=True) for d in range(len(operand.shape))}
    defines, local, _ = chain_statements(pro.stmts, names, index, "q", skip_store=pro.stmts[-1].write.array)
    return Prologue(pro.which, _operand_coords(tg, pro.which, operand.shape), tuple(defines),
                    local[pro.stmts[-1].write.array.id])


def _operand_coords(tg: TemplateGroup, which: str, shape: tuple[int, ...]) -> tuple[str, ...]:
    """The operand tensor's index of a staged element, as C expressions (see cuda_gemm.Prologue)."""
    node = tg.final.node
    if node.op == "conv":  # B: the image, channel ch of group o1 of image o0
        channel = f"o1 * {cast(Im2Col, tg.problem.b).channels} + ch"
        return ("o0", channel, "iy", "ix") if len(shape) == 4 else ("o0", channel, "ix")
    if node.op == "gemm":
        return ("fl_col", "fl_row") if node.attrs.get(f"trans_{which}", 0) else ("fl_row", "fl_col")
    lead = len(tg.problem.outer) - (len(shape) - 2)  # matmul: batch dims broadcast from the right
    batch = tuple("0" if n == 1 else f"o{d + lead}" for d, n in enumerate(shape[:-2]))
    return batch + ("fl_row", "fl_col")


def _multiplies(element: str, precision: str) -> str:
    """How the tensor cores multiply, for the report."""
    if element == "float32":
        return f"{precision} on tensor cores"
    return f"{element} on tensor cores, fp32 accumulation"


def direct_view(problem: GemmProblem) -> GemmProblem:
    """A 1x1 convolution with unit stride and no padding reads its image as a plain row-major
    B (channels x pixels): staged with 16-byte copies instead of gathered tap by tap."""
    b = problem.b
    if isinstance(b, Im2Col) and b.kernel == (1, 1) and b.stride == (1, 1) and b.pads == (0, 0) and \
            (b.out_h, b.out_w) == (b.in_h, b.in_w):
        view = Operand(b.in_h * b.in_w, 1, b.offset, b.outer_strides)
        return GemmProblem(problem.m, problem.n, problem.k, problem.a, view, problem.c, problem.outer)
    return problem


def template_group(tg: TemplateGroup, label: str, *, check_indices: bool = True, first_site: int = 0,
                   precision: str = "fp32") -> CudaGroup:
    """The kernels of a templated group in order: before, the template, after."""
    pieces: dict[str, str] = {}
    kernels, sites = [], []
    site = first_site

    def part(lowered, what: str) -> None:
        nonlocal site
        cg = emit_group(lowered, f"{label}, {what} its template", check_indices=check_indices, first_site=site)
        site += len(cg.sites)
        sites.extend(cg.sites)
        pieces[cg.name] = cg.source
        for k in cg.kernels:
            k.params, k.param_types = list(cg.params), list(cg.param_types)
            kernels.append(k)

    if tg.before is not None:
        part(tg.before, "before")
    source, kernel = template_kernel(tg, label, precision)
    pieces[kernel.name] = source
    kernels.append(kernel)
    if tg.after is not None:
        part(tg.after, "after")
    params, seen = [], set()
    for a in (a for k in kernels for a in k.params or ()):
        key = a.value if a.value is not None else id(a)
        if key not in seen:
            seen.add(key)
            params.append(a)
    name = kernel.name if len(kernels) == 1 else f"fl_g_{hashlib.sha256(''.join(pieces).encode()).hexdigest()[:16]}"
    return CudaGroup(-1, "\n".join(pieces.values()), kernels, params, [], len(kernels), [], name, sites, pieces)


__all__ = ["direct_view", "kernel_params", "template_group", "template_kernel"]
