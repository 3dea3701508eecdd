"""ATen's flattened matrix products imported at the rank of their operands.

Core ATen flattens a Linear on a rank-3 input to ``view(x, [B*S, K]) -> addmm -> view([B, S, N])``
and a batched product to ``expand -> view([B*H, M, K]) -> bmm -> view([B, H, M, N])``. Imported
as they are, the views are layout copies around the product and keep a bias and GELU that
follow apart from its GEMM; the ONNX importer sees ``matmul(x, w) + b`` on the rank-3 tensor,
which the rules fuse with its epilogue. So a product whose only user views it back to its
operands' leading axes is imported as one numpy-style ``matmul`` (plus ``add`` for addmm's
bias) on the unflattened operands; the flattening views are left without users and dropped.
"""

from __future__ import annotations

from math import prod
from typing import Any, Callable

from fusionlang.frontend.torch_ops import target_name

VIEWS = ("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default")
#: product -> how many trailing axes of its first operand are matrix axes
PRODUCTS = {"aten.mm.default": 1, "aten.addmm.default": 1, "aten.bmm.default": 2}
EXPAND = "aten.expand.default"
CLONE = "aten.clone.default"
SPLITS = ("aten.split.Tensor", "aten.split_with_sizes.default")


def deferred_product(node) -> bool:
    """Whether ``node`` is a product import leaves to its only user, a view (which may take
    it at rank, see :func:`ranked_product`)."""
    if target_name(node.target) not in PRODUCTS or len(node.users) != 1:
        return False
    return target_name(next(iter(node.users)).target) in VIEWS and _plain_scaling(node)


def ranked_product(view, env: dict, shape: Callable[[str], tuple], size: list,
                   constant: Callable[[str], bool] = lambda value: False) -> tuple | None:
    """The operands of ``view``'s product at their unflattened rank: ``(a, b, bias)`` graph
    values (bias None for mm/bmm), or None when the product's operands are not views that
    flatten the leading axes ``size`` (the view's resolved target size) restores, or when
    the product reads a variable matrix transposed (``constant`` says which graph values
    are constants, whose transposes fold away)."""
    product = view.args[0]
    name = target_name(product.target)
    bias, a, b = (product.args[0], *product.args[1:3]) if name == "aten.addmm.default" else (None, *product.args[:2])
    if name != "aten.bmm.default" and _matrix_transpose(b) and len(b.users) == 1 and not _split(view) \
            and (name == "aten.mm.default" or not constant(env[b.args[0]])):
        # flat, the product reads the matrix transposed (torch_ops: a gemm with trans_b),
        # and its epilogue carries through the view back to rank (a trained Linear's W^T
        # was a transpose kernel per Linear and step: BERT's forward, 1.3 ms of 60); a
        # transpose read elsewhere too (the forward's W^T, saved for the backward) is
        # copied anyway, and the product at rank keeps its epilogue
        return None
    a_source = _unflattened(a, env, shape, PRODUCTS[name])
    if a_source is None:
        return None
    lead = shape(env[a.args[0]])[:-PRODUCTS[name]]
    b_source = env[b] if name != "aten.bmm.default" else _unflattened(b, env, shape, 2)
    if name == "aten.bmm.default" and b_source is not None and shape(env[b.args[0]])[:-2] != lead:
        return None
    if b_source is None or not _restores(size, lead, shape(a_source), shape(b_source), name):
        return None
    if bias is not None and prod(shape(env[bias])[:-1]) != 1:  # a bias per row: no longer broadcasts
        return None
    return a_source, b_source, None if bias is None else env[bias]


def _restores(size: list, lead: tuple, a_shape: tuple, b_shape: tuple, name: str) -> bool:
    """Whether the view's size is the leading axes followed by the product's matrix axes."""
    if len(lead) < 2:  # nothing was flattened
        return False
    rows = a_shape[-2:-1] if name == "aten.bmm.default" else ()
    return [int(d) for d in size] == [*lead, *rows, b_shape[-1]]


def _unflattened(value, env: dict, shape: Callable[[str], tuple], matrix_axes: int) -> Any:
    """The graph value ``value`` (an FX node) flattened, when it is a view merging leading
    axes of a tensor (through an expand that keeps the matrix axes: matmul broadcasts)."""
    if target_name(getattr(value, "target", "")) not in VIEWS:
        return None
    source = value.args[0]
    flat, full = shape(env[value]), shape(env[source])
    if len(full) <= matrix_axes or flat != (prod(full[:-matrix_axes]), *full[-matrix_axes:]):
        return None
    while target_name(getattr(source, "target", "")) == CLONE:  # a contiguous copy of the expand
        source = source.args[0]
    if matrix_axes == 2 and target_name(getattr(source, "target", "")) == EXPAND:
        expanded = source.args[0]
        if shape(env[expanded])[-matrix_axes:] == full[-matrix_axes:]:
            return _broadcast_source(env[expanded], env[source], shape)
    return env[source]


def _broadcast_source(expanded: str, full: str, shape: Callable[[str], tuple]) -> str:
    """``expanded`` where its leading axes broadcast to ``full``'s (matmul broadcasts them),
    else the expanded value itself."""
    small, big = shape(expanded), shape(full)
    lead_small, lead_big = small[:-2], big[:-2]
    aligned = (1,) * (len(lead_big) - len(lead_small)) + tuple(lead_small)
    return expanded if len(aligned) == len(lead_big) and all(s in (1, t) for s, t in zip(aligned, lead_big)) else full


def _matrix_transpose(value) -> bool:
    """Whether ``value`` (an FX node) transposes a matrix (a backward's ``W^T`` of a weight)."""
    name = target_name(getattr(value, "target", ""))
    return name == "aten.t.default" or (name == "aten.permute.default" and list(value.args[1]) == [1, 0])


def _split(view) -> bool:
    """Whether ``view`` (an FX node) is split: a fused QKV projection's Q, K and V. At rank,
    the product's epilogue stores each part where its heads go; flat, the view back to rank
    stands between the product and the split, which then copies each part in a kernel of
    its own (3 per layer, where the weight's transpose is one, and smaller)."""
    return any(target_name(user.target) in SPLITS for user in view.users)


def _plain_scaling(product) -> bool:
    """addmm with beta = alpha = 1 (the only form a Linear gives); mm and bmm always."""
    if target_name(product.target) != "aten.addmm.default":
        return True
    beta = product.args[3] if len(product.args) > 3 else product.kwargs.get("beta", 1)
    alpha = product.args[4] if len(product.args) > 4 else product.kwargs.get("alpha", 1)
    return beta == 1 and alpha == 1
