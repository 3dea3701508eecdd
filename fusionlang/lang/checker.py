"""Semantic checks: parsed modules -> an immutable RuleSet, or diagnostics.

Checks, each reported at the span that causes it: unknown ops, categories, variables,
functions and attributes; arities; duplicate definitions; class flags; fuse entries
shadowed by earlier ones; decompositions whose result type differs from the op's;
rewrites that can loop (a rule whose replacement builds what its own pattern matches,
or a cycle of such rules) and decompositions that reopen themselves; malformed tests.
Checking goes on after an error, so one run reports everything it can.
"""

from __future__ import annotations

import itertools
from types import MappingProxyType
from typing import cast

from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph
from fusionlang.ir.types import TensorType
from fusionlang.lang import ast as A
from fusionlang.lang.diagnostics import Diagnostics, Span, suggest
from fusionlang.lang.expansion import case_size, expansion_sizes, largest_callees
from fusionlang.lang.exprcheck import ExprChecker, check_arity, check_attr_name, describe_arity
from fusionlang.lang.guards import Bindings
from fusionlang.lang.instantiate import InstantiateError, Instantiator, Scalar
from fusionlang.lang.interactions import check_interactions
from fusionlang.lang.limits import MAX_EXPANSION_NODES
from fusionlang.lang.oracles import check_oracles
from fusionlang.lang.pattern_index import PatternIndex
from fusionlang.lang.patterns import (PatternError, POp, PVar, compile_pattern, literal_value, may_match, ops_of,
                                      term_of)
from fusionlang.lang.ruleset import (ACCEPTABLE, EDGE_TENSORS, ClassRule, DecomposeRule, DefRule, FuseEntry,
                                     PatternEntry, RewriteRule, RuleSet, Strategy, TestBlock)
from fusionlang.lang.testgraph import build_test_graph
from fusionlang.lang.vocab import (CLASS_FLAGS, FORMULA_CONSTANTS, FORMULA_FUNCTIONS, FUSE_FLAGS, META,
                                   RESERVED_NAMES)
from fusionlang.ops.registry import OpDef, OpRegistry
from fusionlang.ops.interpreter import run as run_reference

#: fuse options whose values name categories
_CATEGORY_OPTIONS = ("path", "sink", "relation")

#: results of the costly checks (instantiating decompositions and test graphs) by item.
#: Parsed modules are cached and immutable, so an item checked against the same `def`s
#: gives the same diagnostics in every rule set that imports it. Values keep the item
#: and the base registry, so their ids cannot be reused while the entry lives.
_MEMO: dict[tuple, tuple[object, object, list]] = {}


def clear_memo() -> None:
    _MEMO.clear()


def check_modules(modules: list[A.Module], *, name: str, registry: OpRegistry, diags: Diagnostics,
                  imports: tuple[str, ...] = (), lowering: tuple[RuleSet, ...] = ()) -> RuleSet | None:
    """Check ``modules`` (imports first) as one rule set; None when there are errors.
    ``lowering``: the rule sets its ``import ... for lowering`` items loaded."""
    checker = _Checker(modules, registry, diags)
    checker.run()
    if diags.errors:
        return None
    _add_lowering_ops(checker.registry, lowering)
    return RuleSet(name=name, files=tuple(m.path for m in modules), categories=tuple(checker.lattice),
                   class_rules=tuple(checker.class_rules), registry=checker.registry, defs=checker.defs,
                   decompositions={op: tuple(cases) for op, cases in checker.decompositions.items()},
                   rewrites=tuple(checker.rewrites), fuse_entries=tuple(checker.fuse_entries),
                   strategies=checker.strategies, imports=imports, lowering=lowering,
                   tests=_inherited_tests(modules, checker.tests, checker.kept_whole),
                   fuse_patterns=tuple(checker.fuse_patterns))


def _add_lowering_ops(registry: OpRegistry, lowering: tuple[RuleSet, ...]) -> None:
    """Register in ``registry`` the ops the ``lowering`` rule sets define and it lacks: their
    decompositions build those ops (std/attention.fuse's ``soft_cap``) inside a graph that
    carries this rule set's registry, and that graph must still know them when compiled."""
    for ruleset in lowering:
        for name in ruleset.registry.names():
            if name not in registry:
                registry.register(ruleset.registry.get(name))


#: the items that make a file a policy of its own
_POLICY_ITEMS = (A.FuseDecl, A.NoFuseDecl, A.FusePattern, A.StrategyDecl)


def _inherited_tests(modules, tests, kept_whole: frozenset[str] = frozenset()) -> tuple[TestBlock, ...]:
    """The test blocks of the rule set: all, except those of a policy file (one with fuse or
    nofuse entries or a strategy block) that a later file extends with a policy of its
    own, and those of imported files that build an op an ``import ... without decompose``
    keeps whole. Such blocks state what the imported rule set does; they run in its own."""
    policy_files = [m.path for m in modules
                    if any(isinstance(i, _POLICY_ITEMS) for i in m.items)]
    extended = set(policy_files[:-1])
    root = modules[-1].path if modules else ""
    return tuple(t for t in tests if t.span.file not in extended
                 and (t.span.file == root or not _builds_any(t.decl, kept_whole)))


def _builds_any(test: A.TestDecl, ops: frozenset[str]) -> bool:
    return bool(ops) and any(isinstance(e, A.Call) and e.func.text in ops
                             for stmt in test.stmts if isinstance(stmt, A.Let) for e in A.walk(stmt.value))


def _extends(names: list[str], lattice: list[str]) -> bool:
    """Does the chain ``names`` hold every category of ``lattice``, in the same order?"""
    rest = iter(names)
    return len(set(names)) > len(lattice) and all(category in rest for category in lattice)


class _Deciders:
    """Unguarded entries seen so far, by kind (flags and options) and by the
    (producer, consumer) pairs they cover; deny entries decide every kind of pair look-up."""

    def __init__(self):
        self.by_kind: dict[tuple, dict[tuple, list[FuseEntry]]] = {}
        self.denied: dict[tuple, list[FuseEntry]] = {}

    def same_kind(self, entry: FuseEntry) -> dict[tuple, list[FuseEntry]]:
        if entry.deny:
            return self.denied
        return self.by_kind.setdefault((entry.flags, frozenset(entry.options.items())), {})

    def deciders(self, entry: FuseEntry, pairs) -> list[list[FuseEntry]]:
        """Per pair of ``entry``, the earlier entries that decide it before ``entry`` could."""
        same = self.same_kind(entry)
        # horizontal and sibling entries are not producer -> consumer pairs: a deny cannot decide them
        denies = not entry.deny and not entry.flags & {"horizontal", "sibling"}
        return [same.get(pair, []) + (self.denied.get(pair, []) if denies else []) for pair in pairs]

    def add(self, entry: FuseEntry, pairs) -> None:
        if entry.guard is None:
            same = self.same_kind(entry)
            for pair in pairs:
                same.setdefault(pair, []).append(entry)


def _items(modules, kind):
    for module in modules:
        for item in module.items:
            if isinstance(item, kind):
                yield item


class _Checker:
    def __init__(self, modules, base: OpRegistry, diags: Diagnostics):
        self.modules = modules
        self.base = base
        self.diags = diags
        self.registry = base.child()
        self.lattice: list[str] = []
        #: the lattice as a set, for lookups
        self.lattice_names: frozenset[str] = frozenset()
        self.defs: dict[str, DefRule] = {}
        self.class_rules: list[ClassRule] = []
        self.decompositions: dict[str, list[DecomposeRule]] = {}
        self.rewrites: list[RewriteRule] = []
        self.fuse_entries: list[FuseEntry] = []
        self.fuse_patterns: list[PatternEntry] = []
        self.kept_whole: frozenset[str] = frozenset()
        #: position of each accepted fuse entry (by id), for warnings in file order
        self._fuse_order: dict[int, int] = {}
        self.strategies: dict[str, Strategy] = {}
        self.tests: list[TestBlock] = []

    def run(self) -> None:
        self.check_categories()
        self.check_defs()
        self.check_classes()
        self.check_decompositions()
        self.check_rewrites()
        self.check_loops()
        self.check_fuse()
        self.check_fuse_patterns()
        self.check_kept_whole()
        self.check_strategies()
        self.check_tests()

    # ----- categories -----------------------------------------------------------------
    def check_categories(self) -> None:
        first = None
        for item in _items(self.modules, A.Categories):
            names = [n.text for n in item.names]
            seen = set()
            for n in item.names:
                if n.text in seen:
                    self.diags.error(n.span, f"category {n.text!r} appears twice in the lattice")
                seen.add(n.text)
            if first is None or _extends(names, self.lattice) and item.span.file != first.span.file:
                # an importing file may insert categories into the imported chain, order kept
                first = item
                self.lattice = list(dict.fromkeys(names))
                self.lattice_names = frozenset(self.lattice)
            elif names != [n.text for n in first.names]:
                self.diags.error(item.span, f"categories conflict with the lattice declared at {first.span} "
                                            f"({' < '.join(n.text for n in first.names)})",
                                 "a rule set has one lattice; a file may repeat the chain of the files it imports "
                                 "or insert categories into it, keeping their order")

    def _category(self, name: A.Name) -> bool:
        if name.text in self.lattice_names:
            return True
        if self.lattice:
            hint = suggest(name.text, self.lattice) or f"categories: {' < '.join(self.lattice)}"
        else:
            hint = "no categories are declared; add 'categories a < b < ...' or import one that does"
        self.diags.error(name.span, f"unknown category {name.text!r}", hint)
        return False

    # ----- defs -----------------------------------------------------------------------
    def check_defs(self) -> None:
        compound = []
        for d in _items(self.modules, A.DefDecl):
            name = d.name.text
            if not self._def_name_ok(d):
                continue
            attrs = self._def_attrs(d)
            if attrs is None:
                continue
            self.defs[name] = DefRule(d)
            if d.formula is not None:
                self._define_formula(d, attrs)
            else:
                compound.append((d, attrs))
        for d, attrs in compound:
            self._define_compound(d, attrs)
        for d, attrs in compound:
            ec = ExprChecker(self.diags, self.registry, tensors=[p.text for p in d.params], statics=list(attrs),
                             what=f"def {d.name.text!r}")
            self._check_body(d.body, ec, None, f"def {d.name.text!r}", d.span)
        for rule in self.defs.values():
            check_oracles(rule.decl, self.diags, self.registry, self._check_body)

    def _def_name_ok(self, d: A.DefDecl) -> bool:
        name = d.name.text
        if name in RESERVED_NAMES:
            self.diags.error(d.name.span, f"{name!r} is reserved: it would clash with generated C/CUDA code",
                             "pick another name")
            return False
        if name in self.base:
            self.diags.error(d.name.span, f"def {name!r} redefines the built-in op {name!r}", "pick another name")
            return False
        if name in self.defs:
            self.diags.error(d.name.span, f"def {name!r} is already defined at {self.defs[name].span}")
            return False
        seen = set()
        for p in d.params:
            if p.text in seen:
                self.diags.error(p.span, f"parameter {p.text!r} appears twice")
                return False
            seen.add(p.text)
        return True

    def _def_attrs(self, d: A.DefDecl) -> dict | None:
        attrs = {}
        ok = True
        params = {p.text for p in d.params}
        for a in d.attrs:
            if a.name.text in params or a.name.text in attrs:
                self.diags.error(a.name.span, f"{a.name.text!r} is already a parameter of def {d.name.text!r}")
                ok = False
                continue
            if a.default is None:
                self.diags.error(a.name.span, f"attribute {a.name.text!r} of def {d.name.text!r} needs a default",
                                 "its kind (int, float, string, list) comes from the default")
                ok = False
                continue
            try:
                from fusionlang.lang.formula import attr_of_default  # sympy: only for a def
                attrs[a.name.text] = attr_of_default(literal_value(a.default))
            except (PatternError, ValueError):
                self.diags.error(getattr(a.default, "span", a.span), "an attribute default must be a literal")
                ok = False
        return attrs if ok else None

    def _define_formula(self, d: A.DefDecl, attrs: dict) -> None:
        names = {p.text for p in d.params} | set(attrs)
        before = len(self.diags.errors)
        for e in A.walk(d.formula):
            if isinstance(e, A.Var) and e.name not in names and e.name not in FORMULA_CONSTANTS:
                self.diags.error(e.span, f"unknown name {e.name!r} in the formula of {d.name.text!r}",
                                 suggest(e.name, names) or f"parameters: {', '.join(sorted(names))}")
            elif isinstance(e, A.Call):
                fname = e.func.text
                if fname not in FORMULA_FUNCTIONS:
                    self.diags.error(e.func.span, f"unknown formula function {fname!r}",
                                     suggest(fname, FORMULA_FUNCTIONS) or
                                     "formula functions: " + ", ".join(FORMULA_FUNCTIONS))
                elif len(e.args) != FORMULA_FUNCTIONS[fname]:
                    self.diags.error(e.span, f"{fname}() takes {FORMULA_FUNCTIONS[fname]} argument"
                                             f"{'s' if FORMULA_FUNCTIONS[fname] != 1 else ''}, got {len(e.args)}")
                if e.attrs is not None:
                    self.diags.error(e.span, "formula functions take no attributes")
            elif isinstance(e, (A.Str, A.ListE, A.Index, A.Bind)):
                self.diags.error(e.span, "this form is not allowed in a formula",
                                 "formulas are scalar arithmetic, comparisons and formula functions")
        if len(self.diags.errors) > before:
            return
        from fusionlang.lang.formula import FormulaError, define_elementwise, to_sympy  # sympy: only for a def
        try:
            body = to_sympy(cast(A.Expr, d.formula), names)  # (a formula def)
        except FormulaError as exc:
            self.diags.error(exc.span or d.span, exc.message)
            return
        define_elementwise(d.name.text, [p.text for p in d.params], attrs, body, self.registry,
                           doc=f"def {d.name.text} ({d.span.file}:{d.span.line})")

    def _define_compound(self, d: A.DefDecl, attrs: dict) -> None:
        body = cast("tuple[A.Stmt, ...]", d.body)  # not a formula def: it has a body
        returns = [s for s in body if isinstance(s, A.Return)]
        n_outputs = len(returns[-1].values) if returns else 1
        params = tuple(p.text for p in d.params)
        registry = self.registry

        def instantiate(graph: Graph, in_types, attr_values):
            bindings = Bindings({p: graph.add_input(p, t) for p, t in zip(params, in_types)},
                                {k: attr_values[k] for k in attrs})
            inst = Instantiator(graph, registry, bindings)
            outs = inst.body(body)
            return [inst.materialize(v, in_types[0].dtype) for v in outs]

        #: result types by (input types, attributes): without it, inferring a def whose
        #: body uses another def twice inferred that one twice, and so on down a chain
        inferred: dict[tuple, list] = {}

        def infer(call):
            in_types = [call.input(k) for k in range(len(params))]
            try:
                key = (tuple(in_types), tuple(sorted(call.attrs.items())))
                hash(key)
            except TypeError:
                key = None
            if key is not None and key in inferred:
                return list(inferred[key])
            graph = Graph(f"def {d.name.text}")
            try:
                outs = instantiate(graph, in_types, call.attrs)
            except InstantiateError as exc:
                raise call.fail(exc.message) from None
            types = [graph.types[o] for o in outs]
            if key is not None:
                inferred[key] = types
            return list(types)

        def reference(arrays, attr_values):

            graph = Graph(f"def {d.name.text}")
            outs = instantiate(graph, [TensorType.of(a) for a in arrays], attr_values)
            graph.outputs = list(outs)
            results = run_reference(graph, dict(zip(params, arrays)), registry)
            return [results[o] for o in outs]

        self.registry.register(OpDef(name=d.name.text, inputs=params, infer=infer, reference=reference, access=None,
                                     attrs=dict(attrs), num_outputs=n_outputs, compound=True,
                                     doc=f"def {d.name.text} ({d.span.file}:{d.span.line})"))
        self.decompositions.setdefault(d.name.text, []).append(DecomposeRule(
            op=d.name.text, params=params, binds=tuple((a, a) for a in attrs), requires=(), body=body,
            span=d.span, from_def=True))

    # ----- bodies (decompositions and compound defs) ----------------------------------
    def _check_body(self, body, ec: ExprChecker, n_outputs: int | None, what: str, span) -> None:
        returned = False
        for stmt in body:
            if returned:
                self.diags.error(stmt.span, "statement after 'return' is never reached")
                break
            if isinstance(stmt, A.Return):
                returned = True
                for v in stmt.values:
                    ec.tensor(v)
                if n_outputs is not None and len(stmt.values) != n_outputs:
                    self.diags.error(stmt.span, f"{what} returns {len(stmt.values)} values; the op has "
                                                f"{n_outputs} output{'s' if n_outputs != 1 else ''}")
                continue
            for n in stmt.names:
                if n.text in ec.tensors or n.text in ec.statics:
                    self.diags.error(n.span, f"{n.text!r} is already bound", "use a new name")
            if len(stmt.names) > 1:
                if isinstance(stmt.value, A.Call) and stmt.value.func.text in self.registry:
                    ec.op_call(stmt.value, n_outputs=len(stmt.names))
                else:
                    self.diags.error(stmt.value.span if hasattr(stmt.value, "span") else stmt.span,
                                     f"{len(stmt.names)} names need an op with {len(stmt.names)} outputs")
                ec.tensors.update(n.text for n in stmt.names)
            elif ec.is_static(stmt.value):
                ec.static_types[stmt.names[0].text] = ec.static(stmt.value)
                ec.statics.add(stmt.names[0].text)
            else:
                ec.tensor(stmt.value)
                ec.tensors.add(stmt.names[0].text)
        if not returned:
            self.diags.error(span, f"{what} has no 'return'")

    # ----- classes --------------------------------------------------------------------
    def check_classes(self) -> None:
        plain: dict[str, ClassRule] = {}
        for c in _items(self.modules, A.ClassDecl):
            ok = True
            category = c.category.text if c.category is not None else None
            if category is not None and not self._category(c.category):
                ok = False
            commutative = False
            for flag in c.flags:
                if flag.text in CLASS_FLAGS:
                    commutative = True
                elif flag.text in self.lattice_names:
                    self.diags.error(flag.span, f"a class takes one category; {flag.text!r} is a second one")
                    ok = False
                else:
                    self.diags.error(flag.span, f"unknown class flag {flag.text!r}",
                                     suggest(flag.text, CLASS_FLAGS) or f"flags: {', '.join(CLASS_FLAGS)}")
                    ok = False
            if c.guard is not None and category is None:
                self.diags.error(c.span, "a class with 'when' needs a category")
                ok = False
            opdefs = []
            for op in c.ops:
                if op.text == "def":
                    continue
                opdef = self.registry.lookup(op.text)
                if opdef is None:
                    self.diags.error(op.span, f"unknown op {op.text!r}", suggest(op.text, self.registry.names()))
                    ok = False
                    continue
                opdefs.append(opdef)
                if commutative and not (opdef.variadic or opdef.max_inputs == 2):
                    self.diags.error(op.span, f"op {op.text!r} takes {describe_arity(opdef)}; only binary and "
                                              "variadic ops can be commutative")
                    ok = False
            if c.guard is not None:
                attr_names = set.intersection(*(set(o.attrs) for o in opdefs)) if opdefs else set()
                ExprChecker(self.diags, self.registry, tensors={"out"}, statics=attr_names,
                            class_context=True).guard(c.guard)
            if not ok:
                continue
            for op in c.ops:
                if op.text == "def" and commutative:
                    self.diags.error(op.span, "'def' cannot be declared commutative; name the ops")
                    continue
                rule = ClassRule(op.text, category, commutative, c.guard, c.span)
                if category is not None and c.guard is None:
                    earlier = plain.get(op.text)
                    if earlier is not None:
                        self.diags.error(op.span, f"op {op.text!r} is already classified as {earlier.category} "
                                                  f"at {earlier.span}",
                                         "to refine by node, add 'when PREDICATE' to the second class")
                        continue
                    plain[op.text] = rule
                self.class_rules.append(rule)

    # ----- decompositions -------------------------------------------------------------
    def check_decompositions(self) -> None:
        for d in _items(self.modules, A.Decompose):
            op = d.op.text
            opdef = self.registry.lookup(op)
            if opdef is None:
                self.diags.error(d.op.span, f"unknown op {op!r}",
                                 suggest(op, self.registry.names()) or
                                 "to define a new compound op write 'def NAME(args) { ... }'")
                continue
            ok = check_arity(self.diags, opdef, len(d.params), d.op.span)
            binds, requires, statics = [], [], []
            for a in d.attrs:
                if not check_attr_name(self.diags, opdef, a.name.text, a.name.span):
                    ok = False
                    continue
                statics.append(a.name.text)
                if a.default is None:
                    binds.append((a.name.text, a.name.text))
                else:
                    try:
                        requires.append((a.name.text, literal_value(a.default)))
                    except PatternError as exc:
                        self.diags.error(exc.span, "an attribute in a decompose header is a name or name=literal")
                        ok = False
            ec = ExprChecker(self.diags, self.registry, tensors=[p.text for p in d.params], statics=statics)
            before = len(self.diags.errors)
            self._check_body(d.body, ec, opdef.num_outputs, f"decomposition of {op!r}", d.span)
            if not ok or len(self.diags.errors) > before:
                continue
            rule = DecomposeRule(op=op, params=tuple(p.text for p in d.params), binds=tuple(binds),
                                 requires=tuple(requires), body=d.body, span=d.span,
                                 accepts=self._accepts(d.accepts))
            duplicate = next((r for r in self.decompositions.get(op, ())
                              if len(r.params) == len(rule.params) and dict(r.requires) == dict(rule.requires)), None)
            if duplicate is not None:
                self.diags.error(d.op.span, f"op {op!r} already has a decomposition for these inputs and attributes "
                                            f"at {duplicate.span}")
                continue
            self.decompositions.setdefault(op, []).append(rule)
            self._memoized(d, lambda: self._check_decomposition_types(rule, opdef, d))

    def _check_decomposition_types(self, rule: DecomposeRule, opdef: OpDef, d: A.Decompose) -> None:
        """Instantiate the body on sample inputs the op accepts; compare result types."""
        shapes = {"X": (2, 3, 4, 5), "C": (3,), "L": (5,)}
        n = len(rule.params)
        combos = [("X",) + (k,) * (n - 1) for k in "CLX"]
        combos += [("X",) + rest for rest in itertools.product("XCL", repeat=n - 1)]
        attrs = dict(rule.requires)
        for combo in dict.fromkeys(combos):
            in_types = [TensorType(shapes[c], "float32") for c in combo]
            try:
                want = self.registry.infer(rule.op, "probe", attrs, in_types)
                normalized = opdef.normalize_attrs(attrs, "probe")
            except FuseError:
                continue
            graph = Graph("probe")
            bindings = Bindings({p: graph.add_input(p, t) for p, t in zip(rule.params, in_types)},
                                {var: normalized[attr] for attr, var in rule.binds} | dict(rule.requires))
            inst = Instantiator(graph, self.registry, bindings)
            sample = ", ".join(f"{p}: {t}" for p, t in zip(rule.params, in_types))
            try:
                outs = inst.body(rule.body)
                outs = [inst.materialize(v, t.dtype, t.shape) if isinstance(v, Scalar) else v
                        for v, t in zip(outs, want)]
            except InstantiateError as exc:
                self.diags.error(exc.span or d.span, f"decomposition of {rule.op!r} fails: {exc.message}",
                                 f"checked with inputs {sample}")
                return
            got = [graph.types[o] for o in outs]
            if got != list(want[:len(got)]):
                self.diags.error(d.op.span, f"decomposition of {rule.op!r} computes "
                                            f"{', '.join(map(str, got))} where the op computes "
                                            f"{', '.join(map(str, want[:len(got)]))}",
                                 f"checked with inputs {sample}")
            return

    # ----- rewrites -------------------------------------------------------------------
    def check_rewrites(self) -> None:
        seen: dict[str, A.Rewrite] = {}
        for order, r in enumerate(_items(self.modules, A.Rewrite)):
            name = r.name.text
            if name in seen:
                self.diags.error(r.name.span, f"rewrite {name!r} is already defined at {seen[name].span}")
                continue
            seen[name] = r
            pattern = self._root_pattern(r.pattern, r.span, "a rewrite replaces the node its pattern's root op matches")
            if pattern is None:
                continue
            before = len(self.diags.errors)
            self._accepts(r.accepts)
            tensors, statics, rests = self._check_pattern(pattern)
            if len(self.diags.errors) > before:
                continue
            ec = ExprChecker(self.diags, self.registry, tensors=tensors, statics=statics, rests=rests)
            if r.guard is not None:
                ec.guard(r.guard)
            ec.tensor(r.replacement)
            if len(self.diags.errors) > before:
                continue
            self.rewrites.append(RewriteRule(r, order, pattern))

    def _root_pattern(self, expr: A.Expr, span: Span, hint: str) -> POp | None:
        """``expr`` compiled as a pattern that starts with an op, or None after diagnostics."""
        try:
            pattern = compile_pattern(expr)
        except PatternError as exc:
            self.diags.error(exc.span or span, exc.message, exc.hint)
            return None
        if not isinstance(pattern, POp):
            self.diags.error(getattr(expr, "span", span), "a pattern must start with an op", hint)
            return None
        return pattern

    def _accepts(self, names: tuple[A.Name, ...]) -> frozenset[str]:
        """The names of an ``accepts`` clause, each checked against :data:`ACCEPTABLE`."""
        for name in names:
            if name.text not in ACCEPTABLE:
                self.diags.error(name.span, f"a rule cannot accept {name.text!r}",
                                 f"it may accept: {', '.join(ACCEPTABLE)}")
        return frozenset(n.text for n in names if n.text in ACCEPTABLE)

    def _check_pattern(self, pattern: POp):
        tensors: dict[str, Span] = {}
        statics: dict[str, Span] = {}
        rests: dict[str, Span] = {}
        for p in ops_of(pattern):
            opdef = self.registry.lookup(p.op)
            if opdef is None:
                self.diags.error(p.op_span, f"unknown op {p.op!r}", suggest(p.op, self.registry.names()))
                continue
            check_arity(self.diags, opdef, len(p.operands), p.span)
            for attr in p.attrs:
                if check_attr_name(self.diags, opdef, attr.name, attr.span) and attr.kind == "var":
                    statics.setdefault(attr.value, attr.span)
            if p.rest is not None:
                if p.rest in rests:
                    self.diags.error(p.span, f"'..{p.rest}' is bound twice")
                rests[p.rest] = p.span
            if p.bind is not None:
                if p.bind in tensors:
                    self.diags.error(p.span, f"{p.bind!r} names two parts of the pattern")
                tensors[p.bind] = p.span
            for operand in p.operands:
                if isinstance(operand, PVar) and not operand.anonymous:
                    tensors.setdefault(operand.name, operand.span)
        for name, span in statics.items():
            if name in tensors:
                self.diags.error(span, f"variable {name!r} is bound both as a tensor and as an attribute")
        return set(tensors), set(statics), set(rests)

    # ----- loops ----------------------------------------------------------------------
    def check_loops(self) -> None:
        if not self.rewrites and not self.decompositions:
            return  # nothing can loop; and networkx is left unimported (`lint` of a small file)
        import networkx as nx
        commutative = {r.op for r in self.class_rules if r.commutative}

        def is_comm(op: str) -> bool:
            opdef = self.registry.lookup(op)
            return op in commutative or (opdef is not None and opdef.commutative)

        def is_op(name: str) -> bool:
            return name in self.registry and name not in META

        graph: nx.DiGraph[str] = nx.DiGraph()
        terms = {}
        for rule in self.rewrites:
            graph.add_node(rule.name)
            constant_vars = frozenset(_const_vars(rule.guard))
            terms[rule.name] = ops_of(term_of(rule.replacement, is_op, constant_vars))
        index = PatternIndex()
        for s in self.rewrites:
            index.add(s, s.compiled)
        for r in self.rewrites:
            targets = {s.name: s for t in terms[r.name] for s in index.candidates(t, is_comm)
                       if may_match(s.compiled, t, is_comm)}
            for s in sorted(targets.values(), key=lambda rule: rule.order):
                graph.add_edge(r.name, s.name)
        by_name = {r.name: r for r in self.rewrites}
        for component in nx.strongly_connected_components(graph):
            names = sorted(component, key=lambda n: by_name[n].order)
            first = by_name[names[0]]
            if len(names) == 1:
                if graph.has_edge(names[0], names[0]):
                    self.diags.error(first.decl.name.span,
                                     f"rewrite {first.name!r} can loop: its replacement builds what its own pattern "
                                     "matches",
                                     "make the right side simpler than the left; at run time the budget would stop it")
                continue
            cycle = nx.find_cycle(graph.subgraph(component), names[0])
            path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
            self.diags.error(first.decl.name.span,
                             f"rewrites {', '.join(repr(n) for n in names)} can loop: {path}",
                             "each builds what the next one matches")
        # decompositions that reopen themselves
        dgraph: nx.DiGraph[str] = nx.DiGraph()
        for op, cases in self.decompositions.items():
            dgraph.add_node(op)
            for case in cases:
                for stmt in case.body:
                    exprs = stmt.values if isinstance(stmt, A.Return) else (stmt.value,)
                    for e in exprs:
                        for sub in A.walk(e):
                            if isinstance(sub, A.Call) and sub.func.text in self.decompositions:
                                dgraph.add_edge(op, sub.func.text)
        for component in nx.strongly_connected_components(dgraph):
            ops = sorted(component)
            if len(ops) == 1 and not dgraph.has_edge(ops[0], ops[0]):
                continue
            cycle = nx.find_cycle(dgraph.subgraph(component), ops[0])
            path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
            self.diags.error(self.decompositions[ops[0]][0].span, f"decompositions can loop: {path}",
                             "a decomposition body must not build the op it opens, directly or through others")
        self._check_expansion(dgraph)
        if not self.diags.errors:  # interactions of a rule set that has errors are noise
            check_interactions(self.rewrites, self.decompositions, is_op, is_comm,
                               lambda rule: frozenset(_const_vars(rule.guard)), self.diags)

    def _check_expansion(self, call_graph) -> None:
        """Report each compound op whose full expansion passes MAX_EXPANSION_NODES, where
        the limit is first passed (not every op above it in a chain)."""
        sizes = expansion_sizes(self.decompositions, call_graph)
        for op, cases in self.decompositions.items():
            if sizes.get(op, 0) <= MAX_EXPANSION_NODES:
                continue
            for case in cases:
                callees = largest_callees(case.body, sizes)
                if case_size(case.body, sizes) <= MAX_EXPANSION_NODES or \
                        any(size > MAX_EXPANSION_NODES for _, _, size in callees):
                    continue
                what = f"def {op!r}" if case.from_def else f"decomposition of {op!r}"
                uses = ", ".join(f"{callee!r} x{n} ({size} nodes each)" for callee, n, size in callees)
                self.diags.error(case.span, f"{what} expands to more than {MAX_EXPANSION_NODES} nodes",
                                 (f"it builds {uses}; " if uses else "") +
                                 "opening it would take too long: build less, or nest fewer compound ops")

    # ----- fuse table -----------------------------------------------------------------
    def check_fuse(self) -> None:
        """Fuse and nofuse entries in precedence order: a file's entries before those of
        the files it imports (later files first), file order within a file. Shadowed
        entries and conflicting overlaps are reported within a file only: across files,
        covering an imported entry is how an importing file replaces or denies it, and an
        imported entry that can no longer decide any pair leaves the table."""
        decided = _Deciders()
        for module in reversed(self.modules):
            in_file = _Deciders()
            for f in module.items:
                if isinstance(f, (A.FuseDecl, A.NoFuseDecl)):
                    self._check_fuse_entry(f, in_file, decided)

    def _check_fuse_entry(self, f, in_file: "_Deciders", decided: "_Deciders") -> None:
        entry = self._fuse_entry(f)
        if entry is None:
            return
        pairs = set(itertools.product(entry.producers, entry.consumers))
        shadowing = in_file.deciders(entry, pairs)
        if all(shadowing):
            spans = sorted({str(e.span) for found in shadowing for e in found})
            self.diags.error(f.span, "fuse entry is shadowed: every pair it covers is decided by earlier "
                                     f"entries ({', '.join(spans)})", "remove it or move it first")
            return
        if not entry.deny:
            self._warn_overlaps(f, entry, pairs, in_file.same_kind(entry))
        replaced = all(decided.deciders(entry, pairs))
        in_file.add(entry, pairs)
        decided.add(entry, pairs)
        # every accepted entry has a place, for warnings in order (a replaced one too)
        self._fuse_order[id(entry)] = len(self._fuse_order)
        if not replaced:
            self.fuse_entries.append(entry)

    def _warn_overlaps(self, f, entry: FuseEntry, pairs, same_kind) -> None:
        overlaps: dict[int, tuple[FuseEntry, list]] = {}
        for pair in pairs:
            for e in same_kind.get(pair, ()):
                overlaps.setdefault(id(e), (e, []))[1].append(pair)
        for e, overlap in sorted(overlaps.values(), key=lambda item: self._fuse_order[id(item[0])]):
            if e.result != entry.result:
                p, c = sorted(overlap)[0]
                self.diags.warning(f.span, f"pair {p} -> {c} is decided by the earlier entry at {e.span} "
                                           f"(result {e.result}, not {entry.result})")

    def _fuse_entry(self, f) -> FuseEntry | None:
        """The FuseEntry of a fuse or nofuse declaration, or None after diagnostics."""
        deny = isinstance(f, A.NoFuseDecl)
        names = f.producers + f.consumers + (() if deny else (f.result,))
        ok = all([self._category(n) for n in names])
        flags, options, spans = set(), {}, {}
        if not deny and f.sibling:
            ok = self._check_sibling(f) and ok
            flags.add("sibling")
        for opt in () if deny else f.options:
            key = opt.name.text
            if key in flags or key in options:
                self.diags.error(opt.name.span, f"{key!r} is given twice")
                ok = False
            if opt.value is None:
                if key not in FUSE_FLAGS:
                    self.diags.error(opt.name.span, f"unknown fuse flag {key!r}",
                                     (suggest(key, FUSE_FLAGS) + " " if suggest(key, FUSE_FLAGS) else "") +
                                     f"(flags: {', '.join(FUSE_FLAGS)}; options are written key=value)")
                    ok = False
                flags.add(key)
            else:
                if key in _CATEGORY_OPTIONS and opt.value not in self.lattice_names:
                    self.diags.error(opt.span, f"option {key!r} names unknown category {opt.value!r}",
                                     suggest(str(opt.value), self.lattice))
                    ok = False
                options[key] = opt.value
            spans[key] = opt.span
        if f.guard is not None:
            before = len(self.diags.errors)
            ExprChecker(self.diags, self.registry, tensors=EDGE_TENSORS).guard(f.guard)
            ok = ok and len(self.diags.errors) == before
        if not ok:
            return None
        return FuseEntry(frozenset(n.text for n in f.producers), frozenset(n.text for n in f.consumers),
                         "" if deny else f.result.text, frozenset(flags), MappingProxyType(options), f.span,
                         guard=f.guard, deny=deny, option_spans=MappingProxyType(spans))

    def _check_sibling(self, f: A.FuseDecl) -> bool:
        """A sibling entry takes options only: the layer flags mean nothing between siblings."""
        ok = True
        for opt in f.options:
            if opt.value is None and opt.name.text in FUSE_FLAGS:
                self.diags.error(opt.name.span, f"flag {opt.name.text!r} does not apply to a sibling entry",
                                 "siblings share an input, they do not feed one another")
                ok = False
        return ok

    # ----- pattern entries and ops kept whole ------------------------------------------
    def check_fuse_patterns(self) -> None:
        """`fuse pattern` entries, the importing file's first (as for the fuse table); each
        pattern is checked as a rewrite's is, its guard sees the pattern's variables."""
        seen: dict[str, A.FusePattern] = {}
        for module in reversed(self.modules):
            for f in module.items:
                if isinstance(f, A.FusePattern):
                    self._check_fuse_pattern(f, seen)

    def _check_fuse_pattern(self, f: A.FusePattern, seen: dict[str, A.FusePattern]) -> None:
        if f.name.text in seen:
            self.diags.error(f.name.span, f"fuse pattern {f.name.text!r} is already defined at "
                                          f"{seen[f.name.text].span}")
            return
        seen[f.name.text] = f
        before = len(self.diags.errors)
        if f.result is not None:
            self._category(f.result)
        pattern = self._root_pattern(f.pattern, f.span, "a fuse pattern groups the ops it matches")
        if pattern is None:
            return
        tensors, statics, rests = self._check_pattern(pattern)
        if f.guard is not None and len(self.diags.errors) == before:
            ExprChecker(self.diags, self.registry, tensors=tensors, statics=statics, rests=rests).guard(f.guard)
        if len(self.diags.errors) == before:
            self.fuse_patterns.append(PatternEntry(f, pattern))

    def check_kept_whole(self) -> None:
        """``import ... without decompose OP``: OP must be an op the imported files decompose.
        Its cases leave the rule set, so rewriting keeps it whole; the loader made the
        imported file a lowering import too, whose cases open it inside its group."""
        kept = set()
        for item in _items(self.modules, A.Import):
            for name in item.without:
                if self.registry.lookup(name.text) is None:
                    self.diags.error(name.span, f"unknown op {name.text!r}", suggest(name.text, self.registry.names()))
                elif name.text not in self.decompositions and name.text not in kept:
                    self.diags.error(name.span, f"no decomposition of {name.text!r} to drop",
                                     suggest(name.text, self.decompositions) or
                                     f"decomposed here: {', '.join(sorted(self.decompositions)) or 'nothing'}")
                else:
                    kept.add(name.text)
                    self.decompositions.pop(name.text, None)
        self.kept_whole = frozenset(kept)

    # ----- strategies -----------------------------------------------------------------
    def check_strategies(self) -> None:
        """A strategy is declared once per file; a later file's declaration (the importing
        file's, as imports load first) overrides the earlier one key by key."""
        declared_in: dict[str, str] = {}
        for module in self.modules:
            for s in module.items:
                if isinstance(s, A.StrategyDecl):
                    self._check_strategy(s, module.path, declared_in)

    def _check_strategy(self, s, path: str, declared_in: dict[str, str]) -> None:
        name = s.name.text
        earlier = self.strategies.get(name)
        if earlier is not None and declared_in[name] == path:
            self.diags.error(s.name.span, f"strategy {name!r} is already defined at {earlier.span}",
                             "a file declares a strategy once; a file that imports it may override its options")
            return
        options, spans = {}, {}
        ok = True
        for opt in s.options:
            key = opt.name.text
            if key in options:
                self.diags.error(opt.name.span, f"option {key!r} is given twice")
                ok = False
                continue
            try:
                options[key] = _option_value(opt.value)
                spans[key] = opt.span
            except PatternError as exc:
                self.diags.error(exc.span or opt.span, exc.message, exc.hint)
                ok = False
        if not ok:
            return
        if earlier is not None:
            options = {**earlier.options, **options}
            spans = {**earlier.option_spans, **spans}
        declared_in[name] = path
        self.strategies[name] = Strategy(name, MappingProxyType(options), s.span, MappingProxyType(spans))

    # ----- tests ----------------------------------------------------------------------
    def check_tests(self) -> None:
        # a test's name is namespaced by its file: only a second test of one name in the
        # same file is an error, not one that shares the name of an imported policy's test
        seen: dict[tuple[str, str], A.TestDecl] = {}
        tests = list(_items(self.modules, A.TestDecl))
        if not tests:
            return  # and the op names are not asked for: the registry is filled on the first ask
        # every declared rewrite counts, even one with errors of its own (no cascades)
        declared = {r.name.text for r in _items(self.modules, A.Rewrite)}
        symbols = {"rules": declared, "ops": set(self.registry.names()),
                   "categories": set(self.lattice)}
        for t in tests:
            key = (t.name.span.file, t.name.text)
            if key in seen:
                self.diags.error(t.name.span, f"test {t.name.text!r} is already defined at {seen[key].span}")
                continue
            seen[key] = t
            if t.strategy is not None and t.strategy.text not in self.strategies:
                self.diags.error(t.strategy.span, f"unknown strategy {t.strategy.text!r}",
                                 suggest(t.strategy.text, self.strategies) or
                                 f"strategies: {', '.join(self.strategies) or 'none declared'}")
            before = len(self.diags.errors)
            values: set[str] = set()
            outputs = expects = 0
            for stmt in t.stmts:
                if isinstance(stmt, (A.TInput, A.TConst)):
                    if stmt.name.text in values:
                        self.diags.error(stmt.name.span, f"{stmt.name.text!r} is already defined")
                    values.add(stmt.name.text)
                elif isinstance(stmt, A.Let):
                    ec = ExprChecker(self.diags, self.registry, tensors=values)
                    if len(stmt.names) > 1:
                        if isinstance(stmt.value, A.Call) and stmt.value.func.text in self.registry:
                            ec.op_call(stmt.value, n_outputs=len(stmt.names))
                        else:
                            self.diags.error(stmt.span, f"{len(stmt.names)} names need an op with "
                                                        f"{len(stmt.names)} outputs")
                    else:
                        ec.tensor(stmt.value)
                    for n in stmt.names:
                        if n.text in values:
                            self.diags.error(n.span, f"{n.text!r} is already defined")
                        values.add(n.text)
                elif isinstance(stmt, A.TOutput):
                    outputs += 1
                    for n in stmt.names:
                        if n.text not in values:
                            self.diags.error(n.span, f"unknown value {n.text!r}", suggest(n.text, values))
                elif isinstance(stmt, A.TExpect):
                    expects += 1
                    ExprChecker(self.diags, self.registry, tensors=values, symbols=symbols).guard(stmt.expr)
            if not outputs:
                self.diags.error(t.name.span, f"test {t.name.text!r} has no 'output'")
            if not expects:
                self.diags.error(t.name.span, f"test {t.name.text!r} states no 'expect'")
            if len(self.diags.errors) > before:
                continue
            if self._memoized(t, lambda: self._build_test(t)):
                continue
            self.tests.append(TestBlock(t))

    def _build_test(self, t: A.TestDecl) -> None:
        try:
            build_test_graph(t, self.registry)
        except InstantiateError as exc:
            self.diags.error(exc.span or t.span, f"test {t.name.text!r}: {exc.message}")

    # ----- memo -----------------------------------------------------------------------
    def _def_deps(self, item) -> tuple:
        """The `def`s ``item`` uses, transitively, as (name, declaration id) pairs."""
        seen: dict[str, int] = {}
        stack = [item]
        while stack:
            node = stack.pop()
            for expr in _expressions(node):
                for sub in A.walk(expr):
                    if isinstance(sub, A.Call) and sub.func.text in self.defs and sub.func.text not in seen:
                        decl = self.defs[sub.func.text].decl
                        seen[sub.func.text] = id(decl)
                        stack.append(decl)
        return tuple(sorted(seen.items()))

    def _memoized(self, item, check) -> bool:
        """Run ``check`` (which reports into self.diags) once per item and def set;
        replay its diagnostics afterwards. Returns whether it reported errors."""
        key = (id(item), id(self.base), self._def_deps(item))
        hit = _MEMO.get(key)
        if hit is not None and hit[0] is item and hit[1] is self.base:
            self.diags.items.extend(hit[2])
            return any(d.is_error for d in hit[2])
        before = len(self.diags.items)
        check()
        found = self.diags.items[before:]
        _MEMO[key] = (item, self.base, list(found))
        return any(d.is_error for d in found)


def _expressions(node):
    """Every expression directly inside an item (bodies, formulas, test statements)."""
    if isinstance(node, A.DefDecl):
        if node.formula is not None:
            yield node.formula
        for stmt in node.body or ():
            yield from (stmt.values if isinstance(stmt, A.Return) else (stmt.value,))
    elif isinstance(node, A.Decompose):
        for stmt in node.body:
            yield from (stmt.values if isinstance(stmt, A.Return) else (stmt.value,))
    elif isinstance(node, A.TestDecl):
        for stmt in node.stmts:
            if isinstance(stmt, A.Let):
                yield stmt.value
            elif isinstance(stmt, A.TExpect):
                yield stmt.expr


def _const_vars(guard) -> list[str]:
    """Variables a top-level `const(...)` conjunct of ``guard`` pins to constants."""
    if guard is None:
        return []
    parts = guard.items if isinstance(guard, A.BoolOp) and guard.op == "and" else (guard,)
    out: list[str] = []
    for part in parts:
        if isinstance(part, A.Call) and part.func.text == "const":
            out.extend(a.name for a in part.args if isinstance(a, A.Var))
    return out


def _option_value(e):
    if isinstance(e, A.Var) and e.name in ("true", "false"):
        return e.name == "true"
    if isinstance(e, A.Var):
        raise PatternError(e.span, f"option values are literals; {e.name!r} is a name",
                           f'write "{e.name}" for a string, or true/false')
    return literal_value(e)
