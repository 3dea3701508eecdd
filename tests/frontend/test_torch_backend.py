"""torch.compile(model, backend="fusionlang"): the kernels fusionlang compiles match eager."""

from __future__ import annotations

import copy
import functools
import logging

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fusionlang.errors import CodegenError, InputError  # noqa: E402
from fusionlang import torch_backend  # noqa: E402
from fusionlang.torch_backend import CompileReport, fusionlang_backend  # noqa: E402
from torch_models import ConvNet, TransformerBlock, seeded  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compiled_with_report(model, options=None):
    report = CompileReport()
    backend = functools.partial(fusionlang_backend, options=options, report=report)
    return torch.compile(model, backend=backend), report


def assert_matches_eager(compiled, model, *args):
    with torch.no_grad():
        got, want = compiled(*args), model(*args)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("model, shape", [(ConvNet, (2, 3, 8, 8)), (TransformerBlock, (2, 5, 16))],
                         ids=["convnet", "transformer"])
def test_a_model_compiles_whole_into_fusionlang_kernels_and_matches_eager(model, shape):
    model = seeded(model())
    compiled, report = compiled_with_report(model)
    assert_matches_eager(compiled, model, torch.randn(shape))
    assert report.fallbacks == []
    assert len(report.pieces) == 1 and report.pieces[0].specializations == 1
    assert report.eager_runs == 0


class WithCumsum(torch.nn.Module):
    """A linear layer, a cumulative sum (no converter), a tanh and a linear layer."""

    def __init__(self):
        super().__init__()
        self.first, self.last = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.last(torch.tanh(torch.relu(self.first(x)).cumsum(-1)))


def test_an_op_without_a_converter_runs_in_eager_alone_and_is_logged(caplog):
    model = seeded(WithCumsum())
    compiled, report = compiled_with_report(model)
    with caplog.at_level(logging.INFO, logger="fusionlang.import"):
        assert_matches_eager(compiled, model, torch.randn(3, 8))
    assert [(f.op, f.reason) for f in report.fallbacks] == [("aten.cumsum.default",
                                                           "no converter for aten.cumsum.default")]
    assert len(report.pieces) == 2 and all(p.specializations == 1 for p in report.pieces)
    assert "aten.cumsum.default (node 'cumsum') runs in eager: no converter" in caplog.text
    assert "aten.cumsum.default: 1 node(s)" in report.explain()
    torch._dynamo.reset()
    assert torch_backend.explain(model, torch.randn(3, 8)).explain() == report.explain()


def test_a_dtype_numpy_cannot_hold_stays_in_eager():
    def model(x):
        return torch.tanh(torch.relu(x).float())  # the cast reads bfloat16: it stays in eager too

    report = torch_backend.explain(model, torch.randn(4, dtype=torch.bfloat16))
    assert [(f.op, f.reason) for f in report.fallbacks] == [
        ("aten.relu.default", "dtype torch.bfloat16 is not supported"),
        ("aten._to_copy.default", "dtype torch.bfloat16 is not supported")]
    assert len(report.pieces) == 1 and report.pieces[0].specializations == 1  # the tanh


def test_tensors_off_the_cpu_stay_in_eager():
    # the C target reads host memory: a CUDA model (here the meta device) runs as eager runs it
    report = torch_backend.explain(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh()),
                                   torch.randn(4, device="meta"))
    assert [f.reason for f in report.fallbacks] == ["a tensor on device meta (fusionlang compiles for the CPU)"] * 2
    assert report.pieces == []


def test_each_new_input_shape_compiles_once_and_repeats_hit_the_cache():
    model = seeded(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()))
    compiled, report = compiled_with_report(model)
    for batch in (2, 3, 3, 2, 5):  # dynamo marks the batch dynamic at the second shape
        assert_matches_eager(compiled, model, torch.randn(batch, 8))
    assert report.fallbacks == [] and report.eager_runs == 0
    assert sum(p.specializations for p in report.pieces) == 4  # 2 (static graph), then 2, 3 and 5 (dynamic)


def test_a_piece_fusionlang_fails_to_compile_runs_in_eager_and_says_why(monkeypatch, caplog):
    def failing(*args, **kwargs):
        raise CodegenError("C compiler failed (simulated)")

    monkeypatch.setattr(torch_backend, "compile_model", failing)
    model = seeded(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()))
    compiled, report = compiled_with_report(model)
    with caplog.at_level(logging.WARNING, logger="fusionlang.import"):
        assert_matches_eager(compiled, model, torch.randn(2, 8))
    assert report.eager_runs == 1
    assert "runs in eager for shapes" in caplog.text and "simulated" in caplog.text


def test_the_backend_is_registered_by_name_and_takes_options():
    model = seeded(TransformerBlock())
    compiled = torch.compile(model, backend="fusionlang", options={"strategy": "dp", "threads": 2})
    assert_matches_eager(compiled, model, torch.randn(1, 4, 16))


@pytest.mark.parametrize("options, message", [
    ({"bogus": 1}, "unknown option 'bogus' (options: rules, strategy, threads)"),
    ({"strategy": "greedy"}, "strategy 'greedy' is not one of apollo, tvm, dp"),
    ({"threads": 0}, "threads must be a positive int, got 0"),
    ({"rules": "no-such-rules"}, "rules 'no-such-rules': "),
])
def test_bad_options_are_one_clear_error(options, message):
    with pytest.raises(InputError, match="^torch.compile\\(backend='fusionlang'\\): ") as caught:
        torch_backend.settings_from(options)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    compiled = torch.compile(torch.nn.ReLU(), backend="fusionlang", options=options)
    with pytest.raises(Exception, match=message.replace("(", "\\(").replace(")", "\\)")):
        compiled(torch.randn(2))


@pytest.mark.parametrize("model, shape", [(ConvNet, (2, 3, 8, 8)), (TransformerBlock, (2, 5, 16))],
                         ids=["convnet", "transformer"])
def test_a_training_step_gives_eagers_loss_and_gradients(model, shape):
    # batch norm in training mode is converted (batch statistics, running statistics updated),
    # convolution_backward too, and attention is differentiated as its math; what has no
    # converter (max pooling's indices and its backward) runs in eager between the pieces
    model = seeded(model()).train()
    model.apply(lambda m: setattr(m, "p", 0.0) if isinstance(m, torch.nn.Dropout) else None)
    reference_model = copy.deepcopy(model)
    compiled, report = compiled_with_report(model)
    x = torch.randn(shape)
    loss, want = compiled(x).square().mean(), reference_model(x).square().mean()
    loss.backward()
    want.backward()
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-4)
    for (name, got), expected in zip(model.named_parameters(), reference_model.parameters()):
        np.testing.assert_allclose(got.grad.numpy(), expected.grad.numpy(), rtol=1e-3, atol=1e-6, err_msg=name)
    for (name, got), expected in zip(model.named_buffers(), reference_model.buffers()):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-7, err_msg=name)
    assert report.graphs == 2 and report.eager_runs == 0
    assert sum(p.specializations for p in report.pieces) >= 2
    assert not any("batch_norm" in f.op for f in report.fallbacks)


def test_a_repeated_shape_runs_without_checking_the_feeds_again(monkeypatch):
    # the per-call path: the cache key already matched shapes and dtypes
    import fusionlang.backend.runtime as runtime

    model = seeded(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()))
    compiled, report = compiled_with_report(model)
    assert_matches_eager(compiled, model, torch.randn(2, 8))
    checks = []
    monkeypatch.setattr(runtime, "check_feeds", lambda graph, feeds: checks.append(1) or feeds)
    assert_matches_eager(compiled, model, torch.randn(2, 8))
    assert checks == [] and report.pieces[0].specializations == 1


def test_a_contiguous_tensor_crosses_to_numpy_without_a_copy():
    from fusionlang.frontend.torch_export import as_numpy

    tensor = torch.randn(3, 4, requires_grad=True)
    assert as_numpy(tensor).ctypes.data == tensor.data_ptr()
    transposed = as_numpy(tensor.detach().t())  # not contiguous: a contiguous copy
    assert transposed.flags.c_contiguous and np.array_equal(transposed, tensor.detach().numpy().T)


def compiled_graphs(report):
    return [s.compiled.graph for piece in report.pieces for s in piece._cache.values() if s is not None]


def test_inference_binds_parameters_and_buffers_as_constants():
    # frozen weights fold: each batch norm into its convolution, nothing left of it
    model = seeded(ConvNet()).eval()
    compiled, report = compiled_with_report(model)
    assert_matches_eager(compiled, model, torch.randn(2, 3, 8, 8))
    (graph,) = compiled_graphs(report)
    assert len(graph.inputs) == 1  # the image; no weight crosses per call
    assert not any("norm" in node.op for node in graph.nodes)


@pytest.mark.parametrize("change", ["in place", "swapped"])
def test_a_weight_changed_after_freezing_is_not_ignored(change, caplog):
    model = seeded(ConvNet()).eval()
    compiled, report = compiled_with_report(model)
    x = torch.randn(2, 3, 8, 8)
    assert_matches_eager(compiled, model, x)
    with torch.no_grad():
        if change == "in place":
            model.conv.weight.mul_(-2.0)
            model.bn2.running_var.add_(3.0)
        else:
            model.head.weight = torch.nn.Parameter(torch.randn_like(model.head.weight))
    with caplog.at_level(logging.INFO, logger="fusionlang.import"):
        assert_matches_eager(compiled, model, x)
        assert_matches_eager(compiled, model, x)  # then the inputs path, compiled once
    assert sum("compiled again with them as inputs" in r.message for r in caplog.records) <= 1


def test_a_training_graph_keeps_its_weights_as_inputs():
    model = seeded(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()))
    compiled, report = compiled_with_report(model)
    compiled(torch.randn(2, 8)).sum().backward()
    assert all(piece.constants == {} for piece in report.pieces)
    assert model[0].weight.grad is not None


def test_a_contiguous_input_reaches_the_compiled_code_in_torchs_own_memory(monkeypatch):
    from fusionlang.backend.runtime import CompiledGraph

    model = seeded(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())).eval()
    compiled, report = compiled_with_report(model)
    x = torch.randn(2, 8)
    assert_matches_eager(compiled, model, x)
    addresses = []
    run_checked = CompiledGraph.run_checked

    def recording(self, feeds):
        addresses.extend(feed.ctypes.data for feed in feeds.values())
        results = run_checked(self, feeds)
        addresses.extend(result.ctypes.data for result in results.values())
        return results

    monkeypatch.setattr(CompiledGraph, "run_checked", recording)
    with torch.no_grad():
        out = compiled(x)
    feed, result = addresses  # the one input (the weights are constants), the one output
    assert feed == x.data_ptr() and result == out.data_ptr()


def test_buffers_a_graph_updates_without_gradients_are_not_left_frozen():
    # batch norm in training mode under no_grad writes its running statistics each call:
    # the first write changes a frozen buffer, and the next call must read the new one
    model = seeded(torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3))).train()
    reference = copy.deepcopy(model)
    compiled, _ = compiled_with_report(model)
    for _ in range(3):
        x = torch.randn(2, 2, 6, 6)
        assert_matches_eager(compiled, reference, x)
        np.testing.assert_allclose(model[1].running_var.numpy(), reference[1].running_var.numpy(), rtol=1e-5)


@pytest.mark.parametrize("options, rules", [
    ({}, "apollo_patterns"),                    # as fusionlang.fuse for the C target: attention patterns
    ({"strategy": "dp"}, "apollo"),             # dp takes no pattern entries
    ({"rules": "xla"}, "xla"),                  # a named rule set is kept
])
def test_the_default_rule_set_is_the_c_targets_default(options, rules):
    assert torch_backend.settings_from(options).rules.name == rules
