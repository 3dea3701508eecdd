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
* :func:`check_equivalence` — a graph through rewrite, partition, loop fusion and code
  generation, compared with the reference interpreter of the unfused graph;
  :func:`check_equivalence_many` does it for many graphs with one compiled module.

Needs hypothesis (installed with the ``test`` extra).
"""

from fusionlang.testing.checker import CheckReport, RuleCheck, check_rules
from fusionlang.testing.equivalence import Equivalence, check_equivalence, check_equivalence_many, minimize
from fusionlang.testing.fuzz import fuse_sources, hostile_sources, mutated_sources
from fusionlang.testing.graphgen import COMPOUND_FAMILIES, FAMILIES, graphs, sample_graphs
from fusionlang.testing.instances import Counterexample
from fusionlang.testing.values import Domain, compare, feeds, feeds_for, input_domains

__all__ = [
    "COMPOUND_FAMILIES",
    "CheckReport",
    "Counterexample",
    "Domain",
    "Equivalence",
    "FAMILIES",
    "RuleCheck",
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
    "sample_graphs",
]
