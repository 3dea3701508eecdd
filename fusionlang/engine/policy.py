"""What partitioners ask of a rule set, in one place.

Partitioners read policy only through these helpers, so the rules stay the single
source of truth: categories per node, the fuse table, and strategy options.
"""

from __future__ import annotations

from typing import Any

from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph


def node_categories(graph: Graph, ruleset) -> dict[str, str]:
    return {node.name: ruleset.category_of_node(graph, node) for node in graph.nodes}


def describe_entry(entry) -> str:
    """'apollo.fuse:41:1: fuse elemwise -> reduce : reduce [stitch]'"""
    flags = sorted(entry.flags - {"sibling"}) + [f"{k}={v}" for k, v in sorted(entry.options.items())]
    suffix = f" [{', '.join(flags)}]" if flags else ""
    producers, consumers = '|'.join(sorted(entry.producers)), '|'.join(sorted(entry.consumers))
    pair = f"sibling {producers}, {consumers}" if "sibling" in entry.flags else f"{producers} -> {consumers}"
    return f"{entry.span}: fuse {pair} : {entry.result}{suffix}"


def strategy_options(ruleset, name: str, defaults: dict[str, Any], overrides: dict[str, Any] | None) -> dict:
    """Defaults, then the rule file's ``strategy NAME { ... }``, then explicit overrides.

    Unknown option names are errors: a typo in a rule file must not be silently ignored.
    """
    options = dict(defaults)
    declared = getattr(ruleset, "strategies", {}).get(name)
    sources = []
    if declared is not None:
        sources.append((dict(declared.options), f"{declared.span}: strategy {name}"))
    if overrides:
        sources.append((dict(overrides), "options"))
    for values, where in sources:
        for key, value in values.items():
            if key not in defaults:
                raise FuseError(f"{where}: unknown option {key!r} (known: {', '.join(sorted(defaults))})")
            want = type(defaults[key])
            if want is bool and isinstance(value, int):
                value = bool(value)
            if want is float and isinstance(value, int):
                value = float(value)
            if not isinstance(value, want):
                raise FuseError(f"{where}: option {key!r} expects {want.__name__}, got {value!r}")
            options[key] = value
    return options
