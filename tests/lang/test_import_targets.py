"""Imports name .fuse files only, and a rule file that cannot be read is a located
error that quotes none of its content (never an OSError, exit 3, or a hang)."""

from __future__ import annotations

import builtins
import os

import pytest

from fusionlang.cli import main
from fusionlang.errors import RuleError
from fusionlang.lang import lint, load_rules

SECRET = "root:$6$secret-hash:19000:0:99999:7:::"


def _importer(tmp_path, target: str):
    path = tmp_path / "main.fuse"
    path.write_text(f'\nimport "{target}"\n')
    return path


def _single_error(path):
    (diag,) = lint([path])
    assert (diag.span.line, diag.span.col) == (2, 1)
    with pytest.raises(RuleError) as info:
        load_rules(str(path))
    assert [str(d) for d in info.value.diagnostics] == [str(diag)]
    return diag


@pytest.mark.parametrize("name", ["shadow", "notes.txt", "rules.fuse.bak", "rules.FUSE"])
def test_import_of_anything_but_a_fuse_file_is_refused_unread(tmp_path, monkeypatch, name):
    secret = tmp_path / name
    secret.write_text(SECRET + "\n")
    opened = []
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda file, *a, **k: opened.append(os.fspath(file)) or
                        real_open(file, *a, **k))
    diag = _single_error(_importer(tmp_path, str(secret)))
    assert diag.message == f"import {str(secret)!r} does not name a .fuse file"
    assert str(secret) not in opened and "secret-hash" not in diag.render()


def test_import_of_proc_self_mem_is_refused(tmp_path, capsys):
    path = _importer(tmp_path, "/proc/self/mem")
    assert _single_error(path).message == "import '/proc/self/mem' does not name a .fuse file"
    assert main(["lint", str(path)]) == 2
    assert "main.fuse:2:1: error: import '/proc/self/mem' does not name a .fuse file" in capsys.readouterr().err


def _unreadable_cases(tmp_path):
    (tmp_path / "folder.fuse").mkdir()
    (tmp_path / "binary.fuse").write_bytes(b"\xff" + SECRET.encode())
    os.symlink("/dev/zero", tmp_path / "zero.fuse")
    os.mkfifo(tmp_path / "pipe.fuse")
    if os.path.exists("/proc/self/mem"):
        os.symlink("/proc/self/mem", tmp_path / "mem.fuse")
    return {"folder.fuse": "it is a directory", "binary.fuse": "it is not UTF-8 text (byte 0)",
            "zero.fuse": "it is not a regular file", "pipe.fuse": "it is not a regular file",
            "mem.fuse": "it is not a .fuse file (rule files are named NAME.fuse)"}


def test_unreadable_fuse_imports_are_located_errors_without_content(tmp_path, capsys):
    for name, reason in _unreadable_cases(tmp_path).items():
        if not os.path.lexists(tmp_path / name):
            continue
        path = _importer(tmp_path, name)
        diag = _single_error(path)
        assert diag.message.startswith("cannot read '") and diag.message.endswith(f"': {reason}"), name
        assert "secret" not in diag.render()
        assert main(["lint", str(path)]) == 2
        err = capsys.readouterr().err
        assert "main.fuse:2:1: error: cannot read" in err and "internal error" not in err


def test_unreadable_root_file_is_a_located_error(tmp_path, capsys):
    (tmp_path / "binary.fuse").write_bytes(b"\xff" + SECRET.encode())
    path = tmp_path / "binary.fuse"
    (diag,) = lint([path])
    assert str(diag) == f"{path}:1:1: error: cannot read {str(path)!r}: it is not UTF-8 text (byte 0)"
    with pytest.raises(RuleError):
        load_rules(str(path))
    assert main(["check", str(path)]) == 2
    assert "secret" not in capsys.readouterr().err


def test_a_file_not_named_fuse_is_never_read_so_never_quoted(tmp_path, capsys):
    """`lint /etc/shadow` printed the file's first line under the caret."""
    secret = tmp_path / "shadow"
    secret.write_text(f"root:{SECRET}:19000:0:99999:7:::\n")
    for argv in (["lint", str(secret)], ["fuse", "no-model.onnx", "--rules", str(secret)]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert SECRET not in out + err and "root:" not in out + err
    assert main(["lint", str(secret)]) == 2
    assert "it is not a .fuse file" in capsys.readouterr().err


def test_a_byte_order_mark_is_dropped(tmp_path, capsys):
    rules = tmp_path / "bom.fuse"
    rules.write_bytes("\ufeffimport \"apollo.fuse\"\nrewrite drop: identity(x) => x\n".encode())
    assert main(["lint", str(rules)]) == 0, capsys.readouterr().err
