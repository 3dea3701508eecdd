"""Malformed rule files: each is pinned to its first diagnostic (position and message).

Like MLIR PDLL's tests, a case states the exact ``file:line:col: error: message``, so a
change in wording or location is a deliberate change. No case may raise anything but
RuleError (a traceback would mean a crash on bad input).
"""

from __future__ import annotations

import pytest

from fusionlang.errors import FuseError, RuleError
from fusionlang.lang import load_rules, parse_text, render

CAT = "categories a < b < c\n"

CASES = [
    ('syntax_missing_arrow',
     'rewrite r: relu(x) x\n',
     "bad.fuse:1:20: error: unexpected 'x'; expected 'where', '=>'"),
    ('syntax_bad_char',
     'class relu : a $\n',
     "bad.fuse:1:16: error: unexpected character '$'"),
    ('syntax_unclosed_brace',
     'decompose softmax(x; axis) {\n  return x\n',
     "bad.fuse:2:11: error: unexpected end of input; expected ',', a name, '}', 'return'"),
    ('syntax_single_equals_in_guard',
     'rewrite r: relu(x) where rank(x) = 2 => x\n',
     "bad.fuse:1:34: error: unexpected '='"),
    ('syntax_single_quote',
     "import 'std/ops.fuse'\n",
     'bad.fuse:1:8: error: unexpected character "\'"'),
    ('syntax_priority_not_int',
     'rewrite r priority high: relu(x) => x\n',
     "bad.fuse:1:20: error: unexpected 'high'; expected an integer"),
    ('syntax_two_errors',
     'class relu a\nclass exp : a\nrewrite r: => x\n',
     "bad.fuse:1:12: error: unexpected 'a'; expected ':', ','"),
    ('unknown_op_class',
     'categories a < b < c\nclass relux : a\n',
     "bad.fuse:2:7: error: unknown op 'relux'"),
    ('unknown_category_class',
     'categories a < b < c\nclass relu : d\n',
     "bad.fuse:2:14: error: unknown category 'd'"),
    ('unknown_category_fuse',
     'categories a < b < c\nfuse a -> bb : c\n',
     "bad.fuse:2:11: error: unknown category 'bb'"),
    ('no_categories',
     'class relu : elemwise\n',
     "bad.fuse:1:14: error: unknown category 'elemwise'"),
    ('unknown_op_pattern',
     'rewrite r: relux(x) => x\n',
     "bad.fuse:1:12: error: unknown op 'relux'"),
    ('unknown_var_replacement',
     'rewrite r: relu(x) => exp(y)\n',
     "bad.fuse:1:27: error: unknown variable 'y'"),
    ('unknown_var_guard',
     'rewrite r: relu(x) where rank(y) == 2 => x\n',
     "bad.fuse:1:31: error: unknown variable 'y'"),
    ('pattern_arity',
     'rewrite r: relu(x, y) => x\n',
     "bad.fuse:1:12: error: op 'relu' takes 1 input, got 2"),
    ('replacement_arity',
     'rewrite r: relu(x) => add(x)\n',
     "bad.fuse:1:23: error: op 'add' takes 2 inputs, got 1"),
    ('unknown_attr_pattern',
     'rewrite r: reduce_sum(x) {axis=a} => x\n',
     "bad.fuse:1:27: error: op 'reduce_sum' has no attribute 'axis'"),
    ('unknown_attr_replacement',
     'rewrite r: relu(x) => reduce_sum(x) {axis=[1]}\n',
     "bad.fuse:1:38: error: op 'reduce_sum' has no attribute 'axis'"),
    ('missing_required_attr',
     'rewrite r: relu(x) => reshape(x)\n',
     "bad.fuse:1:23: error: op 'reshape' needs attribute 'shape'"),
    ('duplicate_rewrite',
     'rewrite r: relu(x) => x\nrewrite r: exp(x) => x\n',
     "bad.fuse:2:9: error: rewrite 'r' is already defined at bad.fuse:1:1"),
    ('duplicate_def',
     'def f(x) = x * 2\ndef f(x) = x * 3\n',
     "bad.fuse:2:5: error: def 'f' is already defined at bad.fuse:1:1"),
    ('def_redefines_builtin',
     'def relu(x) = max(x, 0)\n',
     "bad.fuse:1:5: error: def 'relu' redefines the built-in op 'relu'"),
    ('reserved_def_name',
     'def int(x) = x\n',
     "bad.fuse:1:5: error: 'int' is reserved: it would clash with generated C/CUDA code"),
    ('duplicate_class',
     'categories a < b < c\nclass relu : a\nclass relu : b\n',
     "bad.fuse:3:7: error: op 'relu' is already classified as a at bad.fuse:2:1"),
    ('duplicate_category',
     'categories a < b < a\n',
     "bad.fuse:1:20: error: category 'a' appears twice in the lattice"),
    ('conflicting_categories',
     'categories a < b < c\ncategories a < c\n',
     'bad.fuse:2:1: error: categories conflict with the lattice declared at bad.fuse:1:1 (a < b < c)'),
    ('shadowed_fuse',
     'categories a < b < c\nfuse a|b -> c : c\nfuse a -> c : b\n',
     'bad.fuse:3:1: error: fuse entry is shadowed: every pair it covers is decided by earlier entries (bad.fuse:2:1)'),
    ('decompose_type_mismatch',
     'decompose softmax(x; axis) {\n  return reduce_max(x) {axes=[axis], keepdims=1}\n}\n',
     "bad.fuse:1:11: error: decomposition of 'softmax' computes f32[2,3,4,1] where the op computes f32[2,3,4,5]"),
    ('rewrite_self_loop',
     'import "std/algebra.fuse"\nrewrite swap: add(x, y) => add(y, x)\n',
     "bad.fuse:2:9: error: rewrite 'swap' can loop: its replacement builds what its own pattern matches"),
    ('rewrite_cycle',
     'rewrite to_exp: relu(x) => exp(x)\nrewrite to_relu: exp(x) => relu(x)\n',
     "bad.fuse:1:9: error: rewrites 'to_exp', 'to_relu' can loop: to_exp -> to_relu -> to_exp"),
    ('decompose_cycle',
     'def f(x) {\n  return g(x)\n}\ndef g(x) {\n  return f(x)\n}\n',
     'bad.fuse:1:1: error: decompositions can loop: f -> g -> f'),
    ('import_not_found',
     'import "nope.fuse"\n',
     "bad.fuse:1:1: error: cannot find import 'nope.fuse'"),
    ('unknown_function_guard',
     'rewrite r: relu(x) where constant(x) => x\n',
     "bad.fuse:1:26: error: unknown function 'constant'"),
    ('predicate_arity',
     'rewrite r: relu(x) where const() => x\n',
     'bad.fuse:1:26: error: const() takes at least 1 argument, got 0'),
    ('duplicate_strategy',
     'strategy s { a = 1 }\nstrategy s { b = 2 }\n',
     "bad.fuse:2:10: error: strategy 's' is already defined at bad.fuse:1:1"),
    ('unknown_formula_function',
     'def f(x) = expp(x)\n',
     "bad.fuse:1:12: error: unknown formula function 'expp'"),
    ('unknown_formula_name',
     'def f(x) = x * y\n',
     "bad.fuse:1:16: error: unknown name 'y' in the formula of 'f'"),
    ('rest_not_bound',
     'rewrite r: conv(x, w) => conv(x, w) {..attrs}\n',
     "bad.fuse:1:40: error: unknown attribute set 'attrs'"),
    ('tensor_as_attr',
     'rewrite r: relu(x) => reduce_sum(x) {axes=x}\n',
     "bad.fuse:1:43: error: tensor 'x' is used as a static value"),
    ('decompose_unknown_op',
     'decompose softmaxx(x) {\n  return x\n}\n',
     "bad.fuse:1:11: error: unknown op 'softmaxx'"),
    ('decompose_arity',
     'decompose softmax(x, y; axis) {\n  return x\n}\n',
     "bad.fuse:1:11: error: op 'softmax' takes 1 input, got 2"),
    ('decompose_return_count',
     'decompose softmax(x; axis) {\n  return x, x\n}\n',
     "bad.fuse:2:3: error: decomposition of 'softmax' returns 2 values; the op has 1 output"),
    ('pattern_root_not_op',
     'rewrite r: x => x\n',
     'bad.fuse:1:12: error: a pattern must start with an op'),
    ('var_tensor_and_attr',
     'rewrite r: reduce_sum(x) {axes=x} => x\n',
     "bad.fuse:1:27: error: variable 'x' is bound both as a tensor and as an attribute"),
    ('def_attr_without_default',
     'def f(x; k) = x * k\n',
     "bad.fuse:1:10: error: attribute 'k' of def 'f' needs a default"),
    ('fuse_unknown_flag',
     'categories a < b < c\nfuse a -> b : b [stich]\n',
     "bad.fuse:2:18: error: unknown fuse flag 'stich'"),
    ('class_unknown_flag',
     'categories a < b < c\nclass add : a, comutative\n',
     "bad.fuse:2:16: error: unknown class flag 'comutative'"),
    ('class_two_categories',
     'categories a < b < c\nclass add : a, b\n',
     "bad.fuse:2:16: error: a class takes one category; 'b' is a second one"),
    ('commutative_unary',
     'class relu : commutative\n',
     "bad.fuse:1:7: error: op 'relu' takes 1 input; only binary and variadic ops can be commutative"),
    ('test_unknown_rule',
     'rewrite r: relu(x) => x\ntest t {\n  input x: f32[2]\n  y = relu(x)\n  output y\n  expect fired(rr) == 1\n}\n',
     "bad.fuse:6:16: error: unknown rewrite 'rr'"),
    ('test_unknown_value',
     'test t {\n  input x: f32[2]\n  y = relu(x)\n  output z\n  expect equivalent\n}\n',
     "bad.fuse:4:10: error: unknown value 'z'"),
    ('test_no_expect',
     'test t {\n  input x: f32[2]\n  y = relu(x)\n  output y\n}\n',
     "bad.fuse:1:6: error: test 't' states no 'expect'"),
    ('test_shape_error',
     'test t {\n  input x: f32[2]\n  input z: f32[3]\n  y = x + z\n  output y\n  expect equivalent\n}\n',
     "bad.fuse:4:7: error: test 't': node 'y_0' (add): shapes [2], [3] do not broadcast"),
    ('test_unknown_dtype',
     'test t {\n  input x: q7[2]\n  y = relu(x)\n  output y\n  expect equivalent\n}\n',
     "bad.fuse:2:12: error: test 't': unknown dtype 'q7'"),
    ('strategy_option_name',
     'strategy s { cost = h100 }\n',
     "bad.fuse:1:21: error: option values are literals; 'h100' is a name"),
    ('fuse_option_category',
     'categories a < b < c\nfuse a -> b : b [path=z]\n',
     "bad.fuse:2:18: error: option 'path' names unknown category 'z'"),
    ('guard_uses_op',
     'rewrite r: relu(x) where relu(x) == 1 => x\n',
     "bad.fuse:1:26: error: op 'relu' cannot compute a static value"),
    ('statement_after_return',
     'def f(x) {\n  return x\n  y = x\n}\n',
     "bad.fuse:3:3: error: statement after 'return' is never reached"),
    ('when_without_category',
     'class relu : commutative when broadcasting\n',
     "bad.fuse:1:1: error: a class with 'when' needs a category"),
    ('accepts_unknown_name',
     'rewrite r accepts overflw: relu(x) => x\n',
     "bad.fuse:1:19: error: a rule cannot accept 'overflw'"),
    ('accepts_unknown_name_in_decompose',
     'decompose softmax(x; axis) accepts overflow, nan {\n  return x\n}\n',
     "bad.fuse:1:46: error: a rule cannot accept 'nan'"),
    ('accepts_nothing',
     'rewrite r accepts: relu(x) => x\n',
     "bad.fuse:1:18: error: unexpected ':'; expected a name"),
]


@pytest.mark.parametrize("name,source,expected", CASES, ids=[c[0] for c in CASES])
def test_first_diagnostic_is_pinned(name, source, expected):
    with pytest.raises(RuleError) as info:
        parse_text(source, "bad.fuse")
    assert str(info.value.diagnostics[0]) == expected
    assert isinstance(info.value, FuseError) and info.value.exit_code == 2


def test_there_are_at_least_25_distinct_cases():
    messages = {c[2].split(": error: ")[1].split("'")[0] for c in CASES}
    assert len(CASES) >= 25 and len(messages) >= 25


@pytest.mark.parametrize("name,source,expected", CASES, ids=[c[0] for c in CASES])
def test_rendering_shows_line_and_caret(name, source, expected):
    with pytest.raises(RuleError) as info:
        parse_text(source, "bad.fuse")
    diag = info.value.diagnostics[0]
    text = render(diag)
    lines = text.splitlines()
    assert lines[0] == str(diag)
    source_line = source.splitlines()[diag.span.line - 1] if diag.span.line <= len(source.splitlines()) else ""
    if source_line:
        assert lines[1].endswith(source_line.rstrip())
        caret_line = lines[2]
        gutter = lines[1].index("| ") + 2
        assert caret_line.index("^") - gutter == diag.span.col - 1
    if diag.hint:
        assert text.endswith(f"= hint: {diag.hint}")


def test_a_test_may_share_the_name_of_an_imported_files_test(tmp_path):
    # test names are namespaced by file: base.fuse::t and top.fuse::t are two tests
    block = "test t {\n    input x: f32[3]\n    y = relu(x)\n    output y\n    expect nodes == 1\n}\n"
    (tmp_path / "base.fuse").write_text(block)
    (tmp_path / "top.fuse").write_text('import "base.fuse"\n' + block)
    rules = load_rules(str(tmp_path / "top.fuse"))
    assert [t.name for t in rules.tests] == ["t", "t"]


def test_a_second_test_of_one_name_in_one_file_is_still_an_error():
    block = "test t {\n    input x: f32[3]\n    y = relu(x)\n    output y\n    expect nodes == 1\n}\n"
    with pytest.raises(RuleError) as info:
        parse_text(block + block, "bad.fuse")
    assert str(info.value.diagnostics[0]) == "bad.fuse:7:6: error: test 't' is already defined at bad.fuse:1:1"
