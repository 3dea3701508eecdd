"""Every public function and class (those in the ``__all__`` of fusionlang and of each
subpackage) has a docstring of its own."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import fusionlang


def public_modules() -> list[str]:
    names = ["fusionlang"]
    for info in pkgutil.iter_modules(fusionlang.__path__):
        if info.name.startswith("_"):  # __main__ runs the command line when imported
            continue
        module = importlib.import_module(f"fusionlang.{info.name}")
        if hasattr(module, "__all__"):
            names.append(module.__name__)
    return names


def own_docstring(obj) -> str:
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
    if inspect.isclass(obj) and doc and doc.startswith(f"{obj.__name__}("):
        return ""  # what @dataclass generates: a signature, not documentation
    return (doc or "").strip()


def public_callables():
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismodule(obj):
                yield f"{module_name}.{name}", obj


def test_the_packages_are_found():
    found = public_modules()
    assert {"fusionlang", "fusionlang.ir", "fusionlang.ops", "fusionlang.lang", "fusionlang.engine",
            "fusionlang.backend", "fusionlang.frontend", "fusionlang.report"} <= set(found)


@pytest.mark.parametrize("name,obj", list(public_callables()), ids=lambda v: v if isinstance(v, str) else "")
def test_public_name_has_a_docstring(name, obj):
    assert own_docstring(obj), f"{name} has no docstring"


def test_dataclass_signature_is_not_a_docstring():
    from dataclasses import dataclass

    @dataclass
    class Bare:
        x: int

    assert own_docstring(Bare) == ""
