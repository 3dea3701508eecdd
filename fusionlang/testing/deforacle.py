"""A def checked against its oracles: an independent second body, and test vectors.

A compound def's reference runs its own body, so a wrong body (a ``reduce_sum`` where
the mean was meant) only surfaced at some rule that used the def. With
``oracle { body }`` the def is run on drawn inputs next to the oracle's body, and with
``oracle (inputs) {attrs} => output`` on the literal inputs against the literal output
(within float32's tolerance); a difference fails the def itself, at its
``file:line:col``, naming the oracle.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph
from fusionlang.ir.types import TensorType
from fusionlang.lang.guards import Bindings
from fusionlang.lang.instantiate import InstantiateError, Instantiator
from fusionlang.lang.oracles import literal_array, oracle_attrs
from fusionlang.ops.interpreter import run
from fusionlang.testing.instances import Counterexample, Leaf, Reject, draw_array
from fusionlang.testing.opgen import NoProposal, propose
from fusionlang.testing.values import REAL, Mismatch, compare, magnitude


def _where(span) -> str:
    return f"{span.file}:{span.line}:{span.col}"


def _run_def(opdef, arrays, attrs) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        return [np.asarray(a) for a in opdef.reference(list(arrays), attrs)]


def _run_oracle_body(oracle, params, arrays, attrs, registry) -> list[np.ndarray]:
    graph = Graph("oracle", registry=registry)
    bindings = Bindings({p: graph.add_input(p, TensorType.of(a)) for p, a in zip(params, arrays)}, dict(attrs))
    inst = Instantiator(graph, registry, bindings)
    outs = [inst.materialize(v, str(arrays[0].dtype)) for v in inst.body(oracle.body)]
    graph.outputs = list(outs)
    with np.errstate(all="ignore"):
        values = run(graph, dict(zip(params, arrays)), registry)
    return [values[o] for o in outs]


def vector_mismatch(name: str, decl, oracle, opdef) -> Counterexample | None:
    """The def on a test vector's inputs against its output, or None when they agree."""
    attrs = opdef.normalize_attrs(oracle_attrs(oracle), name)
    # (literal arrays: the checker refused a rule file whose oracle values are not)
    arrays = [cast(np.ndarray, literal_array(e)).astype(np.float32) for e in oracle.inputs]
    try:
        got = _run_def(opdef, arrays, attrs)[0]
    except (FuseError, InstantiateError) as exc:
        problem = getattr(exc, "message", None) or str(exc).splitlines()[0]
        message = f"the def cannot run the oracle's inputs at {_where(oracle.span)}: {problem}"
        return Counterexample(f"def {name}", _where(decl.span), message)
    expected = cast(np.ndarray, literal_array(oracle.expected))
    want = expected.astype(got.dtype) if got.dtype.kind == "f" else expected
    mismatch = compare(want, got, scale=magnitude(arrays + [want]))
    if mismatch is None:
        return None
    leaves = [(Leaf(p.text, p.text, "input", TensorType.of(a)), a) for p, a in zip(decl.params, arrays)]
    return Counterexample(f"def {name}", _where(decl.span),
                          f"the def differs from the test vector at {_where(oracle.span)}: {mismatch}", leaves, [],
                          want, got, ("oracle", "def"))


def body_trial(name: str, decl, oracle, opdef, registry):
    """A hypothesis trial: the def and the oracle's body on drawn inputs."""
    params = [p.text for p in decl.params]

    def trial(draw):
        try:
            proposal = propose(draw, registry, name, len(params), [None] * len(params), {})
        except NoProposal as exc:
            raise Reject(f"{name}: {exc}") from None
        attrs = opdef.normalize_attrs(proposal.attrs, name)
        arrays = [draw_array(draw, t, proposal.domains.get(k, REAL)) for k, t in enumerate(proposal.types)]
        try:
            want = _run_def(opdef, arrays, attrs)
        except (FuseError, InstantiateError) as exc:
            message = getattr(exc, "message", None) or str(exc).splitlines()[0]
            raise Reject(f"the def cannot run these inputs: {message}") from None
        if any(w.dtype.kind == "f" and not np.all(np.isfinite(w)) for w in want):
            raise Reject("the def is not finite on these values")
        try:
            got = _run_oracle_body(oracle, params, arrays, attrs, registry)
        except (FuseError, InstantiateError) as exc:
            message = getattr(exc, "message", None) or str(exc).splitlines()[0]
            got, mismatch = None, Mismatch(f"the oracle at {_where(oracle.span)} cannot run: {message}")
        else:
            mismatch = next((m for w, g in zip(want, got)
                             if (m := compare(w, g, scale=magnitude(arrays + want))) is not None), None)
        if mismatch is None:
            return None
        leaves = [(Leaf(p, p, "input", TensorType.of(a)), a) for p, a in zip(params, arrays)]
        return Counterexample(f"def {name}", _where(decl.span),
                              f"the def differs from the oracle at {_where(oracle.span)}: {mismatch}", leaves,
                              [(name, name, dict(attrs))], want[0], got[0] if got else None, ("def", "oracle"))

    return trial


__all__ = ["body_trial", "vector_mismatch"]
