"""docs/api.md is what tools/gen_api_doc.py generates from the docstrings today."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_tool():
    spec = importlib.util.spec_from_file_location("gen_api_doc", ROOT / "tools" / "gen_api_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_doc_is_up_to_date():
    tool = load_tool()
    assert (ROOT / "docs" / "api.md").read_text() == tool.render(), \
        "docs/api.md is out of date: run python tools/gen_api_doc.py"


def test_api_doc_covers_every_public_name():
    tool = load_tool()
    text = (ROOT / "docs" / "api.md").read_text()
    for module_name in tool.public_modules():
        module = importlib.import_module(module_name)
        assert f"## `{module_name}`" in text
        for name in module.__all__:
            assert f"`{module_name}.{name}" in text, f"{module_name}.{name}"


def test_markdown_conversion():
    tool = load_tool()
    raw = '''Summary line.

        example(1)
        example(2)

    See :func:`fusionlang.fuse` and ``x``.
    '''
    assert tool.to_markdown(raw) == "Summary line.\n\n```\nexample(1)\nexample(2)\n```\n\n" \
                                    "See `fusionlang.fuse` and ``x``."
