"""lint's policy checks: strategies, their options and cost devices, and fuse-entry
flags and options, against what the partitioner reads (engine.policy_check), each
pinned to file:line:col and text; and the same checks from the `lint` command."""

from __future__ import annotations

import pytest

from fusionlang.cli import main
from fusionlang.engine.policy_check import policy_diagnostics
from fusionlang.lang import load_rules, standard_names


def _diagnostics(tmp_path, text: str) -> list[str]:
    path = tmp_path / "p.fuse"
    path.write_text(text)
    return [f"{d}" + (f" ({d.hint})" if d.hint else "") for d in policy_diagnostics(load_rules(str(path)))]


@pytest.mark.parametrize("name", standard_names())
def test_the_standard_rule_sets_pass(name):
    assert policy_diagnostics(load_rules(name)) == []


CASES = [
    ("pattern_entry_under_tvm",
     'import "tvm.fuse"\nfuse pattern p: relu(exp(x))\n',
     "p.fuse:2:1: error: fuse pattern entries are not supported by the tvm strategy (the apollo strategy groups "
     "pattern matches)"),
    ("unknown_option",
     'import "apollo.fuse"\nstrategy apollo { max_group_bytes = 1024 }\n',
     "p.fuse:2:19: error: unknown option 'max_group_bytes' for strategy 'apollo' (did you mean 'max_ops'?)"),
    ("option_of_another_strategy",
     'import "tvm.fuse"\nstrategy tvm { max_ops = 8 }\n',
     "p.fuse:2:16: error: unknown option 'max_ops' for strategy 'tvm' (did you mean 'max_depth'?)"),
    ("option_without_a_near_name",
     'import "tvm.fuse"\nstrategy tvm { fusion = 8 }\n',
     "p.fuse:2:16: error: unknown option 'fusion' for strategy 'tvm' (options of tvm: anchor, max_depth, "
     "tuple_inputs)"),
    ("option_type",
     'import "apollo.fuse"\nstrategy apollo { max_ops = "many" }\n',
     "p.fuse:2:19: error: option 'max_ops' of strategy 'apollo' expects an integer, got 'many'"),
    ("unknown_cost_device",
     'import "apollo.fuse"\nstrategy apollo { cost = "h10" }\n',
     "p.fuse:2:19: error: unknown cost device 'h10' (did you mean 'h100'?)"),
    ("unknown_strategy",
     'import "apollo.fuse"\nstrategy apolo { max_ops = 8 }\n',
     "p.fuse:2:1: error: unknown strategy 'apolo' (did you mean 'apollo'?)"),
    ("tvm_option_under_apollo",
     'import "apollo.fuse"\nfuse complex -> reduce : complex [path=injective]\n',
     "p.fuse:2:35: error: fuse entry option 'path' is ignored by the apollo strategy (only the tvm strategy "
     "reads it)"),
    ("unknown_entry_option",
     'import "apollo.fuse"\nfuse complex -> reduce : complex [foo=1]\n',
     "p.fuse:2:35: error: fuse entry option 'foo' is ignored by the apollo strategy (apollo reads options: none)"),
    ("flag_under_tvm",
     'import "tvm.fuse"\nfuse opaque -> elemwise : opaque [stitch, path=injective]\n',
     "p.fuse:2:35: error: fuse entry flag 'stitch' is ignored by the tvm strategy (only the apollo and dp "
     "strategies read it)"),
    ("sibling_under_dp",
     'import "dnnfusion.fuse"\nfuse sibling one_to_one, one_to_one : one_to_one\n',
     "p.fuse:2:1: error: sibling entries are ignored by the dp strategy (the apollo strategy merges siblings)"),
    ("nofuse_under_tvm",
     'import "tvm.fuse"\nnofuse injective -> elemwise\n',
     "p.fuse:2:1: error: nofuse entries are not supported by the tvm strategy (the apollo and dp strategies "
     "honour them)"),
]


@pytest.mark.parametrize("text,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_policy_mistakes_are_pinned(tmp_path, text, expected):
    found = _diagnostics(tmp_path, text)
    assert found[0].replace(str(tmp_path) + "/", "") == expected


def test_lint_reports_policy_mistakes_with_exit_status_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.fuse").write_text('import "apollo.fuse"\nstrategy apollo { max_opz = 8, cost = "h10" }\n')
    assert main(["lint", "p.fuse"]) == 2
    err = capsys.readouterr().err
    assert "p.fuse:2:19: error: unknown option 'max_opz' for strategy 'apollo'" in err
    assert "p.fuse:2:32: error: unknown cost device 'h10'" in err
    assert "did you mean 'max_ops'?" in err and "did you mean 'h100'?" in err
