"""The built-in registry is filled on the first ask (issue 36: `lint` of a file that names no
op must not import the op families' sympy): a lookup, a name list or an iteration sees every
op however the registry was reached, and registering or counting does not fill it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fusionlang.errors import UnsupportedOpError
from fusionlang.ops.registry import OpDef, OpRegistry


def _opdef(name: str) -> OpDef:
    return OpDef(name=name, inputs=("x",), infer=lambda call: list(call.in_types),
                 reference=lambda call, values: list(values), doc="an op of this test")


def _filled_on_first_ask() -> tuple[OpRegistry, list[int]]:
    registry = OpRegistry()
    calls: list[int] = []
    registry.populate_with(lambda: (calls.append(1), registry.register(_opdef("late"))))
    return registry, calls


def test_a_lookup_fills_the_registry_once():
    registry, calls = _filled_on_first_ask()
    registry.register(_opdef("early"))
    assert calls == [] and registry.registered() == 1
    assert "late" in registry and "early" in registry and "nope" not in registry
    assert registry.names() == ["early", "late"] and calls == [1]


def test_a_child_asks_its_parent_and_an_unknown_op_is_still_refused():
    registry, calls = _filled_on_first_ask()
    child = registry.child()
    assert child.get("late").name == "late" and calls == [1]
    with pytest.raises(UnsupportedOpError, match="unknown op 'nope'"):
        child.get("nope", "node 'n'")


def test_registering_a_name_twice_is_refused_before_and_after_filling():
    registry, _ = _filled_on_first_ask()
    registry.register(_opdef("early"))
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(_opdef("early"))
    registry.names()
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(_opdef("late"))


def test_the_builtin_registry_reached_directly_has_every_op():
    # the families are imported on the first ask; registering them needs no sympy
    family = "'fusionlang.ops.activation' in sys.modules"
    probe = ("from fusionlang.ops.registry import REGISTRY; import sys; "
             f"print({family}, 'add' in REGISTRY, len(REGISTRY.names()) > 100, {family}, 'sympy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "True", "True", "True", "False"], done.stderr
