"""The tutorial of docs/language.md works as written, and no malformed input (random
mutations of the standard rule files) makes the front end crash: every failure is a
RuleError with diagnostics."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from fusionlang.engine.rewrite import apply_rules, why_not
from fusionlang.testing import run_test_blocks
from fusionlang.errors import RuleError
from fusionlang.lang import lint, load_rules, parse_text, render
from fusionlang.lang.loader import resolve, standard_names
from fusionlang.ops import GraphBuilder

DOC = Path(__file__).resolve().parents[2] / "docs" / "language.md"


def tutorial_source() -> str:
    text = DOC.read_text()
    start = text.index("## Tutorial")
    block = text[text.index("```\n", start) + 4:]
    return block[: block.index("```")]


def test_tutorial_rule_file(tmp_path):
    path = tmp_path / "silu.fuse"
    path.write_text(tutorial_source())
    assert lint([path]) == []
    rules = load_rules(str(path))
    assert [r.passed for r in run_test_blocks(rules)] == [True]
    b = GraphBuilder()
    x = b.input("x", (8,))
    b.output(b.mul(b.sigmoid(x), x, name="m"))
    result = apply_rules(b.build(), rules)
    assert dict(result.fired) == {"to_silu": 1}
    assert result.graph.nodes[0].provenance == (f"rule to_silu ({path.name}:3)",) or \
        result.graph.nodes[0].provenance[-1].startswith("rule to_silu (")
    b = GraphBuilder()
    x, z = b.input("x", (8,)), b.input("z", (8,))
    b.output(b.mul(x, b.sigmoid(z), name="m"))
    assert why_not(b.build(), "m", rules, "to_silu").message == "variable 'x' is bound to 'x' but here it would be 'z'"

    bad = tmp_path / "silu_bad.fuse"
    bad.write_text(tutorial_source().replace("sigmoid(x))", "sigmiod(x))"))
    (diag,) = lint([bad])
    assert render(diag).splitlines()[1:] == ["   4 |     mul(x, sigmiod(x))",
                                             "     |            ^~~~~~~",
                                             "     = hint: did you mean 'sigmoid' or 'hard_sigmoid'?"]


SOURCES = [Path(resolve(n)).read_text() for n in standard_names()]
NOISE = st.sampled_from(list("(){}[]<>=:;,.@|-+*/#\"'$ \n") + ["where", "=>", "->", "..", "priority", "test", "x",
                                                                "1e400", "\\", "def", "class"])


@settings(max_examples=150, deadline=None)
@given(source=st.sampled_from(SOURCES), data=st.data())
def test_mutated_rule_files_never_crash(source, data):
    edits = data.draw(st.lists(st.tuples(st.integers(0, len(source)), st.integers(0, 6), NOISE), min_size=1,
                               max_size=4))
    text = source
    for position, deleted, inserted in edits:
        position = min(position, len(text))
        text = text[:position] + inserted + text[position + deleted:]
    try:
        parse_text(text, "mutant.fuse")
    except RuleError as exc:
        assert exc.diagnostics and all(str(d).startswith("mutant.fuse:") or str(d).startswith("std/") or
                                       ".fuse:" in str(d) for d in exc.diagnostics)
        for d in exc.diagnostics:
            render(d)
