"""Rewrites that decompositions undo: the lint check of rule interactions.

The rewriter runs the rule set's rewrites, then opens compound ops (and what their
bodies build, in turn), then rewrites again. A rewrite whose replacement builds an op
that a decomposition of the same rule set opens is therefore undone: `rewrite to_silu`
under `import "apollo.fuse"` builds `silu`, and decompose.fuse opens it again. When the
opened body holds what the rewrite matches, the two loop (the rewrite budget stops
them at run time). Both are warnings at the rewrite, naming the decomposition's line.

The check reads terms, as the rewrite loop check does: the replacement's term, and the
decomposition's body with its parameters replaced by the term's operands and compound
ops opened in turn (to a bounded depth), which is what the decompose pass builds.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from fusionlang.lang import ast as A
from fusionlang.lang.diagnostics import Diagnostics
from fusionlang.lang.patterns import PFolded, POp, PVar, may_match, ops_of, term_of
from fusionlang.lang.ruleset import DecomposeRule, RewriteRule

#: how deep compound ops built by a body are opened in turn (real bodies nest 2-3 deep)
MAX_OPEN_DEPTH = 8
#: term nodes one check may build; past it, ops are left unopened (a body that uses its
#: operand many times, nested, would otherwise grow the term exponentially)
MAX_TERM_NODES = 10_000
#: term levels opened below the built op (deeper parts stay as built: they are walked
#: recursively, and expressions may nest 100 levels in each body)
MAX_TERM_LEVELS = 100


def check_interactions(rewrites: Sequence[RewriteRule], decompositions: Mapping[str, Sequence[DecomposeRule]],
                       is_op: Callable[[str], bool], is_comm: Callable[[str], bool],
                       constant_vars: Callable[[RewriteRule], frozenset[str]], diags: Diagnostics) -> None:
    """Warn, at each rewrite, about a decomposition that opens its result (the rewrite is
    undone), or that opens an op it builds into what it matches (the two loop). An inner op
    of the result that is opened without looping is no warning: the result the rewrite
    was for stays. A rewrite that says ``accepts undone`` is not warned about at all."""
    if not decompositions:
        return
    opener = _Opener(decompositions, is_op)
    for rule in rewrites:
        if "undone" in rule.accepts:
            continue
        term = term_of(rule.replacement, is_op, constant_vars(rule))
        for built in ops_of(term):
            case = opener.case_for(built)
            if case is None:
                continue
            opener.budget = MAX_TERM_NODES
            opened = opener.open(case, built, MAX_OPEN_DEPTH)
            loops = any(may_match(rule.compiled, t, is_comm) for t in ops_of(opened))
            if loops or built is term:
                _warn(rule, built, case, loops, diags)
                break  # one warning per rewrite


def _warn(rule: RewriteRule, built: POp, case: DecomposeRule, loops: bool, diags: Diagnostics) -> None:
    what = f"{case.name} ({case.where})" if not case.from_def else f"def {case.op!r} ({case.where})"
    if loops:
        diags.warning(rule.decl.name.span,
                      f"rewrite {rule.name!r} ({rule.where}) and {what} can loop: the rewrite builds "
                      f"{built.op!r}, which the decomposition opens into what the rewrite matches",
                      "at run time the rewrite budget stops them; drop one of the two from the rule set")
        return
    diags.warning(rule.decl.name.span,
                  f"rewrite {rule.name!r} ({rule.where}) is undone: it builds {built.op!r}, which {what} "
                  "opens again",
                  f"the rewritten graph keeps no {built.op!r}; use a rule set without that decomposition, "
                  "rewrite to what it opens into, or say 'accepts undone' in the rule")


class _Opener:
    """Decomposition bodies as terms, opened the way the decompose pass opens them."""

    def __init__(self, decompositions: Mapping[str, Sequence[DecomposeRule]], is_op: Callable[[str], bool]):
        self.decompositions = decompositions
        self.is_op = is_op
        #: term nodes still to build in this check
        self.budget = MAX_TERM_NODES

    def case_for(self, term: POp) -> DecomposeRule | None:
        """The first case that may open ``term``: its arity, and no literal attribute of
        the term contradicting what the case requires."""
        literal = {a.name: a.value for a in term.attrs if a.kind == "lit"}
        for case in self.decompositions.get(term.op, ()):
            if len(case.params) != len(term.operands):
                continue
            if all(name not in literal or _same(literal[name], value) for name, value in case.requires):
                return case
        return None

    def open(self, case: DecomposeRule, term: POp, depth: int, level: int = 0):
        """The term ``case`` builds for ``term`` (its first returned value), with the
        compound ops it builds opened in turn, ``depth`` levels down (``level``: how
        deep in the whole term ``term`` is)."""
        env = dict(zip(case.params, term.operands))
        result = None
        for stmt in case.body:
            if isinstance(stmt, A.Let):
                value = self._term(stmt.value, env)
                for name in stmt.names:
                    env[name.text] = value if len(stmt.names) == 1 else PFolded(name.span)
            elif isinstance(stmt, A.Return) and stmt.values:
                result = self._term(stmt.values[0], env)
        if result is None:
            return PFolded(case.span)
        return self._open_all(result, depth - 1, level)

    def _term(self, expr, env):
        return _substitute(term_of(expr, self.is_op, frozenset()), env)

    def _open_all(self, term, depth: int, level: int = 0):
        if not isinstance(term, POp) or self.budget <= 0 or level > MAX_TERM_LEVELS:
            return term
        self.budget -= 1
        operands = tuple(self._open_all(o, depth, level + 1) for o in term.operands)
        term = POp(term.op, operands, term.attrs, term.rest, term.bind, term.span, term.op_span)
        case = self.case_for(term) if depth > 0 else None
        return self.open(case, term, depth, level) if case is not None else term


def _substitute(term, env):
    if isinstance(term, PVar):
        return env.get(term.name, term)
    if isinstance(term, POp):
        return POp(term.op, tuple(_substitute(o, env) for o in term.operands), term.attrs, term.rest, term.bind,
                   term.span, term.op_span)
    return term


def _same(a, b) -> bool:
    norm = (lambda v: tuple(v) if isinstance(v, list) else v)
    return norm(a) == norm(b)
