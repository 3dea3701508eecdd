"""Lint of a rule set's policy against the partitioners: what `lint` adds to the checker.

The checker (fusionlang.lang) knows the language but not the partitioners, so these
checks run on a checked rule set: every declared strategy names a partitioner, its
options are ones that partitioner takes (with did-you-mean) and of the right type, `cost`
names a known device, and each fuse entry carries only flags and options the strategy
the rule set runs with reads, with `nofuse` entries, guards and `fuse pattern` entries only
where it honours them.
Each diagnostic points at the file:line:col of the offending name.
"""

from __future__ import annotations

from fusionlang.engine.partition import STRATEGIES, default_strategy
from fusionlang.engine.policy import ENTRY_VOCABULARY, option_problem, unsupported_entry
from fusionlang.lang.diagnostics import Diagnostic, suggest


def policy_diagnostics(ruleset) -> list[Diagnostic]:
    """Errors in ``ruleset``'s strategies and fuse entries, in file order."""
    out = _strategy_diagnostics(ruleset)
    if ruleset.fuse_entries:
        out += _entry_diagnostics(ruleset, default_strategy(ruleset))
    out += _pattern_diagnostics(ruleset, default_strategy(ruleset))
    return sorted(out, key=lambda d: (d.span.file, d.span.line, d.span.col))


def _strategy_diagnostics(ruleset) -> list[Diagnostic]:
    out = []
    for name, strategy in ruleset.strategies.items():
        if name not in STRATEGIES:
            hint = suggest(name, STRATEGIES) or f"strategies: {', '.join(STRATEGIES)}"
            out.append(Diagnostic(strategy.span, "error", f"unknown strategy {name!r}", hint))
            continue
        defaults = STRATEGIES[name][1]
        for key, value in strategy.options.items():
            problem, _ = option_problem(name, defaults, key, value)
            if problem:
                message, _, hint = problem.partition("; ")
                out.append(Diagnostic(strategy.option_spans.get(key, strategy.span), "error", message, hint))
    return out


def _entry_diagnostics(ruleset, strategy: str) -> list[Diagnostic]:
    vocabulary = ENTRY_VOCABULARY[strategy]
    out = []
    for entry in ruleset.fuse_entries:
        unsupported = unsupported_entry(entry, vocabulary)
        if unsupported:
            out.append(Diagnostic(entry.span, "error", f"{unsupported} are not supported by the {strategy} strategy",
                                  "the apollo and dp strategies honour them"))
        if "sibling" in entry.flags - vocabulary.flags:
            out.append(Diagnostic(entry.span, "error", f"sibling entries are ignored by the {strategy} strategy",
                                  "the apollo strategy merges siblings"))
        for key in sorted(entry.flags - vocabulary.flags - {"sibling"}):
            out.append(_unread(entry, key, "flag", vocabulary.flags, strategy))
        for key in sorted(set(entry.options) - vocabulary.options):
            out.append(_unread(entry, key, "option", vocabulary.options, strategy))
    return out


def _pattern_diagnostics(ruleset, strategy: str) -> list[Diagnostic]:
    """`fuse pattern` entries under a strategy that cannot group them (apollo can)."""
    if ENTRY_VOCABULARY[strategy].patterns:
        return []
    return [Diagnostic(entry.span, "error", f"fuse pattern entries are not supported by the {strategy} strategy",
                       "the apollo strategy groups pattern matches") for entry in ruleset.fuse_patterns]


def _unread(entry, key: str, kind: str, accepted, strategy: str) -> Diagnostic:
    readers = [name for name, v in ENTRY_VOCABULARY.items() if key in (v.flags if kind == "flag" else v.options)]
    who = f"the {' and '.join(readers)} {'strategies read' if len(readers) > 1 else 'strategy reads'} it"
    hint = suggest(key, accepted) or (f"only {who}" if readers else
                                      f"{strategy} reads {kind}s: {', '.join(sorted(accepted)) or 'none'}")
    return Diagnostic(entry.option_spans.get(key, entry.span), "error",
                      f"fuse entry {kind} {key!r} is ignored by the {strategy} strategy", hint)
