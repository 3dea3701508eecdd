"""Names from a model reach the terminal escaped: no escape sequence, carriage return or
bidirectional override from a model is written raw by run, explain, fuse or an error."""

from __future__ import annotations

import json
import re

import onnx
import pytest
from cli_helpers import run_cli
from onnx import TensorProto, helper

from fusionlang.cli import main
from fusionlang.cli.text import safe

RED = "\x1b[31m"
EVIL = f"{RED}n\r\u202e"  # a color, a carriage return, a right-to-left override
SHOWN = "\\x1b[31mn\\r\\u202e"
RAW = re.compile("[\x1b\r\u202e\x9b]")


def evil_model(path, op_type="Relu") -> str:
    """x -> relu -> exp -> y, where the relu node and its output are named EVIL + ..."""
    nodes = [helper.make_node(op_type, ["x"], [f"{EVIL}v"], name=f"{EVIL}relu"),
             helper.make_node("Exp", [f"{EVIL}v"], [f"{EVIL}y"], name="exp")]
    graph = helper.make_graph(nodes, f"{EVIL}graph", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info(f"{EVIL}y", TensorProto.FLOAT, [2, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return evil_model(tmp_path_factory.mktemp("escapes") / "evil.onnx")


@pytest.mark.parametrize("text, shown", [
    (EVIL, SHOWN), ("tab\tand\nnewline", "tab\tand\nnewline"), ("\x00\x7f\x9b\u2028\ud800", "\\x00\\x7f\\x9b\\u2028\\ud800"),
    ("ünïcode → ok", "ünïcode → ok"),
])
def test_safe(text, shown):
    assert safe(text) == shown
    assert safe(text, newlines=False) == shown.replace("\n", "\\n")


@pytest.mark.parametrize("argv", [
    ["run", "{model}", "--random-inputs", "0", "--check"],
    ["explain", "{model}", "--node", f"{EVIL}relu"],
    ["fuse", "{model}", "-v"],
])
def test_names_are_escaped_in_text_output(capsys, model, argv):
    assert main([a.format(model=model) for a in argv]) == 0
    out, err = capsys.readouterr()
    assert not RAW.search(out + err)
    assert SHOWN in out


def test_names_are_escaped_through_a_pipe(model):
    result = run_cli("run", model, "--random-inputs", "0")
    assert result.returncode == 0, result.stderr
    assert not RAW.search(result.stdout + result.stderr)
    assert f"{SHOWN}y: float32[2, 3]" in result.stdout


def test_json_keeps_the_names_exact(capsys, model):
    assert main(["--json", "run", model, "--random-inputs", "0"]) == 0
    out = capsys.readouterr().out
    assert not RAW.search(out)
    assert list(json.loads(out)["outputs"]) == [f"{EVIL}y"]


def test_an_error_naming_an_op_from_the_model_is_escaped(capsys, tmp_path):
    bad = evil_model(tmp_path / "bad.onnx", op_type=f"{RED}Evil\r")
    assert main(["fuse", bad]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and not RAW.search(err)
    assert err.startswith("fusionlang: error: ") and "\\x1b[31mEvil\\r" in err


def test_an_unknown_node_is_escaped(capsys, model):
    assert main(["explain", model, "--node", f"{RED}nope\r"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and not RAW.search(err)


def test_demo_escapes_a_rule_file_name(capsys, tmp_path):
    rules = tmp_path / f"{RED}rules\r.fuse"
    rules.write_text('import "apollo.fuse"\n')
    report = tmp_path / f"{RED}report.html"
    assert main(["demo", "--repeat", "1", "--rules", str(rules), "--report", str(report)]) == 0
    out, err = capsys.readouterr()
    assert not RAW.search(out + err)
    assert "rules \\x1b[31mrules\\r" in out and f"wrote {safe(str(report))}" in out


def test_a_diagnostic_keeps_each_field_on_its_line(capsys, model, tmp_path):
    missing = tmp_path / f"two\nlines{RED}.fuse"
    assert main(["fuse", model, "--rules", str(missing)]) == 2
    out, err = capsys.readouterr()
    shown = safe(str(missing), newlines=False)
    assert out == "" and not RAW.search(err)
    assert err.splitlines()[0] == f"{shown}:1:1: error: no rule file or rule set named {str(missing)!r}"
    assert len(err.splitlines()) == 2 and err.splitlines()[1].startswith("     = hint: standard rule sets: ")


def test_a_mismatch_line_is_escaped(capsys, model, monkeypatch):
    import fusionlang.cli.run

    # a real mismatch needs a wrong compiler; the line printed for one is what is checked
    monkeypatch.setattr(fusionlang.cli.run, "compare", lambda outputs, *a: [f"{EVIL}y\nz: max abs error 1"])
    assert main(["run", model, "--random-inputs", "0", "--check"]) == 1
    err = capsys.readouterr().err
    assert err == f"fusionlang: mismatch: {SHOWN}y\\nz: max abs error 1\n"
