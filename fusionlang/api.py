"""The public entry points, in one place: import a model, load rules, fuse, compile.

This is the only module that wires the packages together (frontend -> engine ->
backend), so the packages themselves keep their one-way imports: the backend's verdict
on a group reaches the engine here, as a callback.
"""

from __future__ import annotations

from typing import Any

from fusionlang.collector import paused
from fusionlang.engine.pipeline import fuse as _fuse
from fusionlang.engine.plan import FusionPlan
from fusionlang.ir.graph import Graph
from fusionlang.lang import load_rules as _load_rules


@paused
def from_onnx(path_or_model, input_shapes: dict[str, tuple[int, ...]] | None = None,
              constant_inputs: dict[str, Any] | None = None) -> Graph:
    """Import an ONNX model (path, bytes or ModelProto) as a statically shaped Graph.

    ``input_shapes`` gives shapes to symbolic input dims; ``constant_inputs`` binds graph
    inputs the model reads as axes, pads, shape or repeats to values (name -> array). A
    model needing either raises RuntimeInputError naming the inputs; ``Specializer``
    compiles such a model per run, from its feeds."""
    # imported on use: the frontend loads onnx (and its protobuf), which only importing needs
    from fusionlang.frontend import from_onnx as _from_onnx

    return _from_onnx(path_or_model, input_shapes=input_shapes, constant_inputs=constant_inputs)


@paused
def from_torch(module, example_args, dynamic_shapes=None) -> Graph:
    """Export a ``torch.nn.Module`` with ``torch.export`` (core ATen decompositions) as a
    statically shaped Graph for the shapes of ``example_args`` (a tuple of its positional
    arguments); parameters and buffers become constants, tensor arguments graph inputs
    named like export's placeholders. ``dynamic_shapes`` goes to ``torch.export.export``
    as is. Needs torch (``pip install 'fusionlang[torch]'``); an ATen op with no converter
    raises UnsupportedOpError naming it (``torch.compile(backend="fusionlang")`` runs such
    ops in eager instead)."""
    # imported on use: torch costs seconds to import, and it is an optional extra
    from fusionlang.frontend.torch_export import from_torch as _from_torch

    return _from_torch(module, example_args, dynamic_shapes=dynamic_shapes)


@paused
def load_rules(name_or_path):
    """A RuleSet by library name ("apollo", "tvm", "dnnfusion", ...) or .fuse path."""
    return _load_rules(name_or_path)


def default_rules(target: str = "c", strategy: str | None = None) -> str:
    """The rule set fuse() and compile_model() use when none is named: "apollo_patterns"
    for the C target under the apollo strategy (apollo whose pattern entries make each
    scaled dot-product attention block one group, which the C backend runs as one
    attention kernel), else "apollo" (CUDA runs each matmul as a template of its own and
    would refuse those groups; tvm and dp take no pattern entries)."""
    return "apollo_patterns" if target == "c" and strategy in (None, "apollo") else "apollo"


def _ruleset(rules):
    return load_rules(rules) if isinstance(rules, str) else rules


@paused
def fuse(graph: Graph, rules=None, strategy: str | None = None, *, options: dict[str, Any] | None = None,
         feedback: bool = True, target: str = "c") -> FusionPlan:
    """Rewrite ``graph`` with ``rules`` (default: ``default_rules(target, strategy)``) and
    partition it into fused groups for ``target`` ("c", "cuda" or "cuda-emu").

    ``strategy`` is apollo, tvm or dp (default: the rule set's own). With ``feedback``
    the backend's loop fuser vets every group for ``target``, groups it cannot fuse are
    split (Apollo's upward feedback), and the plan holds every decision compile needs: the
    groups cut around concats that run in place, and the schedule selected for each group
    (``plan.schedules``) and for the loop nests around a group's compute template
    (``plan.template_schedules``), so ``compile(plan)`` replays them and searches none.
    """
    if rules is None:
        rules = default_rules(target, strategy)
    if not feedback:
        return _fuse(graph, _ruleset(rules), strategy, options=options)
    # imported on use: the backend loads islpy (about a second), which a plan without
    # feedback, and every non-compiling use of the package, never needs
    from fusionlang.backend import FeedbackCheck, scheduling_target, split_at_concats

    check = FeedbackCheck(scheduling_target(target))
    plan = _fuse(graph, _ruleset(rules), strategy, options=options, feedback=check, target=target)
    plan = split_at_concats(plan, cut_inside=target == "c")
    plan.schedules = check.schedules_for(plan)
    plan.template_schedules = check.template_schedules_for(plan)
    return plan


@paused
def compile(plan: FusionPlan, target: str | None = None, **options):  # noqa: A001 - the documented name
    """Generate and build code for every group of ``plan``, for ``target`` (default: the
    plan's own, else "c"); returns a CompiledGraph whose ``run(feeds)`` returns {output
    name: array}. Options: see ``fusionlang.backend.compile`` (``check_indices=False``
    drops the range check of gathered indices)."""
    from fusionlang.backend import compile as _compile  # on use: islpy's import cost (see fuse)

    return _compile(plan, target=target, **options)


@paused
def save_fused_onnx(model, plan: FusionPlan, path):
    """Write ``model`` (the path, bytes or ModelProto ``plan`` was made from) to ``path``
    with each kernel group of ``plan`` as a local ONNX function (domain fusionlang.fused,
    named group_<id>_<category>, its doc string naming the .fuse lines that formed it),
    for Netron or onnxruntime. The functions hold the model's own nodes: one opened into
    several groups is kept whole in one of them. Returns a ``FusedOnnx`` (``model``,
    ``functions``: name -> group ids, ``notes`` on groups whose function differs from the
    plan). ModelError if the plan is not from this model, InputError if ``path`` cannot
    be written."""
    from fusionlang.export import save_fused_onnx as _save  # on use: onnx's import cost (see from_onnx)

    return _save(model, plan, path)


def compile_model(graph: Graph, rules=None, strategy: str | None = None, *, target: str = "c", **options):
    """fuse() then compile(): the whole pipeline for one graph, for ``target`` (``rules``
    default: ``default_rules(target, strategy)``)."""
    return compile(fuse(graph, rules, strategy, target=target), target, **options)
