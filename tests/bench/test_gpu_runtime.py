"""bench/gpu_runtime.py where there is no GPU: its dry path, its verdict without a device,
and the pieces it measures with (op-by-op executor, FLOP and byte counts, rooflines), run
here with NumPy standing in for CuPy."""

import sys
from pathlib import Path

import numpy as np
import pytest

import fusionlang.backend as backend
from fusionlang import reference
from fusionlang.ops import GraphBuilder

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import gpu_runtime  # noqa: E402


def test_without_a_device_it_says_so_and_exits_0(capsys, monkeypatch):
    monkeypatch.setattr(gpu_runtime.backend, "cuda_available", lambda: False)
    assert gpu_runtime.main(["--only", "softmax_4096x1024"]) == 0
    assert "no CUDA device visible to CuPy: nothing measured" in capsys.readouterr().out


@pytest.mark.skipif(backend.nvrtc_available() is not None, reason="NVRTC cannot be loaded")
def test_the_dry_path_plans_emits_and_compiles_a_workload(capsys):
    assert gpu_runtime.main(["--dry", "--only", "softmax_4096x1024,chain10_4096x1024"]) == 0
    out = capsys.readouterr().out
    assert "softmax_4096x1024" in out and "chain10_4096x1024" in out and out.count("compiled") == 2


def test_unknown_workloads_are_named(capsys):
    with pytest.raises(SystemExit) as exc:
        gpu_runtime.main(["--dry", "--only", "resnet51"])
    assert exc.value.code == 2 and "unknown workload(s) resnet51" in capsys.readouterr().err


def _small_graph():
    rng = np.random.default_rng(0)
    b = GraphBuilder("small")
    x = b.input("x", (2, 3, 6, 6))
    c = b.relu(b.conv(x, b.constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32)), pads=(1, 1, 1, 1)))
    m = b.matmul(b.flatten(c, axis=1), b.constant(rng.standard_normal((144, 5)).astype(np.float32)))
    b.output(b.softmax(m, axis=-1))
    return b.build(), {"x": rng.standard_normal((2, 3, 6, 6)).astype(np.float32)}


def test_op_by_op_computes_what_the_reference_computes():
    graph, feeds = _small_graph()
    ops = gpu_runtime.OpByOp(graph, np, np.asarray)
    (got,) = ops(feeds)
    np.testing.assert_allclose(got, reference.run(graph, feeds)[graph.outputs[0]], rtol=1e-5, atol=1e-6)
    assert not ops.host_ops


class RefusingArrays:
    """An array module whose arrays no op reference can compute on: every op goes to the host."""

    class Array:
        def __init__(self, data):
            self.data = np.asarray(data)

    @staticmethod
    def asarray(a):
        return a if isinstance(a, RefusingArrays.Array) else RefusingArrays.Array(a)


def test_an_op_the_device_arrays_cannot_run_goes_through_the_host_and_is_counted():
    graph, feeds = _small_graph()
    ops = gpu_runtime.OpByOp(graph, RefusingArrays, lambda a: a.data)
    (got,) = ops({k: RefusingArrays.asarray(v) for k, v in feeds.items()})
    np.testing.assert_allclose(got.data, reference.run(graph, feeds)[graph.outputs[0]], rtol=1e-5, atol=1e-6)
    assert ops.host_ops["conv"] == 1 and ops.host_ops["matmul"] == 1
    assert sum(ops.host_ops.values()) == len(graph.nodes)


def test_flops_count_every_multiply_add_of_conv_and_matmul():
    graph, _ = _small_graph()
    conv = 2 * (2 * 4 * 6 * 6) * (3 * 3 * 3)
    matmul = 2 * (2 * 5) * 144
    assert gpu_runtime.contraction_flops(graph) == conv + matmul


def test_rooflines_from_device_properties_and_the_data_sheet_table():
    h100 = {"memoryClockRate": 2_619_000, "memoryBusWidth": 5120}  # kHz, bits: an H100 SXM's HBM3
    assert gpu_runtime.hbm_peak_bytes(h100) == pytest.approx(3.35e12, rel=0.01)
    assert gpu_runtime.hbm_peak_bytes({"memoryBusWidth": 5120}) is None  # a runtime that no longer reports the clock
    assert gpu_runtime.tf32_peak_tflops("NVIDIA H100 80GB HBM3") == 494.7
    assert gpu_runtime.tf32_peak_tflops("NVIDIA H100 PCIe") == 378.0
    assert gpu_runtime.tf32_peak_tflops("NVIDIA GeForce RTX 2080") is None


def test_workload_names_map_to_blocks():
    assert gpu_runtime.block_of("bias_gelu_residual_16384x4096") == "bias_gelu_residual"
    assert gpu_runtime.block_of("resnet50") is None
    assert {"resnet50", "matmul_4096", "layer_norm_16384x4096"} <= set(gpu_runtime.workloads())


def test_a_failing_workload_is_a_row_with_its_error_and_the_table_says_so(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("an illegal memory access was encountered")

    monkeypatch.setattr(gpu_runtime, "bench", broken)
    args = gpu_runtime.argparse.Namespace(rounds=1, torch_compile="none")
    row = gpu_runtime.measured("softmax_4096x1024", lambda: None, args, None, None, {})
    assert row == {"workload": "softmax_4096x1024",
                   "error": "RuntimeError: an illegal memory access was encountered"}
    assert "softmax_4096x1024" in gpu_runtime.table([row]) and "failed: RuntimeError" in gpu_runtime.table([row])


def test_an_op_named_in_device_ops_runs_that_function_instead_of_the_reference():
    b = GraphBuilder("erf")
    x = b.input("x", (3, 4))
    b.output(b.erf(x))
    graph = b.build()
    feeds = {"x": np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)}
    calls = []

    def device_erf(a):
        calls.append(a.shape)
        return reference.run(graph, {"x": a})[graph.outputs[0]]

    ops = gpu_runtime.OpByOp(graph, np, np.asarray, {"erf": device_erf})
    (got,) = ops(feeds)
    np.testing.assert_array_equal(got, reference.run(graph, feeds)[graph.outputs[0]])
    assert calls == [(3, 4)] and not ops.host_ops


def test_weights_listed_as_graph_inputs_are_dropped_from_the_inputs_for_onnx2torch():
    import model_runtime

    model = model_runtime.light_model("squeezenet")
    weights = {t.name for t in model.graph.initializer}
    assert weights & {i.name for i in model.graph.input}
    stripped = gpu_runtime.without_initializer_inputs(model)
    assert [i.name for i in stripped.graph.input] == ["data_0"]
    assert len(stripped.graph.initializer) == len(model.graph.initializer) and len(model.graph.input) > 1


def test_the_light_models_constant_of_shape_weights_become_initializers_for_onnx2torch():
    import model_runtime
    import onnxruntime as ort

    model = model_runtime.light_model("squeezenet")
    folded = gpu_runtime.for_onnx2torch(model)
    assert not [n for n in folded.graph.node if n.op_type == "ConstantOfShape"]
    assert "conv1_w_0" in {t.name for t in folded.graph.initializer}
    feeds = {"data_0": np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)}
    want, got = (ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
                 for m in (model, folded))
    np.testing.assert_array_equal(got, want)
