"""What partitioners ask of a rule set, in one place.

Partitioners read policy only through these helpers, so the rules stay the single
source of truth: categories per node, the fuse table, and strategy options. What each
partitioner reads of a fuse entry (flags, options, `nofuse` and guards) is declared
here too, so `lint` and `fuse` judge a rule file by the same table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fusionlang.engine.cost import DEVICES
from fusionlang.errors import FuseError
from fusionlang.ir.graph import Graph
from fusionlang.lang.diagnostics import suggest
from fusionlang.lang.printer import format_expr
from fusionlang.lang.ruleset import PatternEntry


@dataclass(frozen=True)
class EntryVocabulary:
    """What a partitioner reads of a fuse entry; anything else in an entry it would ignore."""

    flags: frozenset[str]
    options: frozenset[str]
    #: honours `nofuse` entries and `when` guards (both need the edge-by-edge look-up)
    guards: bool
    #: groups the matches of `fuse pattern` entries before the category pairs (apollo only)
    patterns: bool = False


#: per strategy: apollo and dp look entries up per edge (`stitch` layer II, `horizontal`
#: layer III, `sibling` entries multi-output fusion, apollo only; dp prices every segment,
#: which is what `cost` asks); tvm matches its post-dominator paths against
#: `path`/`sink`/`phase` and reads no flags
ENTRY_VOCABULARY = {
    "apollo": EntryVocabulary(frozenset({"stitch", "horizontal", "sibling"}), frozenset(), True, True),
    "dp": EntryVocabulary(frozenset({"stitch", "cost"}), frozenset(), True),
    "tvm": EntryVocabulary(frozenset(), frozenset({"path", "sink", "phase"}), False),
}


def node_categories(graph: Graph, ruleset) -> dict[str, str]:
    return {node.name: ruleset.category_of_node(graph, node) for node in graph.nodes}


def describe_entry(entry) -> str:
    """'apollo.fuse:41:1: fuse elemwise -> reduce : reduce [stitch]' (and ' when GUARD'), or
    'ext.fuse:5:1: fuse pattern attention_block'"""
    if isinstance(entry, PatternEntry):
        return f"{entry.span}: fuse pattern {entry.name}"
    producers, consumers = '|'.join(sorted(entry.producers)), '|'.join(sorted(entry.consumers))
    pair = f"sibling {producers}, {consumers}" if "sibling" in entry.flags else f"{producers} -> {consumers}"
    guard = f" when {format_expr(entry.guard)}" if getattr(entry, "guard", None) is not None else ""
    if getattr(entry, "deny", False):
        return f"{entry.span}: nofuse {pair}{guard}"
    flags = sorted(entry.flags - {"sibling"}) + [f"{k}={v}" for k, v in sorted(entry.options.items())]
    suffix = f" [{', '.join(flags)}]" if flags else ""
    return f"{entry.span}: fuse {pair} : {entry.result}{suffix}{guard}"


#: the least value each numeric option takes (a group holds at least one op, with its
#: arguments; a max_ops of 0 left the dp strategy no segment and failed with a KeyError)
OPTION_MINIMUMS = {"max_ops": 1, "max_args": 1, "max_depth": 1, "horizontal_max_groups": 1,
                   "horizontal_max_bytes": 0}


def option_problem(strategy: str, defaults: dict[str, Any], key: str, value) -> tuple[str, Any]:
    """(message, value converted to the option's type); the message is '' when the
    option is fine. Unknown keys get a did-you-mean; `cost` must name a known device."""
    if key not in defaults:
        hint = suggest(key, defaults) or f"options of {strategy}: {', '.join(sorted(defaults))}"
        return f"unknown option {key!r} for strategy {strategy!r}; {hint}", value
    want = type(defaults[key])
    if want is bool and isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        value = bool(value)
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, want) or (want is int and isinstance(value, bool)):
        return f"option {key!r} of strategy {strategy!r} expects {_type_word(want)}, got {value!r}", value
    if key in OPTION_MINIMUMS and value < OPTION_MINIMUMS[key]:
        return f"option {key!r} of strategy {strategy!r} must be at least {OPTION_MINIMUMS[key]}, got {value!r}", value
    if key == "cost" and value not in DEVICES:
        hint = suggest(value, DEVICES) or f"devices: {', '.join(DEVICES)}"
        return f"unknown cost device {value!r}; {hint}", value
    return "", value


def _type_word(kind: type) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(kind, kind.__name__)


def strategy_options(ruleset, name: str, defaults: dict[str, Any], overrides: dict[str, Any] | None) -> dict:
    """Defaults, then the rule file's ``strategy NAME { ... }`` (merged over imports, key
    by key), then explicit overrides (``--option``). Unknown option names, values of the
    wrong type, unknown cost devices, and `nofuse` entries or guards the strategy cannot
    honour are errors: a typo in a rule file must not be silently ignored."""
    refuse_unsupported_entries(ruleset, name)
    options = dict(defaults)
    declared = getattr(ruleset, "strategies", {}).get(name)
    sources: list[tuple[str, object, str]] = []
    if declared is not None:
        spans = getattr(declared, "option_spans", {})
        sources.extend((key, value, f"{spans.get(key, declared.span)}: ") for key, value in declared.options.items())
    sources.extend((key, value, "") for key, value in (overrides or {}).items())
    for key, value, where in sources:
        problem, value = option_problem(name, defaults, key, value)
        if problem:
            raise FuseError(where + problem)
        options[key] = value
    return options


def refuse_unsupported_entries(ruleset, strategy: str) -> None:
    """A `nofuse` entry or a guard the strategy would ignore changes the result silently: refuse."""
    vocabulary = ENTRY_VOCABULARY.get(strategy)
    if vocabulary is None:
        return
    patterns = getattr(ruleset, "fuse_patterns", ())
    if patterns and not vocabulary.patterns:
        raise FuseError(f"{patterns[0].span}: fuse pattern entries are not supported by the {strategy} strategy "
                        "(use apollo)")
    if vocabulary.guards:
        return
    for entry in getattr(ruleset, "fuse_entries", ()):
        what = unsupported_entry(entry, vocabulary)
        if what:
            raise FuseError(f"{entry.span}: {what} are not supported by the {strategy} strategy")


def unsupported_entry(entry, vocabulary: EntryVocabulary) -> str:
    """'nofuse entries' / 'guards on fuse entries' when ``vocabulary`` cannot honour the entry, else ''."""
    if vocabulary.guards:
        return ""
    if entry.deny:
        return "nofuse entries"
    return "guards on fuse entries" if entry.guard is not None else ""
