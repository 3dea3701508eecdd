"""Checking a def's oracles when the rule set loads: what ``check`` compares a def with.

A compound def's reference is its own body, so nothing checks the body unless the def
carries something independent: ``oracle { body }`` (a second formula for the same
outputs) or ``oracle (inputs) {attrs} => output`` (a test vector of literal arrays).
Here each oracle is validated so that ``check`` can run it: bodies like any def body
(and not calling the def itself), test vectors with one literal array per parameter,
attributes the def has, and a def with one output. ``fusionlang.testing.checker``
runs them.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from fusionlang.lang import ast as A
from fusionlang.lang.diagnostics import Diagnostics, suggest
from fusionlang.lang.exprcheck import ExprChecker
from fusionlang.lang.limits import MAX_LIST_ELEMENTS
from fusionlang.lang.patterns import PatternError, literal_value
from fusionlang.ops.registry import OpRegistry


def literal_array(e) -> np.ndarray | None:
    """The float64 array a literal number or rectangular list of numbers stands for."""
    try:
        value = literal_value(e)
    except PatternError:
        return None
    if isinstance(value, (str, bool)):
        return None
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return array if array.dtype.kind == "f" else None


def oracle_attrs(o: A.Oracle) -> dict:
    """The attributes a test vector pins (validated: every value is a literal)."""
    return {item.name.text: literal_value(item.value) for item in o.attrs}


def _check_vector(d: A.DefDecl, o: A.Oracle, diags: Diagnostics, opdef) -> None:
    name = d.name.text
    if len(o.inputs) != len(d.params):
        diags.error(o.span, f"the oracle gives {len(o.inputs)} input{'s' if len(o.inputs) != 1 else ''}; "
                            f"def {name!r} takes {len(d.params)}",
                    f"one literal array per parameter: {', '.join(p.text for p in d.params)}")
    if opdef.num_outputs != 1:
        diags.error(o.span, f"a test-vector oracle needs a def with one output; def {name!r} has "
                            f"{opdef.num_outputs}", "use an oracle { ... } body")
    for e in o.inputs + ((o.expected,) if o.expected is not None else ()):  # (a vector has one)
        array = literal_array(e)
        if array is None:
            diags.error(e.span, "an oracle value must be a number or a rectangular list of numbers")
        elif array.size > MAX_LIST_ELEMENTS:  # as every other list of a rule file
            diags.error(e.span, f"an oracle value holds {array.size} numbers: lists have at most "
                                f"{MAX_LIST_ELEMENTS} elements")
    for item in o.attrs:
        if isinstance(item, A.AttrRest):
            diags.error(item.span, "an oracle pins attributes by name; '..' spreads nothing here")
            continue
        if item.name.text not in opdef.attrs:
            known = sorted(opdef.attrs)
            diags.error(item.name.span, f"def {name!r} has no attribute {item.name.text!r}",
                        suggest(item.name.text, known) or
                        (f"attributes: {', '.join(known)}" if known else "it has no attributes"))
        else:
            try:
                literal_value(item.value)
            except PatternError:
                diags.error(item.value.span, "an oracle attribute value must be a literal")


def _calls_itself(body, name: str) -> A.Call | None:
    for stmt in body:
        for value in (stmt.values if isinstance(stmt, A.Return) else (stmt.value,)):
            for e in A.walk(value):
                if isinstance(e, A.Call) and e.func.text == name:
                    return e
    return None


def check_oracles(d: A.DefDecl, diags: Diagnostics, registry: OpRegistry,
                  check_body: Callable[..., None]) -> None:
    """Validate the oracles of def ``d`` (already registered); ``check_body(body, ec,
    n_outputs, what, span)`` is the checker's own check of def bodies."""
    opdef = registry.lookup(d.name.text)
    if opdef is None:
        return
    for o in d.oracles:
        if o.body is None:
            _check_vector(d, o, diags, opdef)
            continue
        itself = _calls_itself(o.body, d.name.text)
        if itself is not None:
            diags.error(itself.func.span, f"the oracle of def {d.name.text!r} calls {d.name.text!r}: it would "
                                          "check the def against itself",
                        "write the outputs another way, from other ops")
            continue
        what = f"the oracle of def {d.name.text!r}"
        ec = ExprChecker(diags, registry, tensors=[p.text for p in d.params], statics=list(opdef.attrs), what=what)
        check_body(o.body, ec, opdef.num_outputs, what, o.span)


__all__ = ["check_oracles", "literal_array", "oracle_attrs"]
