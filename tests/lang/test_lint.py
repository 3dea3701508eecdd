"""`lint` (API and CLI): several errors per run, exit status 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fusionlang.errors import RuleError
from fusionlang.lang import lint, load_rules, render, standard_names
from fusionlang.lang.loader import rules_dir


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_every_standard_rule_file_lints_clean():
    import os

    files = []
    for folder, _, names in os.walk(rules_dir()):
        files += [os.path.join(folder, n) for n in names if n.endswith(".fuse")]
    assert len(files) == len(standard_names()) >= 10
    assert lint(files) == []


def test_several_errors_in_one_run(tmp_path):
    path = write(tmp_path, "bad.fuse", "categories a < b\nclass relux : a\nclass relu : c\n"
                                        "rewrite r: relu(x) => exp(y)\n")
    diags = lint([path])
    assert [(d.span.line, d.span.col) for d in diags] == [(2, 7), (3, 14), (4, 27)]
    assert all(d.severity == "error" for d in diags)


def test_syntax_errors_in_several_items(tmp_path):
    path = write(tmp_path, "bad.fuse", "class relu a\nclass exp : a\nrewrite r: => x\nfuse a -> : b\n")
    diags = lint([path])
    assert [d.span.line for d in diags] == [1, 3, 4]


def test_import_cycle(tmp_path):
    write(tmp_path, "a.fuse", 'import "b.fuse"\n')
    write(tmp_path, "b.fuse", 'import "a.fuse"\n')
    with pytest.raises(RuleError) as info:
        load_rules(str(tmp_path / "a.fuse"))
    diag = info.value.diagnostics[0]
    a, b = str(tmp_path / "a.fuse"), str(tmp_path / "b.fuse")
    assert diag.message == f"import cycle: {a} -> {b} -> {a}"
    assert (diag.span.file, diag.span.line, diag.span.col) == (b, 1, 1)


def test_imports_resolve_relative_to_the_importing_file_then_the_library(tmp_path):
    sub = tmp_path / "policy"
    sub.mkdir()
    write(sub, "mine.fuse", 'import "std/ops.fuse"\nimport "helpers.fuse"\nfuse elemwise -> elemwise : elemwise\n')
    write(sub, "helpers.fuse", "rewrite drop: identity(x) => x\n")
    rules = load_rules(str(sub / "mine.fuse"))
    assert [r.name for r in rules.rewrites] == ["drop"]
    assert rules.category_of("relu") == "elemwise"
    assert rules.files[-1].endswith("mine.fuse") and "std/ops.fuse" in rules.files


def test_unknown_rule_set_name():
    with pytest.raises(RuleError) as info:
        load_rules("apolo")
    assert "no rule file or rule set named 'apolo'" in str(info.value)


def test_warning_for_partial_overlap_does_not_fail_loading(tmp_path):
    path = write(tmp_path, "w.fuse", "categories a < b < c\nfuse a -> b : b\nfuse a|c -> b|c : c\n")
    diags = lint([path])
    assert [str(d) for d in diags] == [f"{path}:3:1: warning: pair a -> b is decided by the earlier entry "
                                       f"at {path}:2:1 (result b, not c)"]
    assert load_rules(str(path)).fuse_result("a", "b").result == "b"


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "fusionlang", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def test_cli_lint_exit_codes(tmp_path):
    good = write(tmp_path, "good.fuse", "rewrite drop: identity(x) => x\n")
    bad = write(tmp_path, "bad.fuse", "rewrite drop: identiti(x) => x\nrewrite r: relu(x) => y\n")
    ok = run_cli("lint", str(good), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    failed = run_cli("lint", str(bad), cwd=tmp_path)
    assert failed.returncode == 2
    assert "Traceback" not in failed.stderr + failed.stdout
    assert "bad.fuse:1:15: error: unknown op 'identiti'" in failed.stderr
    assert "bad.fuse:2:23: error: unknown variable 'y'" in failed.stderr
    assert "^" in failed.stderr


def test_render_without_source_is_one_line():
    from fusionlang.lang import Diagnostic, Span

    diag = Diagnostic(Span("nowhere.fuse", 3, 4), "error", "boom", "try again")
    assert render(diag) == "nowhere.fuse:3:4: error: boom\n     = hint: try again"
