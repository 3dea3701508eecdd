"""`check --rule` takes a rule's name as the output prints it, ``file.fuse::name``, or a
plain name that only one file's rule has; an ambiguous or unknown name is a one-line
error (exit 2) that checked nothing (issue 36)."""

from __future__ import annotations

import pytest

from fusionlang.cli import main

BASE = """\
import "std/ops.fuse"

rewrite drop_neg: neg(neg(x)) => x

test twice {
    input x: f32[2, 3]
    y = exp(exp(x))
    output y
    expect count(exp) == 2
}
"""

TOP = """\
import "base.fuse"

rewrite drop_relu: relu(relu(x)) => relu(x)

test twice {
    input x: f32[2, 3]
    y = relu(relu(x))
    output y
    expect count(relu) == 1
}
"""


@pytest.fixture
def top(tmp_path, monkeypatch):
    (tmp_path / "base.fuse").write_text(BASE)
    (tmp_path / "top.fuse").write_text(TOP)
    monkeypatch.chdir(tmp_path)
    return "top.fuse"


def _check(top, capsys, *rules) -> tuple[int, str, str]:
    status = main(["check", top, "--examples", "5", *[a for r in rules for a in ("--rule", r)]])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_a_namespaced_name_picks_the_rule_of_that_file(top, capsys):
    status, out, _ = _check(top, capsys, "base.fuse::twice")
    assert status == 0 and out.splitlines()[0] == "base.fuse:5: test base.fuse::twice: checked (1 instances)"
    assert "top.fuse::twice" not in out
    status, out, _ = _check(top, capsys, "top.fuse::twice", "base.fuse::drop_neg")
    assert status == 0 and [line.split(": ")[1] for line in out.splitlines() if line[:1] != " "][:2] == [
        "rewrite drop_neg", "test top.fuse::twice"]


def test_a_path_before_the_colons_is_read_as_its_file_name(top, tmp_path, capsys):
    status, out, _ = _check(top, capsys, f"{tmp_path / 'top.fuse'}::drop_relu")
    assert status == 0 and out.startswith("top.fuse:3: rewrite drop_relu: ")


def test_a_plain_name_that_one_file_has_still_works(top, capsys):
    status, out, _ = _check(top, capsys, "drop_neg")
    assert status == 0 and out.startswith("base.fuse:3: rewrite drop_neg: ")


def test_a_plain_name_of_several_files_is_refused_with_the_candidates(top, capsys):
    status, out, err = _check(top, capsys, "twice")
    assert status == 2 and out == ""
    assert err == ("fusionlang: error: --rule: 'twice' names rules of several files (base.fuse::twice, "
                   "top.fuse::twice); nothing was checked (name one as FILE::NAME)\n")


def test_an_unknown_namespaced_name_is_refused_with_close_matches(top, capsys):
    status, out, err = _check(top, capsys, "top.fuse::drop_neg")
    assert status == 2 and out == ""
    assert err == ("fusionlang: error: --rule: unknown rule 'top.fuse::drop_neg'; nothing was checked "
                   "(did you mean 'top.fuse::drop_relu' or 'base.fuse::drop_neg' or 'top.fuse::twice'?)\n")


def test_an_unknown_plain_name_is_refused_with_close_matches(top, capsys):
    status, out, err = _check(top, capsys, "drop_nag")
    assert status == 2 and out == ""
    assert err == "fusionlang: error: --rule: unknown rule 'drop_nag'; nothing was checked (did you mean 'drop_neg'?)\n"
