"""``from_torch``: a torch.nn.Module exported with torch.export, imported as a Graph.

``torch.export.export(...).run_decompositions()`` gives the core-ATen graph that
``torch_fx`` converts; its parameters and buffers are bound as constants. torch is
imported on use: it is an optional extra, and costs seconds to import.
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

from fusionlang.frontend.torch_fx import InputSpec, import_fx
from fusionlang.ir.graph import Graph


def from_torch(module, example_args: Sequence[Any], dynamic_shapes=None) -> Graph:
    """``module`` exported with ``torch.export`` (core ATen decompositions) as a Graph for
    the shapes of ``example_args``; parameters and buffers become constants, and the
    graph's outputs are the module's (not the buffer updates of a training-mode norm)."""
    import torch
    from torch.export.graph_signature import InputKind, OutputKind

    with warnings.catch_warnings():
        # torch 2.13's own export pickles a pytree spec it deprecates: not the caller's to act on
        warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
                                category=FutureWarning)
        program = torch.export.export(module, tuple(example_args),
                                      dynamic_shapes=dynamic_shapes).run_decompositions()
    constants, specs = {}, []
    user_args = iter(example_args)
    for spec in program.graph_signature.input_specs:
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            # a non-persistent buffer is kept with the constants, not in the state dict
            held = program.state_dict if spec.target in program.state_dict else program.constants
            constants[spec.arg.name] = as_numpy(held[spec.target])
        else:
            specs.append(input_spec(next(user_args)))
    user_outputs = [spec.arg.name for spec in program.graph_signature.output_specs if spec.kind == OutputKind.USER_OUTPUT]
    return import_fx(program.graph_module, specs, constants, name=type(module).__name__, outputs=user_outputs)


def input_spec(value) -> InputSpec | int:
    """What ``import_fx`` is told of one argument: a tensor's shape and dtype, or an int."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return InputSpec(tuple(value.shape), str(value.dtype).removeprefix("torch."))
    return int(value)


def as_numpy(tensor) -> np.ndarray:
    """The tensor's data as numpy: the same memory when contiguous, else a contiguous copy."""
    if tensor.requires_grad:
        tensor = tensor.detach()
    return (tensor if tensor.is_contiguous() else tensor.contiguous()).numpy()
