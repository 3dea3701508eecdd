"""A variadic elementwise op with an omitted input in the middle (ONNX ``Max(a, "", b)``):
inference looks past it, so its access spec must refuse it in words (it used to read the
missing input's shape: an internal error, exit 3)."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from fusionlang.cli import main
from fusionlang.errors import ShapeError
from fusionlang.ir.types import TensorType
from fusionlang.ops import REGISTRY
from fusionlang.ops.registry import OpCall


def test_the_access_spec_names_the_omitted_input():
    t = TensorType((2, 3), "float32")
    opdef = REGISTRY.get("max")
    call = OpCall("max", "n1", opdef.normalize_attrs({}, "n1"), [t, None, t])
    call.out_types = opdef.run_infer(call)
    with pytest.raises(ShapeError, match=r"node 'n1' \(max\): input 1 is required"):
        opdef.access(call)


def test_running_such_a_model_is_a_one_line_error_with_exit_2(tmp_path, capsys):
    values = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("a", "b", "z")]
    node = helper.make_node("Max", ["a", "", "b"], ["z"])
    model = helper.make_model(helper.make_graph([node], "g", values[:2], values[2:]),
                              opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "max.onnx"
    path.write_bytes(model.SerializeToString())
    assert main(["run", str(path), "--random-inputs", "0"]) == 2
    assert capsys.readouterr().err.strip() == "fusionlang: error: node 'Max#0' (max): input 1 is required"
