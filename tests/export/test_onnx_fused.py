"""The fused ONNX model (fusionlang.export): valid for onnx.checker, run by onnxruntime with
the original model's outputs, one local function per kernel group whose doc string names
the .fuse lines that formed it, and an original node opened into several groups kept whole."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusionlang
from fusionlang.engine.plan import FusionPlan, make_groups
from fusionlang.errors import InputError, ModelError
from fusionlang.export import FUSED_DOMAIN, fused_onnx, onnx_fused, save_fused_onnx
from fusionlang.ops import GraphBuilder

EXPORTS_DIR = Path(__file__).resolve().parents[1] / "data" / "exports"
F32 = TensorProto.FLOAT


def _info(name, shape, elem=F32):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "m", [_info(n, s) for n, s in inputs.items()],
                              [_info(n, s) for n, s in outputs.items()],
                              [numpy_helper.from_array(v, n) for n, v in dict(inits).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    return model


def cnn_model() -> onnx.ModelProto:
    """Two conv-BN-ReLU blocks with a residual Add, an Identity the import removes, and an
    unnamed Flatten (named "Flatten#8" in provenance) and a Gemm head."""
    rng = np.random.default_rng(0)
    inits = {}
    nodes = []
    for k, source in enumerate(["x", "r0"]):
        inits |= {f"w{k}": rng.standard_normal((4, 4 if k else 3, 3, 3)).astype(np.float32) * 0.3,
                  f"g{k}": rng.uniform(0.5, 1.5, 4).astype(np.float32),
                  f"b{k}": rng.standard_normal(4).astype(np.float32),
                  f"m{k}": rng.standard_normal(4).astype(np.float32),
                  f"v{k}": rng.uniform(0.5, 2, 4).astype(np.float32)}
        nodes += [helper.make_node("Conv", [source, f"w{k}"], [f"c{k}"], name=f"conv{k}", pads=[1, 1, 1, 1]),
                  helper.make_node("BatchNormalization", [f"c{k}", f"g{k}", f"b{k}", f"m{k}", f"v{k}"], [f"n{k}"],
                                   name=f"bn{k}"),
                  helper.make_node("Relu", [f"n{k}"], [f"r{k}"], name=f"relu{k}")]
    inits |= {"fc": rng.standard_normal((64 * 4, 5)).astype(np.float32) * 0.1, "fcb": np.ones(5, np.float32)}
    nodes += [helper.make_node("Add", ["r0", "r1"], ["s"], name="residual"),
              helper.make_node("Identity", ["s"], ["s_id"], name="same"),
              helper.make_node("Flatten", ["s_id"], ["flat"]),
              helper.make_node("Gemm", ["flat", "fc", "fcb"], ["y"], name="head")]
    return _model(nodes, {"x": [1, 3, 8, 8]}, {"y": [1, 5]}, inits)


def loop_if_model() -> onnx.ModelProto:
    """acc += tanh(x) * iter for 3 iterations (a Loop the import unrolls, its body reading x
    from outside), then an If on a constant condition (inlined), then a Relu."""
    body_nodes = [helper.make_node("Cast", ["iter"], ["fiter"], to=F32),
                  helper.make_node("Tanh", ["x"], ["t"]),
                  helper.make_node("Mul", ["t", "fiter"], ["step"]),
                  helper.make_node("Add", ["acc_in", "step"], ["acc_out"]),
                  helper.make_node("Identity", ["cond_in"], ["cond_out"])]
    body = helper.make_graph(body_nodes, "body",
                             [_info("iter", [], TensorProto.INT64), _info("cond_in", [], TensorProto.BOOL),
                              _info("acc_in", [2, 3])],
                             [_info("cond_out", [], TensorProto.BOOL), _info("acc_out", [2, 3])])
    then_branch = helper.make_graph([helper.make_node("Exp", ["acc"], ["e"])], "then", [], [_info("e", [2, 3])])
    else_branch = helper.make_graph([helper.make_node("Neg", ["acc"], ["o"])], "else", [], [_info("o", [2, 3])])
    nodes = [helper.make_node("Loop", ["M", "cond", "acc0"], ["acc"], name="loop", body=body),
             helper.make_node("If", ["cond"], ["picked"], name="pick", then_branch=then_branch,
                              else_branch=else_branch),
             helper.make_node("Relu", ["picked"], ["y"], name="relu")]
    inits = {"M": np.array(3, np.int64), "cond": np.array(True), "acc0": np.zeros((2, 3), np.float32)}
    return _model(nodes, {"x": [2, 3]}, {"y": [2, 3]}, inits, opset=13)


def export_model(name: str) -> onnx.ModelProto:
    return onnx.load(EXPORTS_DIR / f"{name}.onnx")


def feeds_for(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    initialized = {t.name for t in model.graph.initializer}
    feeds = {}
    for info in model.graph.input:
        if info.name not in initialized:
            shape = [d.dim_value for d in info.type.tensor_type.shape.dim]
            dtype = helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)
            feeds[info.name] = rng.integers(0, 2, shape).astype(dtype) if dtype.kind in "iub" else \
                rng.standard_normal(shape).astype(dtype)
    return feeds


def saved_feeds(name: str) -> dict[str, np.ndarray]:
    sample = np.load(EXPORTS_DIR / f"{name}.npz")
    return {key[3:]: sample[key] for key in sample.files if key.startswith("in:")}


def run_ort(model: onnx.ModelProto, feeds) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


MODELS = {"cnn": (cnn_model, feeds_for), "loop_if": (loop_if_model, feeds_for),
          "bert": (lambda: export_model("bert"), lambda m: saved_feeds("bert")),
          "gpt2_opset23": (lambda: export_model("gpt2_opset23"), lambda m: saved_feeds("gpt2_opset23"))}


@pytest.mark.parametrize("rules, feedback", [("apollo", False), ("tvm", False), ("dnnfusion", False),
                                             ("apollo", True)])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_fused_model_is_valid_and_computes_the_original_outputs(name, rules, feedback):
    """With the backend's feedback the plan also has view groups, whose nodes stay in the main graph."""
    make, feeds_of = MODELS[name]
    model = make()
    plan = fusionlang.fuse(fusionlang.from_onnx(model), rules, feedback=feedback)
    fused = fused_onnx(model, plan)
    onnx.checker.check_model(fused.model, full_check=True)
    feeds = feeds_of(model)
    for got, want in zip(run_ort(fused.model, feeds), run_ort(model, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    calls = [n for n in fused.model.graph.node if n.domain == FUSED_DOMAIN]
    assert sorted(n.op_type for n in calls) == sorted(f.name for f in fused.model.functions) == sorted(fused.functions)
    # every kernel group has its own function, or a note says why it has none
    placed = {gid for gids in fused.functions.values() for gid in gids}
    for group in plan.kernels:
        assert group.id in placed or any(note.startswith(f"group {group.id} has no function") for note in fused.notes)


def test_a_cnn_gets_one_function_per_kernel_group_holding_its_conv_bn_relu():
    model = cnn_model()
    plan = fusionlang.fuse(fusionlang.from_onnx(model), "apollo", feedback=False)
    fused = fused_onnx(model, plan)
    assert len(fused.functions) == len(plan.kernels) and fused.notes == []
    bodies = {f.name: [n.name or n.op_type for n in f.node] for f in fused.model.functions}
    # conv-BN folding made one conv of conv0 and bn0: both go into the group that holds it, with relu0
    assert any({"conv0", "bn0", "relu0"} <= set(names) for names in bodies.values())
    # the Identity the import removed sits between two nodes of one group: it goes inside
    assert "same" not in [n.name for n in fused.model.graph.node]
    # initializers stay in the main graph and are function inputs
    assert {t.name for t in fused.model.graph.initializer} == {t.name for t in model.graph.initializer}
    assert all(not f.attribute and "w0" not in [n.output[0] for n in f.node] for f in fused.model.functions)


def test_each_doc_string_names_its_groups_fuse_rules_and_rewrites_with_file_and_line():
    model = cnn_model()
    plan = fusionlang.fuse(fusionlang.from_onnx(model), "apollo", feedback=False)
    fused = fused_onnx(model, plan)
    for function in fused.model.functions:
        for gid in fused.functions[function.name]:
            group = plan.group(gid)
            assert f"group {gid}: kernel, category {group.category}" in function.doc_string
            for rule in group.rules:
                assert re.match(r"\S+\.fuse:\d+:\d+: ", rule) and rule in function.doc_string
    docs = "\n".join(f.doc_string for f in fused.model.functions)
    assert re.search(r"rule fold_conv_bn\w* \(\S+\.fuse:\d+\)", docs)


def test_an_original_node_opened_into_several_groups_is_kept_whole_with_a_note():
    model = export_model("gpt2_opset23")
    plan = fusionlang.fuse(fusionlang.from_onnx(model), "apollo", feedback=False)
    fused = fused_onnx(model, plan)
    split = [note for note in fused.notes if "(Attention) was fused into groups" in note]
    assert split, fused.notes
    attention = [n.name for f in fused.model.functions for n in f.node if n.op_type == "Attention"]
    main = [n.op_type for n in fused.model.graph.node]
    assert len(attention) == len(set(attention)) == sum(n.op_type == "Attention" for n in model.graph.node)
    assert "Attention" not in main


def test_functions_import_the_models_opsets_and_the_model_imports_the_fused_domain():
    model = loop_if_model()
    fused = fused_onnx(model, fusionlang.fuse(fusionlang.from_onnx(model), "apollo", feedback=False))
    assert {(o.domain, o.version) for o in fused.model.opset_import} == {("", 13), (FUSED_DOMAIN, 1)}
    assert all([(o.domain, o.version) for o in f.opset_import] == [("", 13)] for f in fused.model.functions)
    assert fused.model.ir_version >= 8
    # the Loop is kept whole, its body's outer read (x) an input of its function
    loop_function = next(f for f in fused.model.functions if any(n.op_type == "Loop" for n in f.node))
    assert "x" in loop_function.input


def test_save_writes_the_file_and_a_path_that_cannot_be_written_is_an_input_error(tmp_path):
    model = cnn_model()
    plan = fusionlang.fuse(fusionlang.from_onnx(model), "apollo", feedback=False)
    fused = save_fused_onnx(model, plan, tmp_path / "out.onnx")
    assert onnx.load(tmp_path / "out.onnx") == fused.model
    with pytest.raises(InputError, match=r"cannot write '.*missing/out.onnx': no such file or directory"):
        save_fused_onnx(model, plan, tmp_path / "missing" / "out.onnx")
    with pytest.raises(InputError, match="cannot write .*: is a directory"):
        save_fused_onnx(model, plan, tmp_path)


def test_a_plan_made_from_another_model_is_refused():
    plan = fusionlang.fuse(fusionlang.from_onnx(cnn_model()), "apollo", feedback=False)
    with pytest.raises(ModelError, match=r"the plan's op '.*' comes from ONNX node '.*', which model 'm' does not "
                                         r"have \(was the plan made from another model\?\)"):
        fused_onnx(loop_if_model(), plan)


def test_groups_whose_nodes_would_call_each_other_in_a_cycle_share_one_function():
    """LayerNormalization's Mean output feeds a Neg that feeds the Add after it. A plan
    cutting the opened layer norm's mean into group 0, the Neg into group 1 and the rest
    into group 2 is valid, but the ONNX node, kept whole in group 2, would feed group 1's
    Neg, which feeds group 2: groups 1 and 2 become one function."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("LayerNormalization", ["a", "g"], ["ln", "mean"], name="ln", axis=-1),
             helper.make_node("Neg", ["mean"], ["n"], name="neg"),
             helper.make_node("Add", ["ln", "n"], ["y"], name="add")]
    model = _model(nodes, {"x": [2, 6]}, {"y": [2, 6]}, {"g": np.ones(6, np.float32)}, opset=18)
    graph = fusionlang.fuse(fusionlang.from_onnx(model), "apollo", feedback=False).graph
    mean = [n.name for n in graph.nodes if n.op in ("mul", "reduce_sum")][:2]  # the first reduce_mean, opened
    members = [["relu", *mean], ["neg"], [n.name for n in graph.nodes if n.name not in {"relu", "neg", *mean}]]
    plan = FusionPlan(graph, make_groups(graph, members, [{"category": "reduce"}, {"category": "elemwise"},
                                                          {"category": "reduce"}]))
    plan.validate()
    fused = fused_onnx(model, plan)
    assert fused.functions == {"group_0_reduce": [0], "group_1_2_elemwise": [1, 2]}
    assert "groups 1, 2 share function group_1_2_elemwise: apart, their ONNX nodes would read each other's " \
           "results in a cycle" in fused.notes
    onnx.checker.check_model(fused.model, full_check=True)
    feeds = feeds_for(model)
    np.testing.assert_allclose(run_ort(fused.model, feeds)[0], run_ort(model, feeds)[0], rtol=1e-6, atol=1e-6)


def test_a_plan_of_a_graph_not_imported_from_onnx_is_refused():
    builder = GraphBuilder("built")
    builder.output(builder.relu(builder.input("x", [2, 3])))
    plan = fusionlang.fuse(builder.build(), "apollo", feedback=False)
    with pytest.raises(ModelError, match="the plan's ops were not imported from ONNX, so they cannot be mapped to "
                                         "model 'm'"):
        fused_onnx(cnn_model(), plan)


def test_a_model_past_protobufs_limit_is_written_with_its_tensors_beside_it(tmp_path, monkeypatch):
    model = cnn_model()
    plan = fusionlang.fuse(fusionlang.from_onnx(model), "apollo", feedback=False)
    monkeypatch.setattr(onnx_fused, "PROTOBUF_LIMIT", 1000)  # the CNN's weights are about 3 KiB
    fused = save_fused_onnx(model, plan, tmp_path / "out.onnx")
    assert (tmp_path / "out.onnx.data").stat().st_size > 1000
    # the model returned keeps its tensors' data
    assert all(t.raw_data and not t.external_data for t in fused.model.graph.initializer)
    onnx.checker.check_model(str(tmp_path / "out.onnx"), full_check=True)
    feeds = feeds_for(model)
    session = ort.InferenceSession(str(tmp_path / "out.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, feeds)[0], run_ort(model, feeds)[0], rtol=1e-6, atol=1e-6)


def test_groups_launched_together_say_so_in_their_doc_strings():
    nodes = [helper.make_node("Exp", ["x"], ["e"], name="exp"),
             helper.make_node("ReduceSum", ["e", "axis"], ["s"], name="sum", keepdims=0),
             helper.make_node("Neg", ["x"], ["n"], name="neg"),
             helper.make_node("ReduceMax", ["n", "axis"], ["m"], name="max", keepdims=0)]
    model = _model(nodes, {"x": [4, 8]}, {"s": [4], "m": [4]}, {"axis": np.array([1], np.int64)}, opset=18)
    plan = fusionlang.fuse(fusionlang.from_onnx(model), "apollo", feedback=False)
    assert plan.horizontal == [[0, 1]]
    docs = {f.name: f.doc_string for f in fused_onnx(model, plan).model.functions}
    assert "launched as one kernel (horizontal) with group 1" in docs["group_0_reduce"]
    assert "launched as one kernel (horizontal) with group 0" in docs["group_1_reduce"]
