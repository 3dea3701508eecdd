"""A copy of the rules tree outside the installed package (a checkout next to an installed
fusionlang) loads from itself: its std files' imports never reach the installed copies,
which would define every def twice ("def 'variance' is already defined at ...")."""

from __future__ import annotations

import shutil

import pytest

from fusionlang.cli import main
from fusionlang.lang import lint, load_rules, rules_dir


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkout")
    shutil.copytree(rules_dir(), root / "rules")
    (root / "link").symlink_to(root / "rules")  # the repository's `rules` symlink
    return root


def copied_files(checkout) -> list[str]:
    return sorted(map(str, [*(checkout / "rules").glob("*.fuse"), *(checkout / "rules" / "std").glob("*.fuse")]))


def test_every_copied_file_lints_clean(checkout):
    assert [str(d) for d in lint(copied_files(checkout))] == []


@pytest.mark.parametrize("name", ["tvm.fuse", "std/compound.fuse"])
def test_a_copied_rule_set_is_made_of_the_copies_only(checkout, name):
    files = load_rules(str(checkout / "rules" / name)).files
    assert files and all(f.startswith(str(checkout / "rules")) for f in files)


def test_check_of_policies_with_the_std_files_they_import(checkout, capsys):
    # the same std file named on the command line, through a symlink and by an import
    files = copied_files(checkout) + sorted(map(str, (checkout / "link").glob("*.fuse")))
    assert main(["check", "--kinds", "fuse,strategy", "--examples", "3", *files]) == 0
    assert "already defined" not in capsys.readouterr().err
