"""PyTorch's front doors: ``torch.compile(model, backend="fusionlang")`` and ``from_torch``.

The backend runs AOTAutograd with the core-ATen decompositions, so it sees functional
ATen graphs (the forward, and a backward when one is needed). A capability partitioner
cuts each graph into the pieces ``frontend.torch_fx`` converts, which fusionlang fuses and
compiles (C target), and the ops it refuses, which stay in eager between them; the
``import`` logger names every op that fell back and why. Each fused piece is compiled per
concrete input shapes on its first call (FakeTensor example inputs and symbolic sizes
carry none), and keeps a bounded cache of them, as ``Specializer`` does. Tensors cross to
fusionlang as numpy arrays without a copy where they are contiguous, and back through
``torch.from_numpy``.

torch is imported on use only: ``import fusionlang`` must not pay for it, and torch is an
optional extra (``pip install 'fusionlang[torch]'``).
"""

from __future__ import annotations

import functools
import os
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from fusionlang.api import compile_model, default_rules, load_rules
from fusionlang.errors import FuseError, InputError
from fusionlang.frontend.torch_export import as_numpy, input_spec
from fusionlang.frontend.torch_fx import GETITEM, InputSpec, fx_refusal, import_fx
from fusionlang.frontend.torch_ops import SYMBOLIC, target_name
from fusionlang.instrument import logger
from fusionlang.stages import IMPORT

OPTIONS = ("rules", "strategy", "threads")
STRATEGIES = ("apollo", "tvm", "dp")
#: compiled shapes each fused piece keeps (least recently used dropped first)
CACHE_CAPACITY = 8


@dataclass(frozen=True)
class Settings:
    """The backend's options: rule set (name, path or RuleSet), strategy, C threads."""

    rules: Any = "apollo_patterns"
    strategy: str | None = None
    threads: int | None = None


def settings_from(options: Mapping[str, Any] | None) -> Settings:
    """``options`` checked; InputError in one line for an unknown key or a bad value."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InputError(f"torch.compile(backend='fusionlang'): unknown option {unknown[0]!r} "
                         f"(options: {', '.join(OPTIONS)})")
    strategy, threads = options.get("strategy"), options.get("threads")
    if strategy is not None and strategy not in STRATEGIES:
        raise InputError(f"torch.compile(backend='fusionlang'): strategy {strategy!r} is not one of "
                         f"{', '.join(STRATEGIES)}")
    if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
        raise InputError(f"torch.compile(backend='fusionlang'): threads must be a positive int, got {threads!r}")
    # no rule set named: the C target's default, as fusionlang.fuse takes it (attention
    # blocks one group each, run as one kernel where the backend's feedback accepts them)
    return Settings(_rules(options.get("rules", default_rules("c", strategy))), strategy, threads)


def _rules(rules):
    """The rule set, loaded now: a bad name or file is an error at compile time, not a
    fallback to eager at the first call."""
    if not isinstance(rules, (str, os.PathLike)):
        return rules
    try:
        return load_rules(rules)
    except FuseError as exc:
        raise InputError(f"torch.compile(backend='fusionlang'): rules {str(rules)!r}: {exc}") from None


@dataclass(frozen=True)
class Fallback:
    """One ATen node left to eager, and why."""

    node: str
    op: str
    reason: str


@dataclass
class CompileReport:
    """What the backend did with the graphs it was given: fused pieces and fallbacks."""

    graphs: int = 0
    #: ATen nodes converted into fused pieces, and the pieces
    converted: int = 0
    pieces: list = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)

    def explain(self) -> str:
        """A few lines: the counts, then each op type that fell back, with its reason."""
        lines = [f"{self.graphs} graphs: {self.converted} ATen ops in {len(self.pieces)} fusionlang pieces, "
                 f"{len(self.fallbacks)} in eager"]
        counts = Counter(f.op for f in self.fallbacks)
        for op, count in counts.items():
            first = next(f for f in self.fallbacks if f.op == op)
            lines.append(f"  {op}: {count} node(s), first {first.node!r}: {first.reason}")
        return "\n".join(lines)

    @property
    def eager_runs(self) -> int:
        """Specializations of fused pieces that fusionlang failed to compile (run in eager)."""
        return sum(piece.eager_runs for piece in self.pieces)


def fusionlang_backend(gm, example_inputs, options: Mapping[str, Any] | None = None,
                       report: CompileReport | None = None):
    """The ``torch.compile`` backend (registered as "fusionlang"): ``options`` are
    ``rules``, ``strategy`` and ``threads``; ``report`` collects what was fused and what
    fell back."""
    from torch._dynamo.backends.common import aot_autograd

    from torch._decomp import core_aten_decompositions
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    settings = settings_from(options)
    report = report if report is not None else CompileReport()

    def backend(frozen: Mapping[int, Any]):
        compiler = functools.partial(compile_aten, settings=settings, report=report, frozen=frozen)
        # Inductor's partitioner: the backward recomputes cheap values (a weight's transpose, a
        # mask) instead of the forward saving them; with the default one the forward wrote
        # W^T for the backward (LM heads: 8 MB a step). One training step, 9 interleaved
        # rounds, ms default -> min-cut: bert 88.0 -> 77.0, llama 89.6 -> 86.0, resnet18
        # 112.9 -> 112.2, mobilenet_v2 91.8 -> 94.9
        return aot_autograd(fw_compiler=compiler, bw_compiler=compiler, decompositions=core_aten_decompositions(),
                            partition_fn=min_cut_rematerialization_partition)

    if _trains(gm, example_inputs):
        _attention_as_math(gm)
        return backend({})(gm, example_inputs)
    return FrozenWeights(gm, example_inputs, backend)


class FrozenWeights:
    """An inference graph compiled with the parameters and buffers dynamo lifted as inputs
    bound as constants (Inductor's freezing): fusionlang folds them (a batch norm into its
    convolution) and lays them out once, not per call.

    dynamo does not guard on their values, so each call checks that every frozen tensor is
    the one given and unchanged since (its version counter): on the first call where one
    is not (an optimizer step, an in-place update, a swapped parameter) the graph is
    compiled again with them as inputs, logged; a weight update is never silently ignored."""

    def __init__(self, gm, example_inputs, backend):
        self.gm = gm
        self.backend = backend
        placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
        self.frozen = {k: (tensor, tensor._version) for k, (node, tensor) in enumerate(zip(placeholders, example_inputs))
                       if _static_weight(node, tensor)}
        self.compiled = backend({k: tensor for k, (tensor, _) in self.frozen.items()})(gm, example_inputs)

    def __call__(self, *args):
        if self.frozen and not self.unchanged(args):
            logger(IMPORT).info("torch: parameters or buffers changed since they were frozen as constants: "
                                "the graph is compiled again with them as inputs")
            self.frozen = {}
            self.compiled = self.backend({})(self.gm, list(args))
        return self.compiled(*args)

    def unchanged(self, args) -> bool:
        return all(args[k] is tensor and tensor._version == version for k, (tensor, version) in self.frozen.items())


def _static_weight(node, value) -> bool:
    """Whether dynamo lifted this input from a module's parameters or buffers."""
    return hasattr(value, "_version") and "_dynamo_static_input_type" in node.meta.get("tensor_dict", {})


def _attention_as_math(gm) -> None:
    """Each scaled_dot_product_attention call of a graph that trains replaced by its math
    (matmuls, mask, softmax), so autograd differentiates those and the backward graph is
    ops fusionlang converts. (torch 2.13 would run CPU flash attention's backward kernel,
    which reads its decomposed forward's saved values wrongly: q, k and v gradients off by
    1e-1.) A call with dropout or grouped query heads is left as it is."""
    import torch.nn.functional as F

    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is F.scaled_dot_product_attention and _plain_attention(node):
            node.target = attention_math
    gm.recompile()


def _plain_attention(node) -> bool:
    dropout = node.args[4] if len(node.args) > 4 else node.kwargs.get("dropout_p", 0.0)
    return dropout == 0.0 and not node.kwargs.get("enable_gqa", False)


def attention_math(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """scaled_dot_product_attention without dropout, as torch's math reference computes it."""
    import math

    import torch

    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q * scale) @ k.transpose(-2, -1)
    if is_causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:
        scores = scores + attn_mask
    return torch.softmax(scores, -1) @ v


def _trains(gm, example_inputs) -> bool:
    """Whether AOTAutograd will make a backward graph: gradients on and something needs one."""
    import torch

    tensors = [*example_inputs, *gm.parameters()]
    return torch.is_grad_enabled() and any(getattr(t, "requires_grad", False) for t in tensors)


def explain(model, *args, options: Mapping[str, Any] | None = None) -> CompileReport:
    """Compile ``model`` with the backend, run it once on ``args`` (without gradients) and
    return what was fused and what fell back to eager; ``.explain()`` prints it."""
    import torch

    report = CompileReport()
    compiled = torch.compile(model, backend=functools.partial(fusionlang_backend, options=options, report=report))
    with torch.no_grad():
        compiled(*args)
    return report


def compile_aten(gm, example_inputs, *, settings: Settings, report: CompileReport,
                 frozen: Mapping[int, Any] | None = None):
    """An ATen graph with every piece fusionlang converts replaced by a FusedPiece (the
    forward or backward graph AOTAutograd hands over); ``frozen`` maps the positions of
    inputs bound as constants (an inference graph's weights) to their tensors."""
    from torch._functorch.aot_autograd import make_boxed_func
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase

    class Converted(OperatorSupportBase):
        def is_node_supported(self, submodules, node) -> bool:
            return node.op == "call_function" and fx_refusal(node) is None

    fallbacks = fallbacks_of(gm)
    converted = sum(1 for node in gm.graph.nodes if node.op == "call_function"
                    and target_name(node.target) != GETITEM and fx_refusal(node) is None)
    partitioner = CapabilityBasedPartitioner(gm, Converted(), allows_single_node_partition=True)
    partitioned = partitioner.fuse_partitions(partitioner.propose_partitions())
    pieces = [FusedPiece(name, module, settings) for name, module in list(partitioned.named_children())
              if name.startswith("fused_")]
    for piece in pieces:
        delattr(partitioned, piece.name)
        setattr(partitioned, piece.name, piece)  # a plain callable: the generated forward calls it
    _bind_frozen(partitioned, {piece.name: piece for piece in pieces}, _frozen_placeholders(gm, example_inputs, frozen))
    report.graphs += 1
    report.converted += converted
    report.pieces.extend(pieces)
    report.fallbacks.extend(fallbacks)
    _log(converted, pieces, fallbacks)
    return make_boxed_func(partitioned)  # AOTAutograd's calling convention: one list of arguments


def _frozen_placeholders(gm, example_inputs, frozen: Mapping[int, Any] | None) -> dict:
    """Placeholder node -> the tensor it is frozen to. AOTAutograd hands an inference
    graph dynamo's inputs in dynamo's order; where the count or a shape differs (inputs
    deduplicated), nothing is frozen."""
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    if not frozen or len(placeholders) != len(example_inputs):
        return {}
    if any(tuple(frozen[k].shape) != tuple(example_inputs[k].shape) for k in frozen):
        return {}
    return {placeholders[k]: tensor for k, tensor in frozen.items()}


def _bind_frozen(partitioned, pieces: dict, frozen: dict) -> None:
    """Each piece's arguments that are frozen placeholders taken out of its call and
    given to it as constants."""
    if not frozen:
        return
    for node in partitioned.graph.nodes:
        piece = pieces.get(node.target) if node.op == "call_module" else None
        if piece is None:
            continue
        inner = [n for n in piece.module.graph.nodes if n.op == "placeholder"]
        kept = []
        for placeholder, arg in zip(inner, node.args):
            if arg in frozen:
                piece.constants[placeholder.name] = frozen[arg]  # read at the first call, outside fake mode
            else:
                kept.append(arg)
        node.args = tuple(kept)
    partitioned.recompile()


def fallbacks_of(gm) -> list[Fallback]:
    """The kernels of ``gm`` that stay in eager (shape arithmetic and result picks aside)."""
    out = []
    for node in gm.graph.nodes:
        name = target_name(node.target) if node.op == "call_function" else ""
        if node.op == "call_function" and name not in SYMBOLIC and name != GETITEM:
            reason = fx_refusal(node)
            if reason is not None:
                out.append(Fallback(node.name, name, reason))
    return out


def _log(converted: int, pieces: list, fallbacks: list[Fallback]) -> None:
    log = logger(IMPORT)
    log.info("torch: %d ATen ops -> %d fusionlang pieces, %d ops in eager", converted, len(pieces), len(fallbacks))
    for fallback in fallbacks:
        log.info("torch: %s (node %r) runs in eager: %s", fallback.op, fallback.node, fallback.reason)


class FusedPiece:
    """One partition of an ATen graph, compiled by fusionlang per concrete input shapes.

    A specialization fusionlang fails to import or compile runs the partition in eager
    (logged once per shape): the model still runs as it does without the backend."""

    def __init__(self, name: str, module, settings: Settings):
        self.name = name
        self.module = module
        self.settings = settings
        #: placeholder name -> tensor, the inputs bound as constants (frozen weights)
        self.constants: dict[str, Any] = {}
        self._cache: OrderedDict[tuple, Any] = OrderedDict()
        output = next(node for node in module.graph.nodes if node.op == "output")
        self.returns_tuple = isinstance(output.args[0], (list, tuple))
        self.specializations = 0
        self.eager_runs = 0
        import torch

        self._tensor = torch.Tensor

    def __call__(self, *args):
        key = tuple((a.shape, a.dtype) if isinstance(a, self._tensor) else a for a in args)
        compiled = self._cache.get(key, _MISSING)
        if compiled is _MISSING:
            compiled = self._cache[key] = self._specialize(args)
            while len(self._cache) > CACHE_CAPACITY:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return self._eager(args) if compiled is None else self._run(compiled, args)

    def _eager(self, args):
        """The partition run by torch, its frozen weights put back among the arguments."""
        if not self.constants:
            return self.module(*args)
        free = iter(args)
        placeholders = [node.name for node in self.module.graph.nodes if node.op == "placeholder"]
        return self.module(*(self.constants[name] if name in self.constants else next(free) for name in placeholders))

    def _specialize(self, args):
        specs = [input_spec(a) for a in args]
        try:
            constants = {name: as_numpy(tensor) for name, tensor in self.constants.items()}
            graph = import_fx(self.module, specs, constants, name=self.name)
            # PyTorch's ops run between ours on its libgomp threads: ours share them (a
            # second pool would spin against them: backend.thread_pool)
            compiled = compile_model(graph, self.settings.rules, self.settings.strategy, target="c",
                                     threads=self.settings.threads, share_libgomp=True)
        except FuseError as exc:
            self.eager_runs += 1
            logger(IMPORT).warning("torch: %s runs in eager for shapes %s: %s", self.name,
                                   [s.shape if isinstance(s, InputSpec) else s for s in specs], exc)
            return None
        self.specializations += 1
        return Specialization(compiled)

    def _run(self, specialization: "Specialization", args):
        import torch

        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        # the cache key matched shapes and dtypes: the feeds need no check, only contiguity
        results = specialization.compiled.run_checked(dict(zip(specialization.inputs, map(as_numpy, tensors))))
        outputs = tuple(torch.from_numpy(results[name]) for name in specialization.outputs)
        return outputs if self.returns_tuple else outputs[0]


_MISSING = object()


class Specialization:
    """One compiled shape of a FusedPiece, with its input and output names read once."""

    def __init__(self, compiled):
        self.compiled = compiled
        self.inputs = tuple(compiled.graph.inputs)
        self.outputs = tuple(compiled.graph.outputs)


__all__ = ["CompileReport", "Fallback", "FrozenWeights", "FusedPiece", "Settings", "explain", "fusionlang_backend", "settings_from"]
