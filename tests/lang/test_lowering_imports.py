"""``import "x.fuse" for lowering``: a file loaded as a rule set of its own, whose
decompositions open only what partitioning kept whole; its errors are located like any
other import's."""

from __future__ import annotations

import pytest

from fusionlang.cli import main
from fusionlang.errors import RuleError
from fusionlang.lang import lint, load_rules
from fusionlang.lang.loader import parse_text
from fusionlang.lang.printer import format_ruleset


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def only_error(path):
    with pytest.raises(RuleError) as info:
        load_rules(str(path))
    (diag,) = info.value.diagnostics
    return diag


def test_a_lowering_import_is_a_rule_set_of_its_own(tmp_path):
    rules = load_rules(str(write(tmp_path, "p.fuse", 'import "std/ops.fuse"\nimport "decompose.fuse" for lowering\n')))
    assert rules.lowering == (load_rules("decompose"),)
    # nothing of it joins the importer: the rewrite does not open softmax with it
    assert "softmax" not in rules.decompositions and "softmax" in rules.lowering[0].decompositions
    assert not any(f.endswith("decompose.fuse") for f in rules.files)


def test_the_ops_a_lowering_builds_are_known_to_the_importer():
    # tvm keeps attention whole; decompose.fuse opens it into soft_cap and guarded_softmax,
    # ops tvm's own files never define, inside a graph carrying tvm's registry
    tvm = load_rules("tvm")
    assert "soft_cap" not in tvm.defs
    assert {"soft_cap", "guarded_softmax"} <= set(tvm.registry.names())
    assert tvm.registry.get("soft_cap") is tvm.lowering[0].registry.get("soft_cap")


def test_a_purpose_other_than_lowering_is_a_located_error(tmp_path):
    diag = only_error(write(tmp_path, "p.fuse", '\nimport "decompose.fuse" for inlining\n'))
    assert (diag.span.line, diag.span.col) == (2, 29)
    assert diag.message == "unexpected 'inlining'; expected 'lowering'"


def test_lowering_stays_a_name_outside_the_import(tmp_path):
    path = write(tmp_path, "p.fuse", 'def lowering(x, y) = x * y\nclass lowering : commutative\n')
    assert "lowering" in load_rules(str(path)).defs


def test_a_missing_lowering_file_is_an_error_at_its_import(tmp_path):
    diag = only_error(write(tmp_path, "p.fuse", 'import "std/ops.fuse"\nimport "nowhere.fuse" for lowering\n'))
    assert (diag.span.line, diag.span.col) == (2, 1)
    assert diag.message == "cannot find import 'nowhere.fuse'"


def test_an_error_inside_a_lowering_file_is_located_in_that_file(tmp_path):
    write(tmp_path, "broken.fuse", "decompose softmax(x; axis) {\n    return x +\n}\n")
    path = write(tmp_path, "p.fuse", 'import "broken.fuse" for lowering\n')
    with pytest.raises(RuleError) as info:
        load_rules(str(path))
    assert info.value.diagnostics and all(d.span.file.endswith("broken.fuse") for d in info.value.diagnostics)
    assert [d.span.line for d in lint([path])] == [d.span.line for d in info.value.diagnostics]


def test_a_cycle_of_lowering_imports_is_an_error_not_a_recursion(tmp_path):
    write(tmp_path, "a.fuse", 'import "b.fuse" for lowering\n')
    write(tmp_path, "b.fuse", 'import "a.fuse" for lowering\n')
    with pytest.raises(RuleError) as info:
        load_rules(str(tmp_path / "a.fuse"))
    a, b = str(tmp_path / "a.fuse"), str(tmp_path / "b.fuse")
    assert [d.message for d in info.value.diagnostics] == [f"import cycle through lowering imports: {a} -> {b} -> {a}"]


def test_the_printer_keeps_the_lowering_import():
    tvm = load_rules("tvm")
    text = format_ruleset(tvm)
    assert 'import "decompose.fuse" for lowering' in text.splitlines()
    assert parse_text(text) == tvm
    without = parse_text(text.replace('import "decompose.fuse" for lowering\n', ""))
    assert without.lowering == () and without != tvm


def test_lint_reports_a_bad_lowering_import_with_exit_2(tmp_path, capsys):
    path = write(tmp_path, "p.fuse", 'import "decompose.fuse" for fun\n')
    assert main(["lint", str(path)]) == 2
    assert "p.fuse:1:29: error: unexpected 'fun'; expected 'lowering'" in capsys.readouterr().err
