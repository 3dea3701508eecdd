"""Helpers shared by the command modules: progress on a terminal, loading models and
rules, comparing results (the output modes and exit codes are :mod:`fusionlang.cli.modes`).

The compiler's libraries (onnx, lark, sympy, islpy) are imported in the functions that
use them, so a command that needs none of them (`fusionlang run ARTIFACT`) loads none.

Progress bars go to stderr, only when stderr is a terminal and neither ``--quiet`` nor
``--json`` is given, so scripts and pipes never see them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import re
import sys
import time

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from fusionlang.cli.flags import strategy_option, threads
from fusionlang.cli.paths import readable_file
from fusionlang.cli.modes import is_quiet, use_color, wants_json
from fusionlang.errors import FuseError, InputError, RuntimeInputError


#: the largest dimension --input-shape takes (a signed 64-bit index)
MAX_DIM = 2**63 - 1


class Stages:
    """Named stages of a command, timed; shown as rich progress on a terminal.

        with Stages(args) as stages:
            with stages.step("import"):
                graph = load_graph(...)
            with stages.step("lint", total=len(files)) as tick:
                for f in files: ...; tick()

    ``timings`` keeps seconds per stage (commands report them in --json). Each finished
    stage leaves one line on the terminal; nothing is printed off a terminal, under
    --quiet or under --json.
    """

    def __init__(self, args, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() and not is_quiet(args) and not wants_json(args)
        self.color = use_color(args, self.stream)
        self.timings: dict[str, float] = {}
        self._progress = None

    def __enter__(self):
        if self.enabled:

            class Count(ProgressColumn):
                """"3/12" for stages that know their size, nothing for the others."""

                def render(self, task):
                    if task.total is None:
                        return Text("")
                    return Text(f"{int(task.completed)}/{int(task.total)}", style="progress.download")

            out = Console(file=self.stream, markup=False, highlight=False,
                          color_system="auto" if self.color else None)
            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), Count(),
                                      TimeElapsedColumn(), console=out, transient=True)
            self._progress.start()
        return self

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        return False

    @contextlib.contextmanager
    def step(self, description: str, total: int | None = None):
        """Time one stage; yields a function that advances its bar by one."""
        started = time.perf_counter()
        task = None
        if self._progress is not None:
            task = self._progress.add_task(description, total=total)

        def tick(n: int = 1) -> None:
            if task is not None:
                self._progress.advance(task, n)

        finished = False
        try:
            yield tick
            finished = True
        finally:
            elapsed = time.perf_counter() - started
            self.timings[description] = self.timings.get(description, 0.0) + elapsed
            if task is not None:
                self._progress.remove_task(task)

                done = Text("✓ ", style="green") if finished else Text("✗ ", style="red")
                done.append(description)
                done.append(f"  {elapsed:.2f} s", style="dim")
                self._progress.console.print(done)


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """The model and the policy it is fused with: shared by fuse, run and explain."""
    p.add_argument("model", help="an ONNX model file")
    p.add_argument("--input-shape", action="append", metavar="NAME=DxD..",
                   help="static shape for an input with symbolic dims (repeatable; run also takes it from --input)")
    p.add_argument("--rules", default=None, help="rule set: apollo, apollo_patterns, xla, tvm, dnnfusion or a .fuse "
                   "file (default: apollo_patterns for the C target under the apollo strategy, else apollo)")
    p.add_argument("--strategy", choices=["apollo", "tvm", "dp"], default=None,
                   help="partitioner (default: the rule set's own strategy)")
    p.add_argument("--option", action="append", type=strategy_option, metavar="KEY=VALUE",
                   help="strategy option, over the rule file's strategy block (repeatable), e.g. max_ops=32")


def add_build_arguments(p: argparse.ArgumentParser) -> None:
    """How the C target compiles: shared by run and compile."""
    p.add_argument("--threads", type=threads, default=1, metavar="N",
                   help="run the compiled C on N threads (default 1; results do not depend on N)")
    p.add_argument("--unchecked-indices", action="store_true",
                   help="drop the range check of gathered indices (only for indices known to be in range)")


def compile_graph(args, graph, stages, target: str, **options):
    """(plan, compiled graph): ``graph`` fused as ``args`` say (--rules, --strategy,
    --option) and compiled for ``target`` (with --threads and --unchecked-indices, and
    ``options``), each step shown."""
    from fusionlang.api import compile as compile_plan
    from fusionlang.api import fuse
    from fusionlang.ir.memory import check_tensor_sizes

    with stages.step("rewrite + partition"):
        plan = fuse(graph, args.rules, args.strategy, options=strategy_overrides(args), target=target)
    check_tensor_sizes(plan.graph)  # rewriting may have made new tensors
    if target == "c":
        options["threads"] = args.threads
    with stages.step(f"codegen + compile ({target})"):
        compiled = compile_plan(plan, target, check_indices=not args.unchecked_indices, **options)
    return plan, compiled


def rules_named(args, target: str = "c") -> str:
    """The ``--rules`` flag, else the rule set ``target`` compiles with by default."""
    from fusionlang.api import default_rules

    return args.rules or default_rules(target, args.strategy)


def strategy_overrides(args) -> dict | None:
    """The ``--option KEY=VALUE`` flags as an options dict (a later KEY wins), or None."""
    return dict(args.option) if getattr(args, "option", None) else None


def fuse_model(args, stages):
    """(graph, rule set, plan) for ``args.model`` fused with ``args.rules``, each step shown."""
    from fusionlang.api import fuse

    with stages.step("import"):
        graph = load_graph(args.model, parse_shapes(args.input_shape))
    with stages.step("load rules"):
        ruleset = load_rules(rules_named(args))
    with stages.step("rewrite + partition"):
        plan = fuse(graph, ruleset, args.strategy, options=strategy_overrides(args))
    return graph, ruleset, plan


def parse_shapes(items: list[str] | None) -> dict[str, tuple[int, ...]] | None:
    if not items:
        return None
    shapes = {}
    for item in items:
        name, sep, dims = item.rpartition("=")
        if not sep or not name or not re.fullmatch(r"[0-9]+(x[0-9]+)*", dims):
            raise InputError(f"--input-shape {item!r}: expected NAME=DIMxDIM..., e.g. x=1x3x224x224")
        shape = tuple(int(d) if len(d) <= 18 else MAX_DIM + 1 for d in dims.split("x"))
        if max(shape) > MAX_DIM:  # 19 digits and more: past any index type (and int()'s digit limit)
            raise InputError(f"--input-shape {item!r}: a dimension is larger than {MAX_DIM}")
        shapes[name] = shape
    return shapes


def load_graph(path: str, shapes=None):
    from fusionlang.frontend import from_onnx

    # a directory, fifo or device is refused before ONNX reads it (a fifo would block)
    return from_onnx(readable_file(path, "model"), input_shapes=shapes)


def load_graph_for_feeds(path: str, shapes, feeds) -> tuple:
    """(graph, inputs whose shapes were taken, inputs bound as constants): the model
    specialized on the ``--input`` arrays where it needs run-time shapes (symbolic dims)
    or values (axes, pads...)."""
    try:
        return load_graph(path, shapes), set(), set()
    except RuntimeInputError:
        if not feeds:
            raise
    from fusionlang.specialize import specialized_graph

    return specialized_graph(path, feeds, shapes)


def load_rules(name_or_path: str):
    from fusionlang.lang import load_rules as load

    return load(name_or_path)


#: --check's default (rtol, atol) for float outputs, and for 16-bit ones: those are rounded
#: to 16 bits after every op (one unit in the last place: 2**-10 for float16, 2**-7 for
#: bfloat16), and a fused kernel may round a decomposed op's steps where the reference rounds
#: the op once
CHECK_TOLERANCE = (1e-3, 1e-4)
CHECK_TOLERANCE_16 = {"float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2)}


def compare(outputs: dict, expected: dict, rtol: float | None, atol: float | None) -> list[str]:
    """Mismatches of ``outputs`` against the reference ``expected``, one line each.

    Floats match within ``rtol`` of each element plus ``atol`` times the output's largest
    finite magnitude, so an output of tiny values is checked as closely as a large one
    (a fixed atol would pass whatever it held); integers and bools must be equal. A
    tolerance left None is the default for the output's dtype (:data:`CHECK_TOLERANCE_16`).
    """
    from fusionlang.ir.types import is_float_dtype

    problems = []
    for name, want in expected.items():
        got = outputs[name]
        if got.shape != want.shape:
            problems.append(f"{name}: shape {list(got.shape)} != reference {list(want.shape)}")
            continue
        if want.dtype.kind not in "fc" and not is_float_dtype(want.dtype):
            wrong = np.count_nonzero(got != want)
            if wrong:
                problems.append(f"{name}: {wrong} of {want.size} values differ from the reference")
            continue
        default_rtol, default_atol = CHECK_TOLERANCE_16.get(want.dtype.name, CHECK_TOLERANCE)
        r = default_rtol if rtol is None else rtol
        a = default_atol if atol is None else atol
        got, want = got.astype(np.float64), want.astype(np.float64)  # (numpy cannot compare bfloat16)
        scale = output_scale(want)
        if not np.allclose(got, want, rtol=r, atol=a * scale, equal_nan=True):
            err = np.max(np.abs(got - want))
            problems.append(f"{name}: max abs error {err:.3g} exceeds rtol={r} + atol={a} x max |reference| "
                            f"{scale:.3g}")
    return problems


def output_scale(want: np.ndarray) -> float:
    """The largest finite |value| of a reference output (1 where it has none but zeros)."""
    finite = np.abs(want[np.isfinite(want)]).astype(np.float64)
    largest = float(finite.max()) if finite.size else 0.0
    return largest if largest > 0 else 1.0


def testing_module(name: str, command: str, draws: str):
    """``fusionlang.testing.NAME``, imported when a command runs and not at the top: it
    needs hypothesis, an optional extra, and every other command runs without it."""
    try:
        return importlib.import_module(f"fusionlang.testing.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != "hypothesis":
            raise
        raise FuseError(f"fusionlang {command} draws its {draws} with hypothesis, which is not installed "
                        "(pip install hypothesis, or the package's 'test' extra)") from None
