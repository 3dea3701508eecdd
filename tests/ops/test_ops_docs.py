"""docs/ops.md is generated from the registry and must match it."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from fusionlang.ops import REGISTRY

TOOLS = Path(__file__).resolve().parents[2] / "tools"


@pytest.fixture
def generator(monkeypatch):
    monkeypatch.syspath_prepend(str(TOOLS))
    return importlib.import_module("gen_ops_doc")


def test_committed_op_table_is_up_to_date(generator):
    assert generator.DOC_PATH.read_text() == generator.render(), "run: python tools/gen_ops_doc.py"


def test_op_table_lists_every_op_once(generator):
    rows = [line for line in generator.render().splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == REGISTRY.names()


def test_check_mode_reports_a_stale_table(generator, tmp_path, monkeypatch, capsys):
    stale = tmp_path / "ops.md"
    stale.write_text("# old\n")
    monkeypatch.setattr(generator, "DOC_PATH", stale)
    assert generator.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0
