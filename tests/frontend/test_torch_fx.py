"""from_torch: torch.export's core-ATen graph imported as a Graph, fused, compiled, run."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fusionlang  # noqa: E402
from fusionlang import reference  # noqa: E402
from fusionlang.errors import UnsupportedOpError  # noqa: E402
from fusionlang.frontend.torch_fx import fx_refusal  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch_models import ConvNet, TransformerBlock, seeded  # noqa: E402


def eager(model, *args) -> np.ndarray:
    with torch.no_grad():
        return model(*args).numpy()


@pytest.mark.parametrize("model, shape", [(ConvNet, (2, 3, 8, 8)), (TransformerBlock, (2, 5, 16))],
                         ids=["convnet", "transformer"])
def test_from_torch_then_fuse_compile_and_run_equals_eager(model, shape):
    model, x = seeded(model()), torch.randn(shape)
    graph = fusionlang.from_torch(model, (x,))
    assert graph.inputs == ["x"] and len(graph.outputs) == 1
    compiled = fusionlang.compile(fusionlang.fuse(graph))
    got = compiled.run({"x": x.numpy()})[graph.outputs[0]]
    np.testing.assert_allclose(got, eager(model, x), rtol=1e-4, atol=1e-5)


class ManyOps(torch.nn.Module):
    """The converters the two models above do not reach, in one graph."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 6)
        self.register_buffer("offset", torch.linspace(-1, 1, 6), persistent=False)

    def forward(self, tokens, image):
        x = self.embed(tokens) + self.offset                           # embedding, a non-persistent buffer
        row = x[:, 1].unsqueeze(1).squeeze(0)                           # select, squeeze of a size-2 axis (no-op)
        x = torch.cat([x, row.expand(-1, 2, -1)], dim=1)                # expand, cat
        x = torch.where(x > 0, F.silu(x), torch.sigmoid(x) / 3) ** 2    # where, compare, silu, div, pow
        x = x.clamp(min=-0.5, max=2.0) - 0.25 * x[..., 1:4].amax(dim=-1, keepdim=True).mean()
        pooled = F.avg_pool2d(image, 2).sum(dim=(2, 3))                 # avg pool, sum over two axes
        return F.log_softmax(x, dim=-1).sum(dim=1) + pooled[:, :1]


def test_the_other_inference_converters_match_eager():
    model = ManyOps()
    tokens, image = torch.tensor([[1, 4, 9], [0, 2, 2]]), torch.randn(2, 3, 4, 4)
    graph = fusionlang.from_torch(model, (tokens, image))
    got = reference.run(graph, {"tokens": tokens.numpy(), "image": image.numpy()})[graph.outputs[0]]
    np.testing.assert_allclose(got, eager(model, tokens, image), rtol=1e-5, atol=1e-6)


class Sorting(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x).cumsum(0)


def test_from_torch_names_an_op_without_a_converter():
    with pytest.raises(UnsupportedOpError, match=r"node 'cumsum' \(aten.cumsum.default\): no converter for "
                                                 r"aten.cumsum.default"):
        fusionlang.from_torch(Sorting(), (torch.randn(4),))


def test_batch_norm_in_training_mode_normalizes_with_the_batch_statistics():
    # the graph's one output is the module's: its running-statistics updates are not outputs
    model, x = torch.nn.BatchNorm2d(3).train(), torch.randn(4, 3, 5, 5) * 2 + 1
    graph = fusionlang.from_torch(copy.deepcopy(model), (x,))
    assert "batch_norm_train" in {node.op for node in graph.nodes} and len(graph.outputs) == 1
    got = reference.run(graph, {graph.inputs[0]: x.numpy()})[graph.outputs[0]]
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_batch_norm_updating_its_statistics_in_place_is_refused_with_its_reason():
    def norm(x, weight, bias, mean, var):
        return torch.ops.aten.native_batch_norm.default(x, weight, bias, mean, var, True, 0.1, 1e-5)[0]

    node = next(n for n in torch.fx.symbolic_trace(norm).graph.nodes if n.op == "call_function")
    assert fx_refusal(node) == "batch norm in training mode that updates its running statistics in place has no " \
                               "converter"


def test_a_dynamic_batch_exports_with_its_size_arithmetic_and_imports_for_the_example_shape():
    model, x = seeded(TransformerBlock()), torch.randn(3, 5, 16)
    batch = torch.export.Dim("batch", min=2)
    graph = fusionlang.from_torch(model, (x,), dynamic_shapes={"x": {0: batch}})
    assert graph.types["x"].shape == (3, 5, 16)
    got = reference.run(graph, {"x": x.numpy()})[graph.outputs[0]]
    np.testing.assert_allclose(got, eager(model, x), rtol=1e-4, atol=1e-5)
