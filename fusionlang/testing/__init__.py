"""Property-based correctness checking: trust a rule you just wrote, and every fused program.

* strategies for your own hypothesis tests: :func:`graphs` (random graphs with consistent
  shapes), :func:`feeds` / :func:`feeds_for` (inputs with controlled magnitudes, in the
  domain each input's consumers need), :func:`fuse_sources` (valid and mutated ``.fuse``
  text, for fuzzing a front end), :func:`hostile_sources` (``.fuse`` text past the
  language's limits: deep, huge, exploding);
* :func:`check_rules` — every rewrite, decomposition, def, fuse entry, strategy and
  in-file test of a rule set: proved, checked on N instances, failed with a shrunk
  counterexample and the rule's ``file:line``, or skipped with the reason (the CLI is
  ``fusionlang check FILE.fuse...``);
* :func:`run_test_blocks` — the in-file ``test`` blocks of a rule set, each a
  :class:`TestResult` (``fusionlang lint`` and ``check`` run them; needs no hypothesis);
* :func:`check_equivalence` — a graph through rewrite, partition, loop fusion and code
  generation, compared with the reference interpreter of the unfused graph;
  :func:`check_equivalence_many` does it for many graphs with one compiled module.

Everything but the test-block runner needs hypothesis (installed with the ``test`` extra).
"""

import importlib

#: public name -> the module defining it. Loaded on first use (PEP 562): the rule-test
#: runner (testblocks) needs no hypothesis, so `fusionlang lint` can run test blocks
#: without the test extra, and importing one module here does not import them all.
_PUBLIC = {
    "COMPOUND_FAMILIES": "graphgen", "CheckReport": "checker", "Counterexample": "instances",
    "Domain": "values", "Equivalence": "equivalence", "FAMILIES": "graphgen", "RuleCheck": "checker",
    "TestResult": "testblocks", "check_equivalence": "equivalence", "check_equivalence_many": "equivalence",
    "check_rules": "checker", "compare": "values", "feeds": "values", "feeds_for": "values",
    "fuse_sources": "fuzz", "hostile_sources": "fuzz", "graphs": "graphgen", "input_domains": "values",
    "minimize": "equivalence", "mutated_sources": "fuzz", "run_test_blocks": "testblocks",
    "sample_graphs": "graphgen",
}


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'fusionlang.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"fusionlang.testing.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


__all__ = [
    "COMPOUND_FAMILIES",
    "CheckReport",
    "Counterexample",
    "Domain",
    "Equivalence",
    "FAMILIES",
    "RuleCheck",
    "TestResult",
    "check_equivalence",
    "check_equivalence_many",
    "check_rules",
    "compare",
    "feeds",
    "feeds_for",
    "fuse_sources",
    "hostile_sources",
    "graphs",
    "input_domains",
    "minimize",
    "mutated_sources",
    "run_test_blocks",
    "sample_graphs",
]
