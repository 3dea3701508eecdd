"""Running the `test` blocks of rule files (the language's own check, like egglog's).

Each block's graph is built, rewritten with the whole rule set, and every `expect` is
evaluated: rewrite counts and ops of the rewritten graph, numeric equivalence with the
stated graph (reference interpreter, seeded inputs), categories, and grouping in the
fusion plan of the block's strategy (the plan is made only when a block asks about
grouping). It sits in ``testing``, above the engine, because it drives the rewriter and
the partitioner; it needs no hypothesis (``fusionlang lint`` runs it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath
from typing import cast

import numpy as np

from fusionlang.engine.partition import partition
from fusionlang.engine.rewrite import apply_rules
from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph
from fusionlang.lang import ast as A
from fusionlang.lang import load_rules
from fusionlang.lang.diagnostics import Diagnostic, Span
from fusionlang.lang.guards import Bindings, Context, GuardError, apply_binop, apply_compare, evaluate
from fusionlang.lang.instantiate import InstantiateError
from fusionlang.lang.printer import format_expr
from fusionlang.lang.ruleset import RuleSet, TestBlock
from fusionlang.lang.testgraph import build_test_graph, seed_of
from fusionlang.lang.vocab import EXPECT_FUNCTIONS, EXPECT_NAMES
from fusionlang.ops.interpreter import run

RTOL, ATOL = 1e-4, 1e-5


@dataclass(frozen=True)
class TestResult:
    """One `test` block's outcome: ``passed``, or the failing expectation's ``message``
    at its ``span`` (the block's span when it passed or failed to build)."""

    __test__ = False  # not a pytest test class, whatever its name

    name: str
    passed: bool
    message: str
    span: Span

    @property
    def qualified(self) -> str:
        """``file.fuse::name``: a test of a policy and one of a file importing it may share a name."""
        return qualified_test_name(self.span.file, self.name)

    def __str__(self) -> str:
        return f"{self.span}: test {self.qualified}: " + ("ok" if self.passed else f"FAILED: {self.message}")


def qualified_test_name(file: str, name: str) -> str:
    """A test's name namespaced by the file that declares it (``apollo.fuse::name``)."""
    return f"{PurePath(file).name}::{name}"


def run_test_blocks(ruleset, *, names=None) -> list[TestResult]:
    """Run the `test` blocks of ``ruleset`` (a RuleSet, a library name or a .fuse path),
    or only those called one of ``names``."""
    ruleset = load_rules(ruleset)
    # a block's graph may compute log(0) = -inf on purpose (a mask): IEEE arithmetic is the
    # semantics, and NumPy's warnings about it were noise on the stderr of `lint`
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        return [run_block(ruleset, block) for block in ruleset.tests if names is None or block.name in names]


def failed_test_diagnostics(ruleset) -> tuple[int, list[Diagnostic]]:
    """Run the rule set's `test` blocks (those of the files it imports too: a rule may
    break them); returns how many ran, and an error at the failing expectation's
    file:line:col for each block that failed (what `fusionlang lint` reports)."""
    results = run_test_blocks(ruleset)
    return len(results), [Diagnostic(r.span, "error", f"test {r.qualified} failed: {r.message}")
                          for r in results if not r.passed]


def run_block(ruleset: RuleSet, block: TestBlock) -> TestResult:
    try:
        graph = build_test_graph(block.decl, ruleset.registry)
        result = apply_rules(graph, ruleset)
    except InstantiateError as exc:
        return TestResult(block.name, False, exc.message, exc.span or block.span)
    except FuseError as exc:
        return TestResult(block.name, False, str(exc), block.span)
    checker = _Expectations(ruleset, block, graph, result)
    for stmt in block.decl.stmts:
        if not isinstance(stmt, A.TExpect):
            continue
        try:
            value = checker.value(stmt.expr)
        except (GuardError, FuseError) as exc:
            return TestResult(block.name, False, f"expect {format_expr(stmt.expr)}: {getattr(exc, 'message', exc)}",
                              stmt.span)
        if value is not True:
            return TestResult(block.name, False, f"expect {format_expr(stmt.expr)} failed: "
                                                 f"{checker.explain(stmt.expr)}", stmt.span)
    return TestResult(block.name, True, "", block.span)


class _Expectations:
    def __init__(self, ruleset: RuleSet, block: TestBlock, graph: Graph, result):
        self.ruleset = ruleset
        self.block = block
        self.original = graph
        self.result = result
        self.graph = result.graph
        self._plan = None

    # ----- facts ----------------------------------------------------------------------
    def plan(self):
        if self._plan is None:
            strategy = self.block.decl.strategy.text if self.block.decl.strategy is not None else None
            self._plan = partition(self.graph, self.ruleset, strategy)
        return self._plan

    def equivalent(self) -> bool:
        rng = np.random.default_rng(seed_of(self.block.name) + 1)
        feeds = {}
        for name in self.original.inputs:
            t = self.original.types[name]
            if t.dtype == "bool":
                feeds[name] = rng.random(t.shape) < 0.5
            elif np.dtype(t.dtype).kind in "iu":
                feeds[name] = rng.integers(0, 4, size=t.shape).astype(t.dtype)
            else:
                feeds[name] = rng.standard_normal(t.shape).astype(t.dtype)
        want = run(self.original, feeds, self.ruleset.registry)
        got = run(self.graph, feeds, self.ruleset.registry)
        self._mismatch = ""
        for name, expected in want.items():
            actual = got[name]
            if actual.shape != expected.shape or actual.dtype != expected.dtype:
                self._mismatch = f"output {name!r} is {actual.dtype}{list(actual.shape)}, expected " \
                                 f"{expected.dtype}{list(expected.shape)}"
                return False
            if expected.dtype.kind == "f":
                ok = np.allclose(actual, expected, rtol=RTOL, atol=ATOL, equal_nan=True)
            else:
                ok = np.array_equal(actual, expected)
            if not ok:
                worst = float(np.nanmax(np.abs(actual.astype(np.float64) - expected.astype(np.float64))))
                self._mismatch = f"output {name!r} differs by up to {worst:.3g}"
                return False
        return True

    def _group_of(self, value: str, arg) -> int:
        plan = self.plan()
        owner = plan.group_of()
        producer = self.graph.index.producers.get(value)
        if producer is None:
            raise GuardError(f"{value!r} is not computed by any node of the rewritten graph", arg.span)
        return owner[producer.name]

    def _value_name(self, arg) -> str:
        if not isinstance(arg, A.Var) or arg.name not in self.graph.types and arg.name not in self.original.types:
            raise GuardError(f"{format_expr(arg)} is not a value of the test graph", getattr(arg, "span", None))
        return arg.name

    # ----- evaluation -----------------------------------------------------------------
    def value(self, e):
        if isinstance(e, A.Var) and e.name in EXPECT_NAMES:
            if e.name == "equivalent":
                return self.equivalent()
            if e.name == "nodes":
                return len(self.graph.nodes)
            if e.name in ("kernels", "launches"):  # kernels: launches, as documented
                return self.plan().launches
            return len(self.plan().groups)
        if isinstance(e, A.Call) and e.func.text in EXPECT_FUNCTIONS:
            return self._call(e)
        if isinstance(e, A.Compare):
            symbolic = self._symbol_side(e)
            if symbolic is not None:
                call, symbol = symbolic
                equal = self._call(call) == symbol
                if e.op in ("==", "!="):
                    return equal if e.op == "==" else not equal
                return apply_compare(e, self._call(call), symbol)
            return apply_compare(e, self.value(e.left), self.value(e.right))
        if isinstance(e, A.BoolOp):
            if e.op == "and":
                return all(self.value(i) is True for i in e.items)
            return any(self.value(i) is True for i in e.items)
        if isinstance(e, A.Not):
            return not self.value(e.operand)
        if isinstance(e, A.BinOp):
            return apply_binop(e, self.value(e.left), self.value(e.right))
        if isinstance(e, A.Neg):
            return -self.value(e.operand)
        # everything else (numbers, lists, rank(y), const(y)...) reads the rewritten graph
        names = {v: v for v in self.graph.types}
        return evaluate(e, Context(self.graph, Bindings(names)))

    def _symbol_side(self, e: A.Compare):
        for call, other in ((e.left, e.right), (e.right, e.left)):
            if isinstance(call, A.Call) and call.func.text in ("category", "op") and isinstance(other, A.Var):
                return call, other.name
        return None

    def _call(self, e: A.Call):
        name = e.func.text
        args = e.args
        if name == "fired":
            return self.result.fired.get(cast(A.Var, args[0]).name, 0)
        if name == "count":
            return sum(1 for n in self.graph.nodes if n.op == cast(A.Var, args[0]).name)
        if name == "op":
            value = self._value_name(args[0])
            producer = self.graph.index.producers.get(value)
            if producer is not None:
                return producer.op
            return "constant" if value in self.graph.constants else "input"
        if name == "category":
            value = self._value_name(args[0])
            producer = self.original.index.producers.get(value)
            if producer is None:
                raise GuardError(f"{value!r} is not computed by a node of the test graph", args[0].span)
            return self.ruleset.category_of_node(self.original, producer)
        if name == "grouped":
            groups = {self._group_of(self._value_name(a), a) for a in args}
            return len(groups) == 1
        if name == "separate":
            groups = [self._group_of(self._value_name(a), a) for a in args]
            return len(set(groups)) == len(groups)
        if name == "stitched":
            value = self._value_name(args[0])
            return any(v == value for _, v in self.plan().stitches)
        raise GuardError(f"unknown expectation {name!r}", e.func.span)

    def explain(self, e) -> str:
        if isinstance(e, A.Var) and e.name == "equivalent":
            return getattr(self, "_mismatch", "") or "outputs differ"
        if isinstance(e, A.BoolOp) and e.op == "and":
            for item in e.items:
                if self.value(item) is not True:
                    return f"{format_expr(item)}: {self.explain(item)}"
        if isinstance(e, A.Compare):
            symbolic = self._symbol_side(e)
            if symbolic is not None:
                return f"{format_expr(symbolic[0])} is {self._call(symbolic[0])}"
            parts = []
            for side in (e.left, e.right):
                if not isinstance(side, (A.Num, A.Str)):
                    parts.append(f"{format_expr(side)} is {self.value(side)!r}")
            return ", ".join(parts) or "false"
        if isinstance(e, A.Call) and e.func.text in ("grouped", "separate", "stitched"):
            plan = self.plan()
            owner = plan.group_of()
            where = []
            for a in e.args:
                producer = self.graph.index.producers.get(cast(A.Var, a).name)
                if producer is not None:
                    where.append(f"{cast(A.Var, a).name} in group {owner[producer.name]}")
            return ", ".join(where)
        return "it is false"
