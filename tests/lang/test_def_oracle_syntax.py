"""`oracle` clauses on a def: parsed, printed back, and malformed ones pinned to their
first diagnostic (file:line:col and message)."""

from __future__ import annotations

import pytest

from fusionlang.errors import RuleError
from fusionlang.lang import ast as A
from fusionlang.lang import parse_text
from fusionlang.lang.printer import format_ruleset

RMS = """\
def rms(x; epsilon=0.000001) {
    return x / sqrt(reduce_mean(x * x) {axes=[-1], keepdims=1} + epsilon)
}
oracle {
    return x * rsqrt(reduce_mean(x * x) {axes=[-1], keepdims=1} + epsilon)
}
oracle ([[3.0, 4.0]]) {epsilon=0.0} => [[0.8485281, 1.1313708]]
"""

TWO_INPUTS = "def both(x, y) {\n    return x * y\n}\n"


def test_oracles_parse_with_their_spans():
    decl = parse_text(RMS, "rms.fuse").defs["rms"].decl
    body, vector = decl.oracles
    assert body.body is not None and (body.span.line, body.span.col) == (4, 1)
    assert vector.body is None and (vector.span.line, vector.span.col) == (7, 1)
    assert len(vector.inputs) == 1 and [a.name.text for a in vector.attrs] == ["epsilon"]
    assert isinstance(vector.expected, A.ListE)


def test_a_formula_def_takes_an_oracle_too():
    decl = parse_text("def twice(x) = x + x\noracle ([1.0, -2.0]) => [2.0, -4.0]\n", "f.fuse").defs["twice"].decl
    assert len(decl.oracles) == 1


def test_oracles_print_back_to_the_same_tree():
    rules = parse_text(RMS, "rms.fuse")
    again = parse_text(format_ruleset(rules), "printed.fuse")
    assert again.defs["rms"].decl.oracles == rules.defs["rms"].decl.oracles


CASES = [
    ("vector_arity",
     TWO_INPUTS + "oracle ([1.0]) => [2.0]\n",
     "bad.fuse:4:1: error: the oracle gives 1 input; def 'both' takes 2"),
    ("vector_ragged_input",
     TWO_INPUTS + "oracle ([1.0], [[1], [2, 3]]) => [2.0]\n",
     "bad.fuse:4:16: error: an oracle value must be a number or a rectangular list of numbers"),
    ("vector_string_output",
     TWO_INPUTS + 'oracle ([1.0], [2.0]) => "two"\n',
     "bad.fuse:4:26: error: an oracle value must be a number or a rectangular list of numbers"),
    ("vector_unknown_attribute",
     "def scale(x; alpha=1.0) {\n    return x * alpha\n}\noracle ([1.0]) {alpah=2.0} => [2.0]\n",
     "bad.fuse:4:17: error: def 'scale' has no attribute 'alpah'"),
    ("vector_on_two_outputs",
     "def halves(x) {\n    return x * 0.5, x * 0.5\n}\noracle ([1.0]) => [0.5]\n",
     "bad.fuse:4:1: error: a test-vector oracle needs a def with one output; def 'halves' has 2"),
    ("body_calls_the_def",
     TWO_INPUTS + "oracle {\n    return both(x, y)\n}\n",
     "bad.fuse:5:12: error: the oracle of def 'both' calls 'both': it would check the def against itself"),
    ("body_unknown_name",
     TWO_INPUTS + "oracle {\n    return x * z\n}\n",
     "bad.fuse:5:16: error: unknown variable 'z'"),
    ("body_wrong_output_count",
     TWO_INPUTS + "oracle {\n    return x, y\n}\n",
     "bad.fuse:5:5: error: the oracle of def 'both' returns 2 values; the op has 1 output"),
    ("syntax_oracle_without_body",
     TWO_INPUTS + "oracle\nrewrite r: relu(x) => x\n",
     "bad.fuse:4:7: error: unexpected end of input; expected '{', '('"),
]


@pytest.mark.parametrize("name,source,expected", CASES, ids=[c[0] for c in CASES])
def test_malformed_oracle_is_pinned(name, source, expected):
    with pytest.raises(RuleError) as info:
        parse_text(source, "bad.fuse")
    assert str(info.value.diagnostics[0]) == expected
    assert info.value.exit_code == 2


def test_an_oracle_list_is_under_the_limit_of_every_list(tmp_path, capsys):
    """Oracle test vectors had no size limit (an 8 MB rule file of them loaded); a
    diagnostic on such a line shows a window of it, not its 40,000 characters."""
    from fusionlang.cli import main
    from fusionlang.lang.limits import MAX_LIST_ELEMENTS

    numbers = ",".join(["1.0"] * (MAX_LIST_ELEMENTS + 1))
    rules = tmp_path / "big.fuse"
    rules.write_text(f"def twice(x) = x * 2\n    oracle ([{numbers}]) => [{numbers}]\n")
    with pytest.raises(RuleError) as caught:
        parse_text(rules.read_text(), str(rules))
    first = caught.value.diagnostics[0]
    assert (first.span.line, first.span.col) == (2, 13)
    assert first.message == f"an oracle value holds {MAX_LIST_ELEMENTS + 1} numbers: lists have at most " \
                            f"{MAX_LIST_ELEMENTS} elements"
    assert main(["lint", str(rules)]) == 2
    err = capsys.readouterr().err
    assert max(len(line) for line in err.splitlines()) < 250
