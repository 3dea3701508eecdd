"""A training step of a conv on small planes through torch.compile(backend="fusionlang"):
the forward conv, its input gradient and its weight gradient (a conv of the transposed
input, the channels as its batch) each fold their images into one GEMM's columns, and the
gradients are eager's."""

from __future__ import annotations

import copy
import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fusionlang.torch_backend import CompileReport, fusionlang_backend  # noqa: E402
from test_torch_training import assert_gradients_match, fresh_dynamo  # noqa: E402,F401  (the fixture resets dynamo)


def kernel_details(report) -> list[str]:
    return [k.detail for piece in report.pieces for s in piece._cache.values() for k in s.compiled.kernels]


def test_small_plane_convs_and_their_gradients_fold_their_images_and_give_eagers_gradients():
    # resnet18's last stage in small: 2x2 planes, a batch of 4, a 3x3 conv of 8 -> 16 channels
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU())
    reference = copy.deepcopy(model)
    report = CompileReport()
    x = torch.randn(4, 8, 2, 2)
    input_grads = []
    for net in (torch.compile(model, backend=functools.partial(fusionlang_backend, report=report)), reference):
        leaf = x.clone().requires_grad_()
        net(leaf).square().sum().backward()
        input_grads.append(leaf.grad.numpy())
    np.testing.assert_allclose(*input_grads, rtol=1e-4, atol=1e-5)
    assert_gradients_match(model, reference, rtol=1e-4)
    assert report.fallbacks == [] and report.eager_runs == 0
    details = kernel_details(report)
    # forward (16 x 4 images of 2x2), the input's gradient (8 x 4 images), the weight's:
    # 8 input channels as images of the 3x3 kernel's plane, one GEMM, not one per channel
    for folded in ("GEMM m=16 n=16 k=72", "GEMM m=8 n=16 k=144", "GEMM m=16 n=72 k=16"):
        assert folded in details, details
