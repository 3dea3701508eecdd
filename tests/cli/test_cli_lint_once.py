"""`fusionlang lint A B`: a warning about a rule in a file both import is printed once, at
the rule's own file:line:col, not once per importing file."""

from __future__ import annotations

from fusionlang.cli import main

SHARED = 'import "apollo.fuse"\nrewrite to_silu: mul(x, sigmoid(x)) => silu(x)\n'


def test_a_warning_of_an_imported_rule_is_reported_once(tmp_path, capsys):
    (tmp_path / "shared.fuse").write_text(SHARED)
    for name in ("a.fuse", "b.fuse"):
        (tmp_path / name).write_text('import "shared.fuse"\n')
    assert main(["lint", str(tmp_path / "a.fuse"), str(tmp_path / "b.fuse")]) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if ": warning: " in line]
    assert warnings == [f"{tmp_path / 'shared.fuse'}:2:9: warning: rewrite 'to_silu' ({tmp_path / 'shared.fuse'}:2) "
                        f"is undone: it builds 'silu', which decompose silu (decompose.fuse:27) opens again"]
    assert captured.out.strip() == "2 file(s): 0 error(s), 1 warning(s)"
