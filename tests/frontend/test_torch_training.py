"""One training step through torch.compile(backend="fusionlang") on the four bench models
(bench/torch_bench_models.py, at their test sizes): eager's loss and gradients, with the
forward and backward graphs converted (the fallbacks counted)."""

from __future__ import annotations

import copy
import functools
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fusionlang.torch_backend import CompileReport, fusionlang_backend  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import torch_bench_models  # noqa: E402

#: what each model leaves in eager
FALLBACKS = {
    "resnet18": [],
    "mobilenet_v2": [],
    "bert": [],
    "llama": [],
}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def assert_gradients_match(model, reference, rtol=1e-3):
    """Each parameter's gradient within rtol of eager's, the absolute floor rtol of the
    largest gradient of the model: a gradient that is zero in exact arithmetic (a bias
    before a batch norm) is rounding noise in both, and no relative bound holds on noise."""
    floor = rtol * max(p.grad.abs().max().item() for p in reference.parameters())
    for (name, got), want in zip(model.named_parameters(), reference.parameters()):
        np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=rtol, atol=floor, err_msg=name)


def step_against_eager(model, x, atol: float = 1e-5) -> CompileReport:
    """One compiled training step of ``model`` on ``x`` and one in eager on a copy: the
    input's gradient (where ``x`` asks for one) and the parameters' as eager's; the report."""
    reference = copy.deepcopy(model)
    report = CompileReport()
    compiled = torch.compile(model, backend=functools.partial(fusionlang_backend, report=report))
    x_ref = x.detach().clone().requires_grad_(x.requires_grad)
    compiled(x).square().sum().backward()
    reference(x_ref).square().sum().backward()
    if x.requires_grad:
        np.testing.assert_allclose(x.grad.numpy(), x_ref.grad.numpy(), rtol=1e-4, atol=atol)
    assert_gradients_match(model, reference, rtol=1e-4)
    return report


@pytest.mark.parametrize("name", torch_bench_models.MODELS)
def test_a_training_step_gives_eagers_loss_and_gradients(name):
    model, example = torch_bench_models.build(name, "test")
    model.train()
    reference = copy.deepcopy(model)
    report = CompileReport()
    compiled = torch.compile(model, backend=functools.partial(fusionlang_backend, report=report))
    loss = torch_bench_models.loss_of(compiled(example))
    want = torch_bench_models.loss_of(reference(example))
    loss.backward()
    want.backward()
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-4)
    assert_gradients_match(model, reference)
    for (buffer, got), expected in zip(model.named_buffers(), reference.buffers()):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-4, atol=1e-6, err_msg=buffer)
    assert report.graphs == 2 and report.eager_runs == 0  # a forward and a backward, both compiled
    assert sorted({f.op for f in report.fallbacks}) == FALLBACKS[name]


@pytest.mark.parametrize("conv", [
    dict(in_channels=3, out_channels=4, kernel_size=3, stride=2, padding=1),  # rows no window reaches
    dict(in_channels=4, out_channels=4, kernel_size=3, padding=2, dilation=2, groups=4),  # depthwise
    dict(in_channels=4, out_channels=6, kernel_size=(1, 3), stride=(2, 1), groups=2, bias=False),
    dict(in_channels=3, out_channels=4, kernel_size=1, stride=2, padding=1),  # padding past the kernel
    dict(in_channels=4, out_channels=4, kernel_size=3, stride=2, padding=1, groups=4),  # MobileNet's
    dict(in_channels=4, out_channels=4, kernel_size=3, stride=2, groups=4),  # a column past the last window
    dict(in_channels=3, out_channels=5, kernel_size=1, bias=False),  # pointwise: grad_w without a transpose
], ids=["strided", "depthwise-dilated", "grouped-no-bias", "padded-pointwise", "depthwise-strided",
        "depthwise-leftover", "pointwise"])
def test_convolution_backward_is_converted_and_gives_eagers_gradients(conv):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(**conv), torch.nn.Tanh())
    report = step_against_eager(model, torch.randn(2, conv["in_channels"], 7, 8, requires_grad=True))
    assert report.fallbacks == [] and report.eager_runs == 0
    # the input's gradient is a convolution (the GEMM template's), not a conv_transpose loop nest
    assert "conv_transpose" not in compiled_ops(report)


def compiled_ops(report) -> set[str]:
    return {node.op for piece in report.pieces for s in piece._cache.values() for node in s.compiled.graph.nodes}


def compiled_kernels(report) -> list:
    return [kernel for piece in report.pieces for s in piece._cache.values() for kernel in s.compiled.kernels]


@pytest.mark.parametrize("options", [{}, dict(padding_idx=4), dict(scale_grad_by_freq=True, padding_idx=0)],
                         ids=["plain", "padding-row", "scaled-by-frequency"])
def test_embeddings_backward_is_an_in_order_scatter_add_not_a_product(options):
    # as one_hot(ids) x updates, an 8000 x 256 table's gradient was a 10 ms GEMM; as
    # scatter_elements' pull-form loop, 269 ms. Rows added in order: about 1 ms.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(20, 6, **options), torch.nn.Tanh())
    reference = copy.deepcopy(model)
    report = CompileReport()
    compiled = torch.compile(model, backend=functools.partial(fusionlang_backend, report=report))
    ids = torch.tensor([[1, 4, 4], [19, 0, 4]])  # a repeated row accumulates (the padding row: none)
    compiled(ids).square().sum().backward()
    reference(ids).square().sum().backward()
    assert_gradients_match(model, reference, rtol=1e-5)
    ops = compiled_ops(report)
    assert report.fallbacks == [] and "segment_sum" in ops
    assert not {"one_hot", "matmul", "scatter_elements"} & ops
    scatters = [k for k in compiled_kernels(report) if k.strategy == "segment-sum kernel"]
    # (scaled by frequency: the tokens' counts are a segment sum too)
    assert len(scatters) == 1 + ("scale_grad_by_freq" in options) and all(len(k.nodes) == 1 for k in scatters)


def test_a_linear_layers_backward_reads_transposed_matrices_without_copying_them():
    # grad_W = grad^T @ x and grad_x = grad @ (W^T)^T: as transposes then products, each
    # transpose was a kernel of its own (Llama's LM head: 3 ms each); a gemm reads the
    # matrix transposed (trans_a / trans_b) as it packs it
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5, bias=False), torch.nn.Tanh())
    reference = copy.deepcopy(model)
    report = CompileReport()
    compiled = torch.compile(model, backend=functools.partial(fusionlang_backend, report=report))
    x = torch.randn(2, 3, 6, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    compiled(x).square().sum().backward()
    reference(x_ref).square().sum().backward()
    assert_gradients_match(model, reference, rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), x_ref.grad.numpy(), rtol=1e-5, atol=1e-6)
    nodes = [node for piece in report.pieces for s in piece._cache.values() for node in s.compiled.graph.nodes]
    # no transpose is left: with the min-cut partitioner the backward recomputes W^T (a view
    # it reads as a gemm's trans flag) instead of the forward writing it out for the backward;
    # the forward's x W^T, the backward's grad W and grad^T x
    assert [node.op for node in nodes].count("transpose") == 0
    assert sorted((n.attrs["trans_a"], n.attrs["trans_b"]) for n in nodes if n.op == "gemm") == [(0, 0), (0, 1), (1, 0)]


def test_a_biased_linear_on_a_rank_3_input_reads_its_trained_weight_transposed_without_copying_it():
    # at rank, x W^T + b read W^T from a transpose kernel per Linear and step (BERT's forward:
    # 8 of them, 1.3 ms); flat, the gemm reads W with trans_b and its epilogue (the bias,
    # the residual, the norm's statistics) carries through the view back to rank
    torch.manual_seed(0)

    class Residual(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear, self.norm = torch.nn.Linear(32, 32), torch.nn.LayerNorm(32)

        def forward(self, x):
            return self.norm(x + self.linear(x))

    report = step_against_eager(Residual(), torch.randn(2, 16, 32, requires_grad=True))
    nodes = [node for piece in report.pieces for s in piece._cache.values() for node in s.compiled.graph.nodes]
    assert [node.op for node in nodes].count("transpose") == 0
    (product,) = [n.name for n in nodes if n.op == "gemm" and (n.attrs["trans_a"], n.attrs["trans_b"]) == (0, 1)]
    (forward,) = [k for k in compiled_kernels(report) if product in k.nodes]
    assert forward.strategy == "gemm template" and forward.nests == 1
    assert any(node.startswith("add") for node in forward.nodes), forward.nodes  # the residual, in the epilogue


def test_a_split_projection_stays_a_product_at_rank_that_stores_its_parts():
    # a fused QKV projection split into Q, K and V: flat, the view back to rank stood between
    # the product and the split, three copy kernels a layer where W^T's transpose is one
    torch.manual_seed(0)
    report = step_against_eager(torch_bench_models.EncoderLayer(32, 2), torch.randn(2, 32, 32, requires_grad=True))
    assert any(k.strategy == "gemm template" and any(node.startswith("split") for node in k.nodes)
               for k in compiled_kernels(report))
    assert not any(k.strategy != "gemm template" and any(node.startswith("split") for node in k.nodes)
                   for k in compiled_kernels(report))


@pytest.mark.parametrize("pool", [
    dict(kernel_size=3, stride=2, padding=1),  # ResNet's: windows overlap, padding
    dict(kernel_size=3, stride=2, ceil_mode=True),  # a last window past the edge
    dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0), dilation=(2, 1)),
], ids=["overlapping-padded", "ceil", "dilated"])
def test_max_pooling_and_its_backward_are_converted_and_give_eagers_gradients(pool):
    torch.manual_seed(0)
    # the ReLU makes ties (zeros) in windows: the gradient goes to the first, as in eager
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(**pool),
                                torch.nn.Tanh())
    report = step_against_eager(model, torch.randn(2, 2, 9, 10, requires_grad=True), atol=1e-6)
    assert report.fallbacks == [] and report.eager_runs == 0


def test_max_pooling_indices_are_torchs_first_maxima():
    def pool(x):
        return torch.nn.functional.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)

    x = torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 2.0], [2.0, 2.0, 0.0]]).repeat(2, 1, 2, 2)  # ties
    report = CompileReport()
    compiled = torch.compile(pool, backend=functools.partial(fusionlang_backend, report=report))
    with torch.no_grad():
        (got, got_at), (want, want_at) = compiled(x), pool(x)
    assert torch.equal(got, want) and torch.equal(got_at, want_at)
    assert report.fallbacks == [] and report.eager_runs == 0


def test_a_depthwise_weight_gradient_is_a_correlation_per_image_and_channel_not_a_gather():
    # each image's and channel's input plane correlated with its output gradient: a
    # depthwise conv of N*C channels whose 9x8 kernel is the gradient's plane (the
    # template's correlation method), then summed over the images. Gathering every tap's
    # inputs wrote 9 copies of the input in a kernel of its own; as the batch-for-channel
    # grouped convolution it was a GEMM template per channel.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 4, 3, stride=2, padding=1, groups=4), torch.nn.Tanh())
    # no input gradient: the backward holds the weight's only
    report = step_against_eager(model, torch.randn(2, 4, 17, 16))
    convs = [node for piece in report.pieces for s in piece._cache.values() for node in s.compiled.graph.nodes
             if node.op == "conv"]
    assert sorted(node.attrs["group"] for node in convs) == [4, 2 * 4]  # the forward's, the weight gradient's
    assert "gather" not in compiled_ops(report)
    kernels = [k for k in compiled_kernels(report) if k.detail.startswith("depthwise m=1 n=9 k=72")]
    assert len(kernels) == 1 and "correlation" in kernels[0].source


def test_a_pointwise_convs_input_gradient_reads_its_weight_unflipped():
    # flipping a 1x1 kernel in space changes nothing: its slice was a copy of the weight,
    # a kernel of its own per pointwise conv (34 of MobileNetV2's training step)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 1), torch.nn.Tanh(), torch.nn.Conv2d(16, 8, (1, 3)))
    report = step_against_eager(model, torch.randn(2, 8, 6, 7, requires_grad=True))
    slices = [node for piece in report.pieces for s in piece._cache.values() for node in s.compiled.graph.nodes
              if node.op == "slice"]
    # the 1x3 kernel flips its columns alone
    assert [(node.attrs["axes"], node.attrs["steps"]) for node in slices] == [((3,), (-1,))]


def test_a_transformer_feed_forwards_gelu_runs_in_its_gemms_epilogue_and_gives_eagers_gradients():
    # a Linear on [B, S, E] is a GEMM on [B*S, E] and a reshape back to [B, S, N]: the GELU
    # (and its backward) over [B, S, N] ran as a loop nest per op after the GEMM, through a
    # temporary each (BERT's training step: 2.7 ms where the GEMM alone takes 0.9)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16),
                                torch.nn.LayerNorm(16))
    reference = copy.deepcopy(model)
    report = CompileReport()
    compiled = torch.compile(model, backend=functools.partial(fusionlang_backend, report=report))
    x = torch.randn(2, 8, 16, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    compiled(x).square().sum().backward()
    reference(x_ref).square().sum().backward()
    assert_gradients_match(model, reference, rtol=1e-4)
    np.testing.assert_allclose(x.grad.numpy(), x_ref.grad.numpy(), rtol=1e-4, atol=1e-5)
    gelu = [k for k in compiled_kernels(report) if k.strategy == "gemm template" and
            any("erf" in node for node in k.nodes)]
    assert len(gelu) == 2 and all(k.nests == 1 for k in gelu), [(k.nodes, k.nests) for k in gelu]  # forward, backward


def test_attention_stores_its_heads_merged_back_from_the_product_and_gives_eagers_gradients():
    # P.V [B, H, S, D] transposed and reshaped to [B, S, H*D] (and its backward's dV,
    # [B*H, S, D] viewed as [B, H, S, D] first) ran as loop nests copying the product
    # after it: the templates store through the views, C's rows stepping H*D floats (the
    # forward's in the attention template, which writes the probabilities the backward reads)
    torch.manual_seed(0)
    model = torch_bench_models.EncoderLayer(32, 2)
    x = torch.randn(2, 32, 32, requires_grad=True)
    report = step_against_eager(model, x)
    # (the forward's reshape to [B*S, H*D] is the flat out-projection's view of its operand)
    merged = [k for k in compiled_kernels(report) if k.strategy in ("gemm template", "attention template")
              and [n.split("_")[0] for n in k.nodes][-2:] in (["transpose", "reshape"], ["matmul", "transpose"])]
    assert sorted(k.strategy for k in merged) == ["attention template", "gemm template"], [k.nodes for k in merged]
    assert all(k.nests == 1 for k in merged if k.strategy == "gemm template")


def test_a_training_batch_norms_saved_statistics_are_its_own_reductions_not_computed_again():
    # the backward's saved mean and 1/std, and the running statistics, read BN_A's mean and
    # variance: two reductions a batch norm; written in another form they were computed
    # again, two more passes over each batch norm's input (104 in MobileNetV2's forward)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 1), torch.nn.BatchNorm2d(8), torch.nn.ReLU6(),
                                torch.nn.Conv2d(8, 8, 3, padding=1, groups=8), torch.nn.BatchNorm2d(8),
                                torch.nn.ReLU6())
    reference = copy.deepcopy(model)
    x = torch.randn(2, 3, 6, 7, requires_grad=True)
    report = step_against_eager(model, x)
    reference(x)  # its running statistics updated as the compiled model's
    for (buffer, got), want in zip(model.named_buffers(), reference.buffers()):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6, err_msg=buffer)
    forward = report.pieces[0]
    (specialization,) = forward._cache.values()
    assert [node.op for node in specialization.compiled.graph.nodes].count("reduce_sum") == 2 * 2


def test_a_pointwise_convs_weight_gradient_is_one_product_written_in_the_weights_layout():
    # the gradient correlated with the input gives (Co, Ci, 1, 1) as it is: no transpose
    # of (Ci, Co) taps after the product (a kernel per pointwise conv, 0.2 to 0.4 ms each
    # in MobileNetV2's training step); a projection (Ci > Co) keeps the taps' form
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(6, 10, 3, padding=1), torch.nn.Tanh(), torch.nn.Conv2d(10, 14, 1),
                                torch.nn.Tanh(), torch.nn.Conv2d(14, 5, 1))
    report = step_against_eager(model, torch.randn(3, 6, 5, 9, requires_grad=True))
    shapes = [s.compiled.graph.types[node.outputs[0]].shape for piece in report.pieces for s in piece._cache.values()
              for node in s.compiled.graph.nodes if node.op == "conv"]
    assert (14, 10, 1, 1) in shapes and (10, 14, 1, 1) not in shapes  # expanding: written as the weight
    assert (14, 5, 1, 1) in shapes  # projecting: the taps, transposed after
