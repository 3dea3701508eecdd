"""`fuse pattern` entries and `import ... without decompose`: syntax, the rule set they make,
printing, and every new diagnostic pinned with its file:line:col (and exit code 2)."""

from __future__ import annotations

import pytest

from fusionlang.errors import RuleError
from fusionlang.lang import format_ruleset, load_rules, parse_text

CAT = "import \"std/ops.fuse\"\n"

CASES = [
    ("without_unknown_op",
     'import "apollo.fuse" without decompose softmax, rms_nrom\n',
     "bad.fuse:1:49: error: unknown op 'rms_nrom'"),
    ("without_an_op_nothing_decomposes",
     'import "apollo.fuse" without decompose relu\n',
     "bad.fuse:1:40: error: no decomposition of 'relu' to drop"),
    ("pattern_unknown_op",
     CAT + "fuse pattern p: matmul(rms_nrom(x, g), w)\n",
     "bad.fuse:2:24: error: unknown op 'rms_nrom'"),
    ("pattern_not_an_op",
     CAT + "fuse pattern p: x\n",
     "bad.fuse:2:17: error: a pattern must start with an op"),
    ("pattern_unknown_category",
     CAT + "fuse pattern p: matmul(x, w) as complx\n",
     "bad.fuse:2:33: error: unknown category 'complx'"),
    ("pattern_guard_unknown_variable",
     CAT + "fuse pattern p: matmul(x, w) where rank(y) == 2\n",
     "bad.fuse:2:41: error: unknown variable 'y'"),
    ("pattern_defined_twice",
     CAT + "fuse pattern p: matmul(x, w)\nfuse pattern p: relu(x)\n",
     "bad.fuse:3:14: error: fuse pattern 'p' is already defined at bad.fuse:2:1"),
    ("pattern_missing_colon",
     CAT + "fuse pattern p matmul(x, w)\n",
     "bad.fuse:2:16: error: unexpected 'matmul'; expected ':'"),
]


@pytest.mark.parametrize("name,source,expected", CASES, ids=[c[0] for c in CASES])
def test_each_diagnostic_is_pinned(name, source, expected):
    with pytest.raises(RuleError) as info:
        parse_text(source, "bad.fuse")
    assert str(info.value.diagnostics[0]) == expected
    assert info.value.exit_code == 2


def test_a_pattern_entry_keeps_its_guard_result_and_span():
    rules = parse_text(CAT + "fuse pattern gated: matmul(x, w) where rank(w) == 2 as complex\n", "ok.fuse")
    (entry,) = rules.fuse_patterns
    assert (entry.name, entry.result, entry.root_op, entry.where) == ("gated", "complex", "matmul", "ok.fuse:2")
    assert parse_text(CAT + "fuse pattern gated: matmul(x, w)\n", "ok.fuse").fuse_patterns[0].result is None


def test_without_decompose_keeps_the_op_whole_while_rewriting_and_lowers_it_with_the_import():
    apollo = load_rules("apollo")
    rules = parse_text('import "apollo.fuse" without decompose softmax\n', "ext.fuse")
    assert "softmax" in apollo.decompositions and "softmax" not in rules.decompositions
    assert "log_softmax" in rules.decompositions  # only the named op is dropped
    assert [r.files[-1] for r in rules.lowering] == ["apollo.fuse"]


def test_the_shipped_extension_prints_and_parses_back_equal():
    rules = load_rules("apollo_patterns")
    assert [p.name for p in rules.fuse_patterns] == ["attention_block", "rms_norm_matmul", "masked_attention_block",
                                                   "product_attention_block", "masked_product_attention_block",
                                                   "scaled_qk_attention_block", "scaled_qk_biased_attention_block",
                                                   "scaled_qk_two_mask_attention_block",
                                                   "scaled_qk_window_attention_block", "guarded_attention_block",
                                                   "row_guarded_attention_block", "row_guarded_masked_attention_block",
                                                   "masked_fill_attention_block"]
    text = format_ruleset(rules)
    assert "fuse pattern rms_norm_matmul: matmul(rms_norm(x, g), w) as complex" in text
    assert 'import "apollo.fuse" for lowering' in text
    assert parse_text(text, "printed.fuse") == rules


def test_imported_tests_of_a_dropped_decomposition_stay_with_their_rule_set():
    # std/compound.fuse's softmax_opens expects softmax opened: it states what apollo does
    names = {t.name for t in load_rules("apollo_patterns").tests}
    assert "softmax_opens" in {t.name for t in load_rules("apollo").tests}
    assert "softmax_opens" not in names and "attention_block_is_one_kernel" in names


LATTICE = "elemwise < broadcast < injective < reduce < complex < opaque"


def test_an_extension_inserts_a_category_into_the_imported_lattice(tmp_path):
    path = tmp_path / "composite.fuse"
    path.write_text('import "apollo.fuse"\n'
                    "categories elemwise < broadcast < injective < reduce < complex < composite < opaque\n"
                    "fuse pattern relu_matmul: matmul(relu(x), w) as composite\n"
                    "fuse composite -> elemwise : composite\n")
    rules = parse_text(path.read_text(), str(path))
    assert rules.categories[-2:] == ("composite", "opaque") and rules.top == "opaque"
    assert rules.fuse_patterns[0].result == "composite"
    assert rules.fuse_result("composite", "elemwise").result == "composite"


def test_an_extension_may_not_reorder_the_imported_lattice(tmp_path):
    path = tmp_path / "reordered.fuse"
    path.write_text('import "apollo.fuse"\ncategories broadcast < elemwise < injective < reduce < complex < opaque '
                    "< composite\n")
    with pytest.raises(RuleError) as info:
        parse_text(path.read_text(), str(path))
    assert str(info.value.diagnostics[0]) == (f"{path}:2:1: error: categories conflict with the lattice declared at "
                                              f"std/ops.fuse:12:1 ({LATTICE})")
