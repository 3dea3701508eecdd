"""Generate docs/api.md, the API reference, from the docstrings of the public names.

    python tools/gen_api_doc.py            # rewrite docs/api.md
    python tools/gen_api_doc.py --check    # exit 1 if docs/api.md is out of date

Public means listed in ``__all__``: of ``fusionlang`` and of every subpackage that has
one (``fusionlang.cli`` has none: its interface is the command line). For each name:
its signature and docstring; for classes also their public methods and properties.
Nothing is executed but imports; signatures come from :mod:`inspect`.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "api.md"

HEADER = """\
# API reference

Generated from the docstrings by `tools/gen_api_doc.py`: do not edit by hand. After
changing a public name or its docstring, run `python tools/gen_api_doc.py`
(`tests/docs/test_api_doc.py` fails while this file is out of date).

Public names are those in each package's `__all__`. The command line is described in
the [README](../README.md) and `fusionlang --help`; the rule language in
[language.md](language.md); how the packages fit together in
[architecture.md](architecture.md).
"""


def public_modules() -> list[str]:
    """``fusionlang`` and its subpackages and modules that define ``__all__``, in order."""
    import fusionlang

    names = ["fusionlang"]
    for info in sorted(pkgutil.iter_modules(fusionlang.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name in ("api", "errors"):
            continue  # api's functions are re-exported by fusionlang; errors documents itself there
        module = importlib.import_module(f"fusionlang.{info.name}")
        if hasattr(module, "__all__"):
            names.append(module.__name__)
    return names


def _clean(text: str) -> str:
    # reprs of defaults that name a memory address would make the file differ per run
    return re.sub(r" at 0x[0-9a-f]+", "", text)


def signature(obj) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    return _clean(str(sig))


def doc_of(obj) -> str:
    """The object's own docstring as Markdown (a dataclass's generated "Name(...)" does
    not count)."""
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    if inspect.isclass(obj) and doc and doc.startswith(f"{obj.__name__}("):
        doc = None
    return to_markdown(doc) if doc else ""


def to_markdown(raw: str) -> str:
    """A docstring as Markdown: Sphinx roles become code spans, and paragraphs indented
    past the text (examples) become code blocks."""
    lines = raw.expandtabs().split("\n")
    if len(lines) > 1 and lines[-1].strip() == "":
        base = len(lines[-1])  # the closing quotes sit at the text's indentation
        body = [lines[0].strip()] + [line[base:] if not line[:base].strip() else line.strip() for line in lines[1:]]
    else:
        body = inspect.cleandoc(raw).split("\n")
    out: list[str] = []
    paragraph: list[str] = []

    def flush():
        if not paragraph:
            return
        if all(line.startswith("    ") for line in paragraph):
            out.extend(["```", *(line[4:] for line in paragraph), "```"])
        else:
            out.extend(paragraph)
        paragraph.clear()

    for line in body:
        if line.strip():
            paragraph.append(line.rstrip())
        else:
            flush()
            out.append("")
    flush()
    text = "\n".join(out).strip()
    return re.sub(r":(?:func|class|mod|meth|attr|data|exc):`~?\.?([^`]+)`", r"`\1`", text)


def _anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", text.lower()).replace(" ", "-")


def _members(cls) -> list[tuple[str, object]]:
    out = []
    for name, value in cls.__dict__.items():
        if name.startswith("_"):
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if inspect.isfunction(value) or isinstance(value, property):
            out.append((name, value))
    return out


def document(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    lines = [f"## `{module_name}`", ""]
    if module.__doc__:
        lines += [to_markdown(module.__doc__), ""]
    constants = []
    for name in module.__all__:
        obj = getattr(module, name)
        qual = f"{module_name}.{name}"
        if inspect.ismodule(obj):
            lines += [f"### module `{qual}`", "", doc_of(obj) or "(no docstring)", ""]
        elif inspect.isclass(obj):
            lines += [f"### class `{qual}{signature(obj)}`", "", doc_of(obj) or "(no docstring)", ""]
            for member, value in _members(obj):
                if isinstance(value, property):
                    head = f"- property `{member}`"
                    text = doc_of(value.fget) if value.fget else ""
                else:
                    head = f"- `{member}{signature(value)}`"
                    text = doc_of(value)
                first = text.split("\n\n")[0].replace("\n", " ") if text else ""
                lines.append(f"{head}{': ' + first if first else ''}")
            if _members(obj):
                lines.append("")
        elif callable(obj):
            lines += [f"### `{qual}{signature(obj)}`", "", doc_of(obj) or "(no docstring)", ""]
        else:
            constants.append(f"- `{qual}`: {type(obj).__name__}")
    if constants:
        lines += ["### Constants", "", *constants, ""]
    return lines


def render() -> str:
    modules = public_modules()
    lines = [HEADER, "## Contents", ""]
    lines += [f"- [`{name}`](#{_anchor(name)})" for name in modules]
    lines.append("")
    for name in modules:
        lines += document(name)
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/api.md is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run python tools/gen_api_doc.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
