"""ATen's flattened products (view -> addmm/mm/bmm -> view) import at their operands' rank."""

from __future__ import annotations

import functools
import io
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fusionlang  # noqa: E402
from fusionlang import reference  # noqa: E402
from fusionlang.torch_backend import CompileReport, fusionlang_backend  # noqa: E402
from torch_models import seeded  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import torch_bench_models  # noqa: E402


def eager(model, *args) -> np.ndarray:
    with torch.no_grad():
        return model(*args).numpy()


def imported_and_checked(model, *args):
    """``model`` through from_torch; its reference run equals eager."""
    graph = fusionlang.from_torch(model, args)
    feeds = {name: a.numpy() for name, a in zip(graph.inputs, args)}
    np.testing.assert_allclose(reference.run(graph, feeds)[graph.outputs[0]], eager(model, *args), rtol=1e-5,
                               atol=1e-6)
    return graph


def test_a_linear_on_a_rank_3_input_is_a_matmul_and_add_with_no_reshape():
    model = seeded(torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.GELU()))
    graph = imported_and_checked(model, torch.randn(2, 5, 8))
    ops = [node.op for node in graph.nodes]
    assert "reshape" not in ops and "gemm" not in ops
    (matmul,) = [node for node in graph.nodes if node.op == "matmul"]
    assert graph.types[matmul.inputs[0]].shape == (2, 5, 8)


class BatchedScores(torch.nn.Module):
    """q @ k^T per head (ATen: expand -> view -> bmm -> view), k shared by the heads."""

    def forward(self, q, k):
        return torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ q


def test_a_batched_product_is_one_broadcasting_matmul_with_no_reshape():
    graph = imported_and_checked(BatchedScores(), torch.randn(2, 3, 4, 5), torch.randn(2, 1, 4, 5))
    assert "reshape" not in [node.op for node in graph.nodes]
    assert [graph.types[node.outputs[0]].shape for node in graph.nodes if node.op == "matmul"] == [
        (2, 3, 4, 4), (2, 3, 4, 5)]


class ShuffledLinear(torch.nn.Module):
    """A product viewed back to other leading axes than it flattened: kept as it is."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.linear(x.reshape(6, 4)).reshape(3, 2, 3)


def test_a_product_viewed_to_other_axes_keeps_its_views():
    graph = imported_and_checked(seeded(ShuffledLinear()), torch.randn(2, 3, 4))
    assert "gemm" in [node.op for node in graph.nodes]


class RowBias(torch.nn.Module):
    """addmm with a bias per row of the flattened input: it does not broadcast at rank 3."""

    def forward(self, x, w, bias):
        return torch.addmm(bias, x.reshape(6, 4), w).reshape(2, 3, 5)


def test_a_product_with_a_bias_per_row_keeps_its_views():
    graph = imported_and_checked(RowBias(), torch.randn(2, 3, 4), torch.randn(4, 5), torch.randn(6, 5))
    assert "gemm" in [node.op for node in graph.nodes]


def kernels_through_torch_compile(model, x, rules="apollo_patterns") -> int:
    report = CompileReport()
    compiled = torch.compile(model, backend=functools.partial(fusionlang_backend, report=report,
                                                              options={"rules": rules}))
    with torch.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), eager(model, x), rtol=1e-4, atol=1e-5)
    return sum(s.compiled.stats.kernels for piece in report.pieces for s in piece._cache.values())


def kernels_through_onnx(model, x, rules="apollo_patterns") -> int:
    exported = io.BytesIO()
    torch.onnx.export(model, (x,), exported, dynamo=False)
    return fusionlang.compile_model(fusionlang.from_onnx(exported.getvalue()), rules, target="c").stats.kernels


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the TorchScript exporter ONNX tests use
def test_the_bench_bert_through_torch_compile_has_no_more_kernels_than_through_onnx():
    # under the same rules without pattern entries: the importers' graphs fuse alike
    torch._dynamo.reset()
    model, x = torch_bench_models.build("bert", "test")
    model.eval()
    assert kernels_through_torch_compile(model, x, "apollo") <= kernels_through_onnx(model, x, "apollo")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_bench_bert_through_torch_compile_gets_the_attention_kernel_as_onnx_does():
    # torch's SDPA decomposition guards a row of all -inf scores with
    # where(not(reduce_max(not(scores == -inf)) > 0), 0, p): the row-guarded patterns take it
    torch._dynamo.reset()
    model, x = torch_bench_models.build("bert", "test")
    model.eval()
    assert kernels_through_torch_compile(model, x) <= kernels_through_onnx(model, x)
