"""Modules imported on the first attribute lookup: ``sp`` (sympy) and ``lazy_module``.

Importing sympy takes a third of a second; the op families only need it when they build a
formula (an access spec, a symbolic check, code generation), never to register their
names, arities, attributes and dtype rules, which is all that ``lint`` reads. An op module
writes ``sp.Max(...)`` (or ``scalar.Sigmoid(...)`` for the sympy functions of
:mod:`fusionlang.ops.scalar`) inside its functions and gets the module's own objects, so
identities hold (the C printers map those very classes).
"""

from __future__ import annotations

import importlib
from typing import Any


class _LazyModule:
    """Stands for a module; the first attribute lookup imports it."""

    def __init__(self, name: str):
        self._name = name
        self._module: Any = None

    def __getattr__(self, attr: str) -> Any:
        # formulas are built on hot paths (lowering): import once, then only look up
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


def lazy_module(name: str) -> Any:
    """The module ``name``, imported when an attribute of it is first looked up."""
    return _LazyModule(name)


sp: Any = lazy_module("sympy")
