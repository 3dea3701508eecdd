"""The .fuse rule language: grammar, parser, checks, diagnostics, RuleSet, printer.

    rules = load_rules("apollo")            # a standard rule set, or a path to a .fuse file
    rules.category_of_node(graph, node)     # "broadcast"
    rules.fuse_result("elemwise", "reduce") # FuseEntry(... result="reduce")

This package reads op names and types from ``fusionlang.ops``; it never applies rules
(that is ``fusionlang.engine``).
"""

from fusionlang.lang.diagnostics import Diagnostic, Span, render
from fusionlang.lang.loader import clear_caches, lint, load_rules, parse_text, rules_dir, standard_names
from fusionlang.lang.printer import format_expr, format_ruleset
from fusionlang.lang.ruleset import (ClassRule, DecomposeRule, DefRule, FuseEntry, RewriteRule, RuleSet, Strategy,
                                     TestBlock)

__all__ = [
    "ClassRule",
    "DecomposeRule",
    "DefRule",
    "Diagnostic",
    "FuseEntry",
    "RewriteRule",
    "RuleSet",
    "Span",
    "Strategy",
    "TestBlock",
    "clear_caches",
    "format_expr",
    "format_ruleset",
    "lint",
    "load_rules",
    "parse_text",
    "render",
    "rules_dir",
    "standard_names",
]
