"""Every op of a model that import cannot convert, reported at once.

Import scans the whole graph before converting anything, so a user learns every missing
op type from one run: its domain and opset, how many nodes use it, and the first node.
Ops of other domains (ONNX-ML, training, onnxruntime's contrib ops) are named as such.
"""

from __future__ import annotations

from collections import Counter
from typing import Container

import onnx

from fusionlang.errors import UnsupportedOpError
from fusionlang.frontend.onnx_context import node_label

DEFAULT_DOMAINS = ("", "ai.onnx")

#: non-default domains a user meets, and what they hold
KNOWN_DOMAINS = {
    "ai.onnx.ml": "ONNX-ML classical machine-learning ops",
    "ai.onnx.training": "ONNX training ops",
    "ai.onnx.preview.training": "ONNX training ops",
    "com.microsoft": "onnxruntime contrib ops",
}


class UnsupportedOpsError(UnsupportedOpError):
    """Several unsupported ops: ``summary`` then one entry per op type (``lines``)."""

    def __init__(self, summary: str, entries: list[str]):
        self.summary = summary
        self.entries = entries
        super().__init__("\n".join([summary] + [f"  {entry}" for entry in entries]))

    @property
    def lines(self) -> list[str]:
        return [self.summary] + self.entries


def check_supported(model: onnx.ModelProto, label: str, opset: int, converters: Container[str],
                    domain_converters: Container[tuple[str, str]] = ()) -> None:
    """Raise one UnsupportedOpsError naming every op type of ``model`` without a converter
    (``converters``: default-domain op types; ``domain_converters``: (domain, op type) pairs)."""
    counts: Counter[tuple[str, str]] = Counter()
    first: dict[tuple[str, str], str] = {}
    for index, node in enumerate(model.graph.node):
        key = (node.domain if node.domain not in DEFAULT_DOMAINS else "ai.onnx", node.op_type)
        if key[0] == "ai.onnx" and node.op_type in converters or key in domain_converters:
            continue
        counts[key] += 1
        first.setdefault(key, node_label(node, index))
    if not counts:
        return
    opsets = {entry.domain: entry.version for entry in model.opset_import}
    opsets["ai.onnx"] = opset
    entries = [_entry(domain, op_type, opsets, n, first[domain, op_type])
               for (domain, op_type), n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
    kinds = "op type" if len(counts) == 1 else "op types"
    nodes = sum(counts.values())
    summary = (f"model {label!r} uses {len(counts)} {kinds} that fusionlang does not import "
               f"({nodes} node{'s' if nodes != 1 else ''}):")
    raise UnsupportedOpsError(summary, entries)


def _entry(domain: str, op_type: str, opsets: dict[str, int], count: int, first_node: str) -> str:
    opset = opsets.get(domain, "undeclared")
    if domain == "ai.onnx":
        # a name ONNX does not define is more likely a typo or a custom op than a gap of ours
        note = "" if onnx.defs.has(op_type) else "; not an ONNX op"
    else:
        note = f"; {KNOWN_DOMAINS.get(domain, 'a custom domain')}, not supported"
    uses = f"{count} node{'s' if count != 1 else ''}"
    return f"{op_type} (domain {domain}, opset {opset}{note}): {uses}, first {first_node!r}"
