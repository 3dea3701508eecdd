"""Groups whose complex op runs as a GEMM template: :mod:`.gemm_template` on the CPU, and
(planned with ``target="cuda"``, float16 and bfloat16 too) :mod:`.cuda_template` on CUDA.

A group qualifies when it holds one float32 (on the CPU also float16 or bfloat16, widened
to float32: :mod:`.gemm_half`) ``matmul``, ``gemm`` or 1-D/2-D ``conv`` whose
operands come from outside the group (or, with none of those, one 1-D/2-D ``max_pool`` or
``average_pool``, run as the depthwise kernel with a max or a sum for its tap), and
everything else in it is an *epilogue*: statements
over the complex op's output box that read the values computed before them at the same
element (bias, activations, a residual add, scale and shift, clip). Then:

* the template owns the complex op's loop order (packed panels, register-blocked
  micro-kernel); a constant operand (a conv's or a linear layer's weights) is packed once,
  here, at compile time;
* the polyhedral program of the group (:func:`.poly.build_program`) still supplies the
  statements: the complex op's ``final`` statement and the epilogue statements are printed,
  element by element, into the template's epilogue, which runs on each finished tile while
  it is in L1. Nothing fused makes an extra trip through memory.

The GEMM accumulates into the group's output buffer: the complex op's own output when the
group exports it, else the last output of the group (written in place by the epilogue, which
reads each element before it stores it). A group that does not fit this shape (a prologue
computed inside the group, a reduction after the conv, a guarded read in the epilogue) keeps
the polyhedral loop nest, so the template is a speed-up and never a restriction.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, replace

import numpy as np
import sympy as sp

from fusionlang.backend.epilogue import Assign, Define, Load, Statement, Store
from fusionlang.backend.depthwise_template import DEPTHWISE, MAX_POOL, SUM_POOL, depthwise_kernel, is_depthwise
from fusionlang.backend.pool_pairs import pairs_fit, pairs_kernel
from fusionlang.backend.grouped_template import grouped_kernel, is_grouped, scratch_bytes
from fusionlang.backend.cexpr import C, ctype
from fusionlang.backend.failures import ALLOC
from fusionlang.backend.gemm_amx import (amx_available, amx_fits, amx_kernel, amx_prelude, pack_constant_amx,
                                         packing_bytes)
from fusionlang.backend.gemm_half import C_ELEMENT_DTYPES, widening_wrapper
from fusionlang.backend.gemm_template import (Blocking, Epilogue, Fold, GemmProblem, Im2Col, Operand, blocking_for,
                                              gathers, im2col_blocking, kernel_printer, pack_constant,
                                              packing_floats, plan_matmul, reads_in_place, vector_types)
from fusionlang.backend.lower import LoweredGroup, lower
from fusionlang.backend.lrn_template import LrnKernel, plan_lrn
from fusionlang.backend.machine import Machine, host
from fusionlang.backend.poly import Access, Array, PolyProgram, PolyStmt, build_program
from fusionlang.backend.schedule import ScheduleChoice
from fusionlang.backend.schedule_store import ScheduleStore, schedule_key
from fusionlang.engine.cost import CONTRACTIONS
from fusionlang.engine.plan import FusionPlan, Group, boundary
from fusionlang.ir.graph import Graph, Node
from fusionlang.ir.types import HALF_FLOATS
from fusionlang.ops.access import as_expr, i_sym
from fusionlang.ops.checking import op_call
from fusionlang.ops.shape import row_major_strides
from fusionlang.ops.window import window_of

#: the ops the templates compute (the cost model prices them at the templates' rate)
COMPLEX_OPS = CONTRACTIONS
#: 2-D pooling runs as the depthwise kernel with a max or a sum for its tap, when a group
#: holds one and no complex op (an average's divisor is its final statement, an epilogue)
POOL_TAPS = {"max_pool": MAX_POOL, "average_pool": SUM_POOL}
#: a GEMM smaller than this many multiply-adds stays a loop nest (packing would dominate)
MIN_MACS = 4096
#: the dtypes the CUDA template takes (16-bit: m16n8k16 tensor cores, fp32 accumulation)
ELEMENT_DTYPES = ("float32", "float16", "bfloat16")


@dataclass(eq=False)
class TemplateGroup:
    """A group planned onto the template: the problem, how each operand is passed, and the
    statements the epilogue prints."""

    group: Group
    problem: GemmProblem
    blocking: Blocking
    #: kernel parameters in order (inputs, then outputs); aux arrays carry packed constants
    params: list[Array]
    a_param: Array
    b_param: Array
    c_param: Array
    packed_a: bool
    packed_b: bool
    #: output dim k of the complex op's output -> its expression in the GEMM's coordinates
    coords: dict[sp.Symbol, sp.Expr]
    final: PolyStmt
    epilogue: list[PolyStmt]
    #: what runs before and after the template call: loop nests, or an LRN alone as the
    #: LRN template (see :func:`plan_template`)
    before: LoweredGroup | LrnKernel | None = None
    after: LoweredGroup | LrnKernel | None = None
    #: values the parts pass to each other through memory: each needs a buffer
    scratch: tuple[str, ...] = ()
    #: the dtype of A and B: float32, float16 or bfloat16 (C: widened to float32 per call)
    element: str = "float32"
    #: CUDA: an elementwise prologue computed while one operand is staged, instead of a loop
    #: nest before the template (see :func:`staging_prologue`)
    prologue: StagedPrologue | None = None
    #: why the rest of the group is not the template's epilogue (then it runs after the
    #: call, as a loop nest through memory), or None when it is
    epilogue_refused: str | None = None
    #: a bfloat16 GEMM on AMX tiles (:mod:`.gemm_amx`): its operands stay 16-bit, its
    #: constant ones packed in AMX's layout
    amx: bool = False


@dataclass(eq=False)
class StagedPrologue:
    """What the group computes, element by element, before operand ``which`` ("a" or "b")
    is read: its statements in order (the last writes the operand) and the arrays they read."""

    which: str
    stmts: list[PolyStmt]
    inputs: list[Array]


@dataclass
class PartSchedules:
    """How the loop nests of a templated group's parts ("before" and "after" the template
    call) are scheduled: the ``planned`` choice for the part (the plan's) replayed, else
    the one ``store`` keeps for a part of that structure, else one searched now and
    counted in ``store`` (a compile's ``schedule_searches``)."""

    store: ScheduleStore = field(default_factory=ScheduleStore)
    planned: dict[str, ScheduleChoice] = field(default_factory=dict)


def part_schedules(tg: TemplateGroup) -> dict[str, ScheduleChoice]:
    """Part ("before", "after") -> the schedule its loop nest got: what a plan carries for
    the group so compile replays it."""
    parts = {"before": tg.before, "after": tg.after}
    return {which: part.scheduled.choice for which, part in parts.items()
            if isinstance(part, LoweredGroup) and part.scheduled.choice is not None}


# ----- planning --------------------------------------------------------------------------


def plan_template(plan: FusionPlan, group: Group, constants: dict, machine: Machine | None = None, *,
                  target: str = "c", parts: PartSchedules | None = None) -> TemplateGroup | None:
    """The group as a template call, or None when its complex op cannot be one.

    First choice: the whole group as one template call, the rest of the group its epilogue.
    Otherwise (a prologue inside the group, a concat or a reduction after the conv) the
    group runs in up to three parts: a loop nest for what the complex op reads, the
    template, a loop nest for the rest; values passed between the parts go through
    ``scratch`` buffers. Each is still far faster than the complex op as a loop nest.

    ``target="cuda"`` plans for :mod:`.cuda_template`: matmul, gemm and conv only (pools
    and depthwise convs stay loop nests there), constant operands passed as they are.
    ``parts`` schedules the loop nests before and after the call (default: searched in a
    store of their own).
    """
    candidate = template_candidate(plan, group, target)
    if candidate is None:
        return None
    node, shapes = candidate
    return _plan_parts(plan, group, node, shapes, constants, machine or host(), target, parts or PartSchedules())


def template_candidate(plan: FusionPlan, group: Group, target: str = "c") -> tuple[Node, tuple] | None:
    """(the complex node, its problem shapes) when ``group`` has one complex op (on the CPU,
    or a pool) of a size worth a template on ``target``, else None: what
    :func:`plan_template` checks before planning (and the feedback check before leaving a
    group's schedule to the template)."""
    complex_nodes = [n for n in plan.nodes_of(group) if n.op in COMPLEX_OPS]
    if not complex_nodes and target == "c":
        complex_nodes = [n for n in plan.nodes_of(group) if n.op in POOL_TAPS]
    if group.kind != "kernel" or len(complex_nodes) != 1:
        return None
    node = complex_nodes[0]
    # the C template folds a batch's small planes into its columns; the CUDA one keeps a
    # block grid over the images
    shapes = _problem(plan.graph, node, C_ELEMENT_DTYPES if target == "c" else ELEMENT_DTYPES,
                      pointwise_as_matrix=target == "c", fold=target == "c")
    if shapes is None:
        return None
    problem = shapes[0]
    if problem.m * problem.n * problem.k * int(np.prod(problem.outer, dtype=np.int64)) < MIN_MACS:
        return None
    if target != "c" and is_depthwise(problem):
        return None
    return node, shapes


def _plan_part(graph: Graph, group: Group, names: list[str], node: Node, shapes, constants: dict,
               machine: Machine, target: str) -> TemplateGroup | str:
    """``names`` (the complex node and what follows it) as one template call, or why not."""
    problem, coords, a_value, b_value = shapes
    prog = build_program(graph, names, constants=constants)
    stmts = epilogue_split(prog, node)
    if isinstance(stmts, str):
        return stmts
    final, epilogue = stmts
    c_array = _accumulator_target(prog, final, epilogue)
    _tables_as_float(prog)
    element = graph.types[a_value].dtype
    if c_array is None:
        return "the group exports nothing the GEMM could accumulate into"
    other = next((a for a in prog.arrays if a.dtype not in ("float32", element)), None)
    if other is not None:  # the template's parameters are float pointers (a bool mask is not)
        return f"the group reads or writes {other.value or 'an array'} as {other.dtype}"
    blocking = blocking_for(machine, problem, conv=node.op == "conv")
    direct = is_depthwise(problem) or is_grouped(problem)
    if target == "c" and not direct:
        blocking = im2col_blocking(machine, problem, blocking)
    if target == "c" and not direct and amx_fits(problem, element) and amx_available():
        return _amx_part(prog, problem, blocking, a_value, b_value, constants, final, epilogue, c_array, group, coords)
    # the depthwise, grouped and GEMV kernels read their weights as they are, and so does CUDA
    packs = {} if direct or reads_in_place(problem) or target != "c" else constants
    a_param, packed_a = _operand_param(prog, a_value, packs, problem, blocking, "a", element)
    b_constants = {} if reads_in_place(problem) or target != "c" else constants
    b_param, packed_b = _operand_param(prog, b_value, b_constants, problem, blocking, "b", element)
    params = _params(prog, final, epilogue, [a_param, b_param], c_array)
    return TemplateGroup(group, problem, blocking, params, a_param, b_param, c_array, packed_a, packed_b,
                         coords, final, epilogue, element=element)


def _amx_part(prog: PolyProgram, problem: GemmProblem, blocking: Blocking, a_value: str, b_value: str,
              constants: dict, final: PolyStmt, epilogue: list[PolyStmt], c_array: Array, group: Group,
              coords: dict) -> TemplateGroup:
    """The group as an AMX GEMM: its constant operands packed in AMX's bf16 layout."""
    operands = []
    for which, value in (("a", a_value), ("b", b_value)):
        view = problem.a if which == "a" else problem.b
        if value in constants and not isinstance(view, Im2Col):
            packed = pack_constant_amx(constants[value], problem, which)
            operands.append((Array(-1 - (which == "b"), packed.shape, "bfloat16", "input", None, packed), True))
        else:
            operands.append(_operand_param(prog, value, {}, problem, blocking, which, "bfloat16"))
    (a_param, packed_a), (b_param, packed_b) = operands
    params = _params(prog, final, epilogue, [a_param, b_param], c_array)
    return TemplateGroup(group, problem, blocking, params, a_param, b_param, c_array, packed_a, packed_b,
                         coords, final, epilogue, element="bfloat16", amx=True)


def _tables_as_float(prog: PolyProgram) -> None:
    """Integer constant tables (an average pool's divisors) as float32 where every entry is
    exact, since the template's parameters are float pointers."""
    for array in prog.arrays:
        if array.data is not None and array.dtype.startswith("int") and array.role == "input":
            if array.data.size and np.abs(array.data).max() < 2 ** 24:
                array.data = array.data.astype(np.float32)
                array.dtype = "float32"


def _plan_parts(plan: FusionPlan, group: Group, node: Node, shapes, constants: dict, machine: Machine,
                target: str, schedules: PartSchedules) -> TemplateGroup | None:
    graph = plan.graph
    before = _ancestors_within(plan, group, node)
    first = [n for n in group.nodes if n in before]
    rest = [n for n in group.nodes if n not in before and n != node.name]
    # the template takes what follows it as its epilogue if it can (with no prologue: the
    # whole group, one call), else the elementwise run right after it (shufflenet's conv +
    # relu before a channel shuffle), else only the op
    def part(names: list[str]) -> TemplateGroup | None:
        found = _plan_part(graph, group, names, node, shapes, constants, machine, target)
        return found if isinstance(found, TemplateGroup) else None

    whole = _plan_part(graph, group, [n for n in group.nodes if n not in before], node, shapes, constants,
                       machine, target) if rest else None
    core = whole if isinstance(whole, TemplateGroup) else None
    if core is not None:
        rest = []
    run = _same_shape_run(graph, node, rest)
    if core is None and 0 < len(run) < len(rest):
        core = part([n for n in group.nodes if n == node.name or n in run])
        rest = rest[len(run):] if core is not None else rest
    if core is None:
        core = part([node.name])
    if core is None:
        return None
    core.epilogue_refused = whole if isinstance(whole, str) else None
    if target == "c" and (_store_shuffled(graph, group, core, rest) or _store_transposed(graph, group, core, rest)
                          or _store_permuted(graph, group, core, rest)):
        rest = []
    core.prologue = staging_prologue(graph, group, first, node, shapes, constants) if first and target != "c" \
        else None
    if core.prologue is not None:  # computed while staging: the prologue and the template are one part
        first = []
    core.before = _part(graph, first, constants, target, schedules, "before") if first else None
    core.after = _part(graph, rest, constants, target, schedules, "after") if rest else None
    parts = [p for p in (first, [n for n in group.nodes if n not in first and n not in rest], rest) if p]
    crossing = {v for part in parts for v in boundary(graph, set(part))[1]}
    core.scratch = tuple(sorted(crossing - set(group.outputs)))
    return core


def _store_shuffled(graph: Graph, group: Group, core: TemplateGroup, rest: list[str]) -> bool:
    """Have the template store its result straight into the channel shuffle that is all
    that follows it, and say whether it does. shufflenet: a conv of G groups, then reshape
    to [N, G, C/G, H, W], transpose (0, 2, 1, 3, 4), reshape back. Row q of conv group g is
    output channel q * G + g, so C's rows step G planes and its group step is one plane;
    the strided copy after the template goes (it ran as a loop nest through a scratch
    buffer)."""
    problem, c = core.problem, core.c_param
    if len(rest) != 3 or len(problem.outer) != (1 if problem.fold else 2) or not c.value or len(c.shape) != 4:
        return False
    # the images are the outer loop, or (folded) in the columns: C's image stride stays
    images = problem.fold.images if problem.fold else problem.outer[0]
    split, swap, join = (graph.node(n) for n in rest)
    if (split.op, swap.op, join.op) != ("reshape", "transpose", "reshape") or split.inputs[0] != c.value \
            or swap.inputs[0] != split.outputs[0] or join.inputs[0] != swap.outputs[0]:
        return False
    if {c.value, split.outputs[0], swap.outputs[0]} & set(group.outputs):
        return False  # something outside the group reads the conv's result or a view between
    n, channels, h, w = c.shape
    groups = problem.outer[-1]
    plane = h * w
    if op_call(graph, swap).attrs["perm"] != (0, 2, 1, 3, 4) or channels % groups \
            or graph.types[split.outputs[0]].shape != (n, groups, channels // groups, h, w) \
            or graph.types[join.outputs[0]].shape != c.shape:
        return False
    image_strides = () if problem.fold else (channels * plane,)
    columns = images * plane if problem.fold else plane
    if (images, problem.m, problem.n) != (n, channels // groups, columns) \
            or problem.c != Operand(plane, 1, 0, image_strides + (channels // groups * plane,)) \
            or (problem.fold is not None and problem.fold.c_stride != channels * plane):
        return False
    core.problem = replace(problem, c=replace(problem.c, rows=groups * plane, outer_strides=image_strides + (plane,)))
    c.value = join.outputs[0]
    return True


def _store_transposed(graph: Graph, group: Group, core: TemplateGroup, rest: list[str]) -> bool:
    """Have the template store its result straight into the transpose that swaps its images
    and channels, all that follows it, and say whether it does. A conv's weight gradient
    is a conv of the input with images and channels swapped, transposed back to [O, C, kh,
    kw]: image b, row i, position p of C is element (i, b, p) of the transpose, so C's rows
    step images * plane floats and its image step is one plane. Folded, each row of C is
    then one contiguous run (resnet18's 3x3 weight gradients: the micro-kernel accumulates
    in place, and the strided copy after the template goes)."""
    problem, c = core.problem, core.c_param
    if len(rest) != 1 or not c.value or len(c.shape) not in (3, 4) or len(problem.outer) != (1 if problem.fold else 2):
        return False
    swap = graph.node(rest[0])
    if swap.op != "transpose" or swap.inputs[0] != c.value or c.value in group.outputs:
        return False
    rank = len(c.shape)
    if op_call(graph, swap).attrs["perm"] != (1, 0) + tuple(range(2, rank)):
        return False
    images, channels, plane = c.shape[0], c.shape[1], int(np.prod(c.shape[2:], dtype=np.int64))
    groups = problem.outer[-1]
    rows = channels // groups
    image_strides = () if problem.fold else (channels * plane,)
    if problem.m != rows or problem.c != Operand(plane, 1, 0, image_strides + (rows * plane,)) \
            or (problem.fold is not None and problem.fold.c_stride != channels * plane) \
            or (problem.fold is None and problem.outer[0] != images):
        return False
    swapped = () if problem.fold else (plane,)
    fold = replace(problem.fold, c_stride=plane) if problem.fold else None
    core.problem = replace(problem, c=Operand(images * plane, 1, 0, swapped + (rows * images * plane,)), fold=fold)
    c.value, c.shape = swap.outputs[0], graph.types[swap.outputs[0]].shape
    return True


#: the most elements :func:`_store_permuted` maps one by one (its check holds a few int64
#: arrays of that many; a larger product keeps its copy after the template)
PERMUTED_STORE_ELEMENTS = 1 << 24


def _store_permuted(graph: Graph, group: Group, core: TemplateGroup, rest: list[str]) -> bool:
    """Have a product store its result straight through the transposes and reshapes that
    are all that follows it, when C's elements land at an affine place in the last view
    (column step 1), and say whether it does. Attention merging its heads back: P.V is
    [B, H, S, D], transposed to [B, S, H, D] and reshaped to [B, S, H * D], so C's rows
    step H * D floats and its head step is D; the copy after the template (two loop nests
    through a scratch buffer) goes."""
    problem, c = core.problem, core.c_param
    if problem.fold is not None or not rest or not c.value or c.value in group.outputs:
        return False
    final = _view_chain(graph, group, c.value, rest)
    shape = tuple(c.shape)
    size = int(np.prod(shape, dtype=np.int64)) if all(isinstance(d, int) for d in shape) else 0
    if final is None or not 0 < size <= PERMUTED_STORE_ELEMENTS:
        return False
    where = np.arange(size).reshape(shape)
    for name in rest:
        where = _view(graph, graph.node(name), where)
    problem = _outer_split(problem, graph.types[graph.node(rest[0]).outputs[0]].shape)
    moved = _moved_view(problem, where)
    if moved is None:
        return False
    core.problem = replace(problem, c=moved)
    c.value, c.shape = final, graph.types[final].shape
    return True


def _outer_split(problem: GemmProblem, shape: tuple) -> GemmProblem:
    """The problem with its one outer loop split as ``shape``'s leading dims when that
    reshape of C only splits it (attention's backward: [B*H, S, D] products viewed as
    [B, H, S, D] before the heads merge), so each becomes an affine index of its own;
    else the problem as it is. An outer index o = i * f + j steps s * f and s in every
    operand."""
    lead = tuple(shape[:-2])
    if len(problem.outer) != 1 or len(lead) < 2 or tuple(shape[-2:]) != (problem.m, problem.n) \
            or int(np.prod(lead, dtype=np.int64)) != problem.outer[0] or not isinstance(problem.b, Operand):
        return problem
    steps = [int(np.prod(lead[k + 1:], dtype=np.int64)) for k in range(len(lead))]

    def split(view: Operand) -> Operand:
        return replace(view, outer_strides=tuple(view.outer_strides[0] * step for step in steps))

    return replace(problem, a=split(problem.a), b=split(problem.b), c=split(problem.c), outer=lead)


def _view_chain(graph: Graph, group: Group, value: str, rest: list[str]) -> str | None:
    """The value at the end of ``rest`` when it is a chain of transposes and reshapes from
    ``value`` that nothing outside the group reads midway, else None."""
    for name in rest:
        node = graph.node(name)
        if node.op not in ("reshape", "transpose") or node.inputs[0] != value or value in group.outputs:
            return None
        value = node.outputs[0]
    return value


def _view(graph: Graph, node: Node, where: np.ndarray) -> np.ndarray:
    if node.op == "transpose":
        return np.transpose(where, op_call(graph, node).attrs["perm"])
    return where.reshape(graph.types[node.outputs[0]].shape)


def _moved_view(problem: GemmProblem, where: np.ndarray) -> Operand | None:
    """C's view of the last array, whose element at each flat position came from element
    ``where`` of C's own array, or None when that is not an operand (not affine in C's
    indices, or its columns not contiguous)."""
    landing = np.empty(where.size, dtype=np.int64)
    landing[where.ravel()] = np.arange(where.size)
    c = problem.c
    dims = problem.outer + (problem.m, problem.n)
    indices = np.meshgrid(*(np.arange(d) for d in dims), indexing="ij")
    flat = np.asarray(c.offset + sum(i * s for i, s in zip(indices, c.outer_strides + (c.rows, c.cols))))
    if flat.min() < 0 or flat.max() >= where.size:
        return None
    moved = landing[flat]
    origin = int(moved.flat[0])
    steps = [int(moved[tuple(1 if a == axis else 0 for a in range(len(dims)))]) - origin if d > 1 else 0
             for axis, d in enumerate(dims)]
    if problem.n > 1 and steps[-1] != 1:
        return None
    steps[-1] = 1
    if not np.array_equal(moved, origin + sum(i * s for i, s in zip(indices, steps))):
        return None
    return Operand(steps[-2], 1, origin, tuple(steps[:-2]))


def staging_prologue(graph: Graph, group: Group, first: list[str], node: Node, shapes, constants: dict
                     ) -> StagedPrologue | None:
    """``first`` (the group's nodes the complex op reads through) as a prologue the CUDA
    template computes while staging one operand, or None. It qualifies when all it hands
    on is that one operand (no group output, nothing the rest reads), and each of its
    statements computes one element of the operand's box from values at the same element
    (or inputs at any affine index: a per-channel scale): bn + relu before a conv."""
    _, _, a_value, b_value = shapes
    handed = set(boundary(graph, set(first))[1])
    if a_value == b_value or handed not in ({a_value}, {b_value}) or handed & set(group.outputs):
        return None
    which = "a" if handed == {a_value} else "b"
    if which == "a" and node.op == "conv":
        return None  # a conv's weights are constants: folded, never a prologue
    prog = build_program(graph, first, constants=constants)
    box = graph.types[a_value if which == "a" else b_value].shape
    written: set[int] = set()
    for s in prog.stmts:
        if s.kind != "compute" or s.out_extents != box or not _identity(s.write.index, box) or s.write.guarded:
            return None
        for r in s.reads:
            if r.guarded or r.is_indirect():
                return None
            if r.array is not None and r.array.role != "input" and \
                    (r.array.id not in written or not _identity(r.index, box)):
                return None
        written.add(s.write.array.id)
    if not prog.stmts or prog.stmts[-1].write.array.value not in handed:
        return None
    _tables_as_float(prog)
    return StagedPrologue(which, list(prog.stmts), [a for a in prog.arrays if a.role == "input"])


def _same_shape_run(graph: Graph, node: Node, rest: list[str]) -> list[str]:
    """The nodes at the head of ``rest`` whose outputs keep the shape of ``node``'s: the
    candidates for an epilogue when the whole of ``rest`` is not one."""
    shape = graph.types[node.outputs[0]].shape
    run = []
    for name in rest:
        if any(graph.types[v].shape != shape for v in graph.node(name).outputs):
            break
        run.append(name)
    return run


def _ancestors_within(plan: FusionPlan, group: Group, node: Node) -> set[str]:
    members = set(group.nodes)
    producer = {out: n for n in plan.nodes_of(group) for out in n.outputs}
    found: set[str] = set()
    stack = [v for v in node.present_inputs()]
    while stack:
        p = producer.get(stack.pop())
        if p is not None and p.name in members and p.name not in found:
            found.add(p.name)
            stack.extend(p.present_inputs())
    return found


def _part(graph: Graph, names: list[str], constants: dict, target: str, schedules: PartSchedules,
          which: str) -> LoweredGroup | LrnKernel:
    """The part ``which`` ("before" or "after") of a group around its template: an LRN
    alone runs as the LRN template on the C target (zfnet512's and alexnet's LRN before a
    max pool), the rest as a loop nest."""
    lrn = plan_lrn(graph, names, constants) if target == "c" else None
    return lrn if lrn is not None else _loop_nest(graph, names, constants, target, schedules, which)


def _loop_nest(graph: Graph, names: list[str], constants: dict, target: str, schedules: PartSchedules,
               which: str) -> LoweredGroup:
    # one nest per statement: what is left of the group is data movement (a concat, a
    # transpose) and what follows it, whose fused schedule puts the moved axis innermost
    # (densenet121's concat + batch norm + relu: channels innermost at a stride of a whole
    # plane, 25 ms of the model's 113; one contiguous nest per statement: 10 ms)
    # (one op alone schedules as its own group would: LRN's three statements share its rows)
    # An elementwise chain moves nothing: one fused nest, not a temporary per op (BERT's
    # training step: a mask's where and layer norm pieces beside the pooler's GEMM, 7 nests)
    prog = build_program(graph, names, constants=constants)
    fuse = len(names) == 1 or _elementwise(prog)
    key = schedule_key(graph, names, constants, target, fuse)
    return lower(schedules.store.scheduled(prog, key, target, fuse, schedules.planned.get(which)))


def _elementwise(prog: PolyProgram) -> bool:
    """Whether every statement of ``prog`` computes one element of one common box, reading
    what ``prog`` computes only at that element (inputs at any index: a broadcast)."""
    if not prog.stmts:
        return False
    box = prog.stmts[0].out_extents
    written: set[int] = set()
    for s in prog.stmts:
        if s.kind != "compute" or s.out_extents != box or s.constraints or s.write.guarded \
                or not _identity(s.write.index, box):
            return False
        if any(r.array is not None and r.array.id in written and not _identity(r.index, box) for r in s.reads):
            return False
        written.add(s.write.array.id)
    return True


def _problem(graph: Graph, node: Node, dtypes=("float32",), pointwise_as_matrix: bool = False, fold: bool = False):
    """(GemmProblem, coords, value read as A, value read as B), or None if unsupported:
    every operand and the result of one dtype of ``dtypes``. ``pointwise_as_matrix``: a
    1x1, stride-1, unpadded conv reads its input as a plain matrix, not as an im2col (the C
    template; the CUDA one stages a conv's prologue through its im2col gather). ``fold``: a
    conv on small planes folds its images into the GEMM's columns where that pays
    (:func:`folds`), and a matmul's batch sharing one B folds into M (plan_matmul)."""
    call = op_call(graph, node)
    types = [t for t in call.in_types if t is not None] + list(call.out_types)
    if len({t.dtype for t in types}) != 1 or types[0].dtype not in dtypes:
        return None
    if node.op == "matmul":
        return _matmul_problem(call, node, fold)
    if node.op == "gemm":
        return _gemm_problem(call, node)
    if node.op in POOL_TAPS:
        return _pool_problem(call, node)
    return _conv_problem(call, node, pointwise_as_matrix, fold)


def _matmul_problem(call, node: Node, fold: bool = False):
    a, b = call.input(0), call.input(1)
    out = call.out_types[0]
    if a.rank < 2 or b.rank < 2:
        return None  # matrix-vector products stay loop nests
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = out.shape[:-2]
    out_strides = row_major_strides(out.shape)[:-2]

    def batch_strides(t):
        own = row_major_strides(t.shape)[:-2]
        lead = len(batch) - len(own)
        return tuple(0 if d < lead or t.shape[d - lead] == 1 else own[d - lead] for d in range(len(batch)))

    batched = GemmProblem(m, n, k, Operand(k, 1, 0, batch_strides(a)), Operand(n, 1, 0, batch_strides(b)),
                          Operand(n, 1, 0, tuple(out_strides)), tuple(batch))
    problem = plan_matmul(batched) if fold else batched
    if problem.outer:
        coords = {i_sym(d): sp.Symbol(f"o{d}", integer=True, nonnegative=True) for d in range(len(batch))}
        coords[i_sym(len(batch))] = _I
    else:
        coords = _folded_rows(tuple(batch), m)
    coords[i_sym(len(batch) + 1)] = _J
    return problem, coords, node.inputs[0], node.inputs[1]


def _folded_rows(batch: tuple[int, ...], m: int) -> dict[sp.Symbol, sp.Expr]:
    """The batch and row coordinates of row i of a batch folded into M (plan_matmul): the
    flat row seen through the reshape to [*batch, m] (:func:`_reshape_view`), so a
    row-major offset cancels to i's."""
    extents = tuple(batch) + (m,)
    view = _reshape_view((math.prod(extents),), extents)
    assert view is not None, "a reshape of the same size"
    return {sym: index.subs(i_sym(0), _I) for sym, index in view.items()}


def _gemm_problem(call, node: Node):
    a, b = call.input(0), call.input(1)
    m, n = call.out_types[0].shape
    k = a.shape[0] if call.attrs["trans_a"] else a.shape[1]
    a_view = Operand(1, m) if call.attrs["trans_a"] else Operand(k, 1)
    b_view = Operand(1, k) if call.attrs["trans_b"] else Operand(n, 1)
    problem = GemmProblem(m, n, k, a_view, b_view, Operand(n, 1))
    return problem, {i_sym(0): _I, i_sym(1): _J}, node.inputs[0], node.inputs[1]


def _window_geometry(call, x, kernel_shape) -> tuple[tuple, tuple, tuple, tuple, tuple, tuple]:
    """(spatial, out spatial, kernel, strides, dilations, pads begin) as 2-D, a 1-D window
    being a 2-D one with one row."""
    window = window_of(call, x.rank - 2, tuple(kernel_shape))
    spatial, out_spatial = x.shape[2:], call.out_types[0].shape[2:]
    if x.rank == 3:
        return ((1,) + spatial, (1,) + out_spatial, (1,) + window.kernel, (1,) + window.strides,
                (1,) + window.dilations, (0,) + window.pads_begin)
    return spatial, out_spatial, window.kernel, window.strides, window.dilations, window.pads_begin


def _conv_problem(call, node: Node, pointwise_as_matrix: bool = False, fold: bool = False):
    x, w = call.input(0), call.input(1)
    if x.rank not in (3, 4):
        return None
    spatial, out_spatial, kernel, strides, dilations, pads = _window_geometry(
        call, x, call.attrs["kernel_shape"] or w.shape[2:])
    return _windowed_problem(x, spatial, out_spatial, kernel, strides, dilations, pads, call.attrs["group"],
                             w.shape[0], node.inputs[1], node.inputs[0], pointwise_as_matrix, fold)


def _pool_problem(call, node: Node):
    """A pool as a depthwise convolution without weights: one channel per group."""
    x = call.input(0)
    if x.rank not in (3, 4):
        return None
    geometry = _window_geometry(call, x, call.attrs["kernel_shape"])
    channels = x.shape[1]
    return _windowed_problem(x, *geometry, channels, channels, node.inputs[0], node.inputs[0])


def _windowed_problem(x, spatial, out_spatial, kernel, strides, dilations, pads, group: int, oc: int,
                      a_value: str, b_value: str, pointwise_as_matrix: bool = False, fold: bool = False):
    batch, channels = x.shape[:2]
    cg, mg = channels // group, oc // group
    kg = cg * kernel[0] * kernel[1]
    h, wd = spatial
    oh, ow = out_spatial
    plane = oh * ow
    image = Im2Col(cg, h, wd, kernel, strides, dilations, pads, oh, ow, 0, (cg * h * wd,))
    folded = Fold(batch, channels * h * wd, oc * plane)
    if fold and folds(image, folded, mg):
        return _folded_problem(x.rank, image, folded, mg, group, a_value, b_value)
    a_view = Operand(kg, 1, 0, (0, mg * kg))
    if pointwise_as_matrix and tuple(kernel) == (1, 1) and tuple(strides) == (1, 1) and not any(pads) \
            and (oh, ow) == (h, wd):
        # a pointwise conv reads its input as it lies, a [channels, pixels] matrix: packed
        # row by row (whole rows of pixels), not one output row's run at a time (A/B by
        # process: inception_v2 39 -> 37 ms, squeezenet 7.0 -> 6.5)
        b_view: Operand | Im2Col = Operand(h * wd, 1, 0, (channels * h * wd, cg * h * wd))
    else:
        b_view = replace(image, outer_strides=(channels * h * wd, cg * h * wd))
    c_view = Operand(plane, 1, 0, (oc * plane, mg * plane))
    problem = GemmProblem(mg, plane, kg, a_view, b_view, c_view, (batch, group))
    o0, o1 = (sp.Symbol(f"o{d}", integer=True, nonnegative=True) for d in range(2))
    coords = {i_sym(0): o0, i_sym(1): o1 * mg + _I}
    coords.update(_plane_coords(x.rank, _J, ow))
    return problem, coords, a_value, b_value


#: a conv folds its images into the GEMM's columns when its output plane has at most this
#: many positions. Kernel time unfolded / folded, batch 4, 3x3 convs, one core, AVX-512
#: (6x64 tile), interleaved medians on a busy machine: plane 1 (512 channels) 2.8x, 4 (512)
#: 3.3x, 9 (256) 1.0 and 1.9x, 16 (256) 1.1x, 49 (256) 1.04 to 1.18x, 64 (128) 1.0x, 196
#: (128) 0.84 to 1.04x; 1x1 convs 320 -> 1280 at 7x7 1.08 to 1.32x, 96 -> 576 at 14x14
#: 0.94 to 0.97x. Weight gradients (a conv of the transposed input, channels as images):
#: m=512 n=9 k=16 x512 2.3x, m=64 n=9 k=1024 x64 3.8x, m=1280 n=1 k=16 x320 2.1x, m=96 n=1
#: k=4096 x16 26x
FOLD_MAX_PLANE = 64


def folds(image: Im2Col, fold: Fold, mg: int) -> bool:
    """Whether a conv of ``fold.images`` images folds them into its GEMM's columns: a
    batch, on a plane of at most FOLD_MAX_PLANE positions, not depthwise (its own
    template), with every image's padded input within the gathers' copy and C's offsets
    within an int."""
    plane = image.out_h * image.out_w
    depthwise = image.channels == 1 and mg == 1  # as is_depthwise: the depthwise template's
    return (fold.images > 1 and plane <= FOLD_MAX_PLANE and not depthwise and gathers(image, fold)
            and fold.images * fold.c_stride < 2 ** 31)


def _folded_problem(rank: int, image: Im2Col, fold: Fold, mg: int, group: int, a_value: str, b_value: str):
    """The conv as one GEMM per group with n = images * plane: column j is position
    j % plane of image j // plane (the epilogue's image coordinate)."""
    plane = image.out_h * image.out_w
    kg = image.channels * image.kernel[0] * image.kernel[1]
    problem = GemmProblem(mg, fold.images * plane, kg, Operand(kg, 1, 0, (mg * kg,)), image,
                          Operand(plane, 1, 0, (mg * plane,)), (group,), fold)
    o0 = sp.Symbol("o0", integer=True, nonnegative=True)
    which = sp.floor(_J / plane)
    coords = {i_sym(0): which, i_sym(1): o0 * mg + _I}
    coords.update(_plane_coords(rank, _J - plane * which, image.out_w))
    return problem, coords, a_value, b_value


def _plane_coords(rank: int, position: sp.Expr, ow: int) -> dict[sp.Symbol, sp.Expr]:
    """The spatial coordinates of output ``position`` of a plane ``ow`` wide."""
    if rank == 3:
        return {i_sym(2): position}
    row = sp.floor(position / ow)
    # the column as position - ow * row, so an identity read's offset cancels to the position
    return {i_sym(2): row, i_sym(3): position - ow * row}


_I = sp.Symbol("i", integer=True, nonnegative=True)
_J = sp.Symbol("j", integer=True, nonnegative=True)


def epilogue_split(prog: PolyProgram, node: Node) -> tuple[PolyStmt, list[PolyStmt]] | str:
    """(the complex op's final statement, the epilogue statements in order), or a one-line
    reason why the rest of ``prog`` is not an epilogue of ``node``: statements over the
    complex op's output box (or a contiguous reshape of it, seen through the box: BERT's
    [B*S, N] GEMM feeding a GELU over [B, S, N]), each writing its own element and reading
    what the group computed only at that element, and the complex op reading nothing the
    group computes (a prologue)."""
    own = [s for s in prog.stmts if s.node is node]
    finals = [s for s in own if s.kind in ("final", "compute")]
    if len(finals) != 1 or {s.kind for s in own} - {"init", "update", "final", "compute"}:
        return f"{node.name} is not one contraction"
    others = {s.write.array.id for s in prog.stmts if s.node is not node}
    if any(r.array is not None and r.array.id in others for s in own for r in s.reads):
        return f"{node.name} reads a value the group computes (a prologue)"
    final = finals[0]
    box = final.out_extents
    epilogue = []
    for s in prog.stmts:
        if s.node is not node:
            seen = _seen_through(s, box)
            if isinstance(seen, str):
                return seen
            epilogue.append(seen)
    written = {final.write.array.id}
    for s in [final] + epilogue:
        if not _same_element(s.write.index, s.write.array, box) or s.write.guarded:
            return f"{s.node.name} writes other than its own element of {node.name}'s output"
        for r in s.reads:
            if r.guarded or r.is_indirect():
                return f"{s.node.name} reads through a guard or an index it loads"
            if r.array is not None and r.array.internal and r.array.role != "acc" and \
                    (r.array.id not in written or not _same_element(r.index, r.array, box)):
                return f"{s.node.name} reads a value of the group at another element"
            if r.array is not None and r.array.role == "output" and r.array.id in written and \
                    not _same_element(r.index, r.array, box):
                return f"{s.node.name} reads an output of the group at another element"
        written.add(s.write.array.id)
    return final, epilogue


def _seen_through(s: PolyStmt, box: tuple[int, ...]) -> PolyStmt | str:
    """Statement ``s`` over ``box``: itself when it runs over the box, else (an elementwise
    statement over a contiguous reshape of the box) with each of its dims written as the
    box's element at the same row-major offset; or why it is not over the box."""
    if s.kind != "compute":
        return f"{s.node.name} is a reduction after the contraction"
    if s.out_extents == box:
        return s
    view = _reshape_view(box, s.out_extents)
    if view is None or s.constraints:
        return f"{s.node.name} runs over {list(s.out_extents)}, not the contraction's {list(box)} or a reshape of it"

    def seen(access: Access) -> Access:
        return replace(access, index=tuple(as_expr(e).subs(view, simultaneous=True) for e in access.index))

    return replace(s, out_extents=box, reads=[seen(r) for r in s.reads], write=seen(s.write),
                   expr=as_expr(s.expr).subs(view, simultaneous=True))


def _reshape_view(box: tuple[int, ...], shape: tuple[int, ...]) -> dict[sp.Symbol, sp.Expr] | None:
    """Dim k of ``shape`` -> its index at the element of ``box`` with the same row-major
    offset, when ``shape`` is a reshape of ``box`` (the same size), else None. Dims are
    matched in runs of equal size, so a split dim is a division and a remainder of the box's
    (written ``i - 64*floor(i/64)``, so a read's flat offset cancels back to ``i``), and a
    merged one a sum."""
    if int(np.prod(box, dtype=np.int64)) != int(np.prod(shape, dtype=np.int64)):
        return None
    view: dict[sp.Symbol, sp.Expr] = {i_sym(k): sp.Integer(0) for k, n in enumerate(shape) if n == 1}
    left = [k for k, n in enumerate(box) if n != 1]
    right = [k for k, n in enumerate(shape) if n != 1]
    while left:
        run_left, run_right = [left.pop(0)], [right.pop(0)]
        size_left, size_right = box[run_left[0]], shape[run_right[0]]
        while size_left != size_right:
            if size_left < size_right:
                run_left.append(left.pop(0))
                size_left *= box[run_left[-1]]
            else:
                run_right.append(right.pop(0))
                size_right *= shape[run_right[-1]]
        offset = sum((i_sym(k) * stride for k, stride in
                      zip(run_left, row_major_strides(tuple(box[k] for k in run_left)))), sp.Integer(0))
        outer = None
        for k, stride in zip(run_right, row_major_strides(tuple(shape[k] for k in run_right))):
            view[i_sym(k)] = sp.floor(offset / stride) - (0 if outer is None else shape[k] * sp.floor(offset / outer))
            outer = stride
    return view


def _same_element(index, array: Array, box: tuple[int, ...]) -> bool:
    """Whether ``index`` into ``array`` is the box's element (i0, i1, ...) itself: the same
    indices, or (an array of the box's size seen through a reshape) the same row-major
    offset once a remainder is written as a division."""
    if _identity(index, box):
        return True
    if array.size != int(np.prod(box, dtype=np.int64)) or len(index) != len(array.shape):
        return False
    return sp.expand(_flat(index, array.shape) - _flat(tuple(i_sym(k) for k in range(len(box))), box)) == 0


def _flat(index, shape) -> sp.Expr:
    """The row-major offset of ``index`` into ``shape``, ``a % n`` written ``a - n*floor(a/n)``."""
    offset = sum((as_expr(e) * stride for e, stride in zip(index, row_major_strides(tuple(shape)))), sp.Integer(0))
    return sp.expand(offset.replace(sp.Mod, lambda a, n: a - n * sp.floor(a / n)))


def _identity(index, shape) -> bool:
    """Element (i0, i1, ...) itself; a dimension of extent 1 may be indexed by 0."""
    return len(index) == len(shape) and all(
        as_expr(e) == i_sym(k) or (n == 1 and as_expr(e) == 0) for k, (e, n) in enumerate(zip(index, shape)))


def _accumulator_target(prog: PolyProgram, final: PolyStmt, epilogue: list[PolyStmt]) -> Array | None:
    """The global array the GEMM accumulates into: the complex op's output if the group
    exports it, else the last output an epilogue statement writes."""
    if final.write.array.role == "output":
        return final.write.array
    outputs = [s.write.array for s in epilogue if s.write.array.role == "output"]
    return outputs[-1] if outputs else None


def _operand_param(prog: PolyProgram, value: str, constants: dict, problem: GemmProblem, blocking: Blocking,
                   which: str, element: str) -> tuple[Array, bool]:
    view = problem.a if which == "a" else problem.b
    if value in constants and not isinstance(view, Im2Col):
        packed = pack_constant(constants[value], problem, blocking, which)
        return Array(-1 - (which == "b"), packed.shape, "float32", "input", None, packed), True
    array = prog.array_of(value)
    if array is None:
        array = Array(-3 - (which == "b"), (), element, "input", value)
    return array, False


def _params(prog: PolyProgram, final: PolyStmt, epilogue: list[PolyStmt], operands: list[Array],
            c_array: Array) -> list[Array]:
    params: list[Array] = []
    for a in operands:
        if all(a is not p for p in params):
            params.append(a)
    for s in [final] + epilogue:
        for r in s.reads:
            a = r.array
            if a is not None and a.role == "input" and all(a is not p for p in params):
                params.append(a)
    outputs = [c_array] + [s.write.array for s in [final] + epilogue
                           if s.write.array.role == "output" and s.write.array is not c_array]
    seen: list[Array] = []
    for a in outputs:
        if all(a is not p for p in seen):
            seen.append(a)
    return params + seen


# ----- printing --------------------------------------------------------------------------


def emit_template(tg: TemplateGroup, label: str, *, openmp: bool = False,
                  helpers: dict[str, str] | None = None) -> tuple[str, str, bool, str]:
    """(function name, C source, whether it takes the error record, which template: "GEMM",
    "depthwise" or "pooling") of the group's kernel:
    the GEMM with its epilogue, and a wrapper taking the group's parameters in order. The
    GEMM allocates its packing buffers: when that fails, the wrapper fills the error record
    (backend.failures) and the run stops with a ResourceError. ``openmp``: threads share
    its tiles. ``helpers``: a dict collects the routines GEMM kernels share (micro-kernels,
    packers) by name, and the source only declares them (see gemm_template._shared); by
    default the source holds them."""
    names = {id(a): f"p{k}" for k, a in enumerate(tg.params)}
    decls = [f"{'const ' if a.role == 'input' else ''}{ctype(a.dtype, C)} *restrict {names[id(a)]}" for a in tg.params]
    extra = epilogue_arrays(tg)
    epilogue = Epilogue(epilogue_body(tg, names), tuple(d for a, d in zip(tg.params, decls) if any(a is e for e in extra)))
    depthwise = is_depthwise(tg.problem)
    grouped = is_grouped(tg.problem)
    pool = POOL_TAPS.get(tg.final.node.op)
    args = [names[id(tg.a_param)]] if pool is None else []
    args += [names[id(tg.b_param)], names[id(tg.c_param)]] + [names[id(a)] for a in extra]

    gemm = None if depthwise or grouped or tg.amx else kernel_printer(tg.problem, tg.blocking, epilogue,
                                                            packed_a=tg.packed_a, packed_b=tg.packed_b,
                                                            threads=openmp, helpers=helpers, linkage="static ")

    def text(name: str) -> str:
        """The kernel named ``name``: the template's function and a wrapper taking the group's parameters."""
        if tg.amx:
            inner = amx_prelude() + amx_kernel(f"{name}_gemm", tg.problem, epilogue, tg.c_param.dtype,
                                               packed_a=tg.packed_a, packed_b=tg.packed_b, threads=openmp)
        elif grouped:
            inner = grouped_kernel(f"{name}_gemm", tg.problem, epilogue, threads=openmp, linkage="static ")
        elif pool is not None and pairs_fit(tg.problem, tg.blocking.vl, pool):
            inner = pairs_kernel(f"{name}_gemm", tg.problem, pool, epilogue, tg.blocking.vl, threads=openmp,
                                 linkage="static ")
        elif gemm is None:
            inner = depthwise_kernel(f"{name}_gemm", tg.problem, epilogue, threads=openmp, tap=pool or DEPTHWISE,
                                     linkage="static ")
        else:
            inner = gemm(f"{name}_gemm")
        call = f"{name}_gemm({', '.join(args)})"
        if tg.element in HALF_FLOATS and not tg.amx:  # the float32 kernel on widened operands
            operands = [tg.b_param] if pool else [tg.a_param, tg.b_param]
            alloc = None if depthwise else (ALLOC, _scratch_bytes(tg))
            wrapper = widening_wrapper(name, decls, f"{name}_gemm", args, operands, tg.c_param, alloc)
        elif depthwise:  # allocates nothing
            wrapper = f"void {name}({', '.join(decls)}) {{\n    {call};\n}}\n"
        else:
            nbytes = _scratch_bytes(tg)
            wrapper = (f"void {name}({', '.join(decls + ['int64_t *restrict fl_err'])}) {{\n"
                       f"    if ({call}) {{ fl_err[0] = {ALLOC}; fl_err[2] = {nbytes}; }}\n}}\n")
        return vector_types(tg.blocking.vl) + inner + wrapper

    # named by the hash of its text under a stand-in name (the same for every kernel)
    name = f"fl_t_{hashlib.sha256(text('@NAME@').encode()).hexdigest()[:16]}"
    kind = "pooling" if pool else "depthwise" if depthwise else "grouped" if grouped else "GEMM"
    comment = f"/* {label}: {tg.final.node.op} as the {kind} template, {len(tg.epilogue)} epilogue statement(s) */\n"
    return name, comment + text(name), not depthwise or tg.element in HALF_FLOATS, kind


def _scratch_bytes(tg: TemplateGroup) -> int:
    """Bytes the group's template kernel allocates: the GEMM's packing buffers, or the grouped
    conv's scratch."""
    if is_grouped(tg.problem):
        return scratch_bytes(tg.problem)
    if tg.amx:
        return packing_bytes(tg.problem, tg.packed_a, tg.packed_b)
    return 4 * packing_floats(tg.problem, tg.blocking, tg.packed_a, tg.packed_b)


def epilogue_arrays(tg: TemplateGroup) -> list[Array]:
    """The parameters the epilogue takes besides C: every one but the GEMM's operands,
    and an operand too where the epilogue reads it (a residual add of the conv's own input,
    which the GEMM reads as B)."""
    read = {id(r.array) for s in [tg.final] + tg.epilogue for r in s.reads if r.array is not None}
    operands = (tg.a_param, tg.b_param)
    return [a for a in tg.params if a is not tg.c_param and (all(a is not o for o in operands) or id(a) in read)]


def epilogue_body(tg: TemplateGroup, names: dict[int, str]) -> tuple[Statement, ...]:
    """The statements computing every epilogue value of one element from ``v`` (the GEMM's
    sum), storing the group's outputs other than the accumulator array itself last."""
    defines, local, stores = chain_statements([tg.final] + tg.epilogue, names, tg.coords, "e", skip_store=tg.c_param)
    return (*defines, *stores, Assign("v", local[tg.c_param.id]))


def chain_statements(stmts: list[PolyStmt], names: dict[int, str], coords: dict[sp.Symbol, sp.Expr], prefix: str,
                     skip_store: Array | None = None) -> tuple[list[Statement], dict[int, str], list[Statement]]:
    """(statements defining ``<prefix>0, <prefix>1, ...``: each statement's value at one
    element, array id -> the variable holding it, stores of the outputs among them but
    ``skip_store``). Index symbols become ``coords``; an accumulator read is ``v``."""
    local: dict[int, str] = {}
    defines: list[Statement] = []
    stores: list[Statement] = []
    for k, s in enumerate(stmts):
        reads: dict[sp.Symbol, Load | str] = {}
        for r in s.reads:
            if r.array is None:
                continue
            if r.array.role == "acc":
                reads[r.vsym] = "v"
            elif r.array.id in local:
                reads[r.vsym] = local[r.array.id]
            else:
                reads[r.vsym] = Load(names[id(r.array)], _flat_offset(r.array.shape, r.index, coords), r.array.dtype)
        var, dtype = f"{prefix}{k}", s.write.array.dtype
        defines.append(Define(var, s.expr, tuple(reads.items()), dtype))
        local[s.write.array.id] = var
        if s.write.array.role == "output" and s.write.array is not skip_store:
            offset = _flat_offset(s.write.array.shape, s.write.index, coords)
            stores.append(Store(names[id(s.write.array)], offset, var, dtype))
    return defines, local, stores


def _flat_offset(shape, index, coords: dict[sp.Symbol, sp.Expr]) -> sp.Expr:
    offset = sp.Integer(0)
    for e, stride in zip(index, row_major_strides(shape)):
        offset += as_expr(e).subs(coords, simultaneous=True) * stride
    return sp.expand(offset)


__all__ = ["COMPLEX_OPS", "PartSchedules", "StagedPrologue", "TemplateGroup", "chain_statements", "emit_template",
           "epilogue_body", "epilogue_split", "part_schedules", "plan_template", "staging_prologue"]
