"""Diagnostics: one that has no position (span None, as ``getattr(expr, "span", None)``
gives for a node without one) is reported at ``<builtin>`` instead of breaking the sorting
of all of them."""

from __future__ import annotations

from fusionlang.lang.diagnostics import Diagnostics, Span


def test_a_diagnostic_without_a_span_is_reported_at_builtin():
    diags = Diagnostics()
    diags.error(Span("a.fuse", 2, 5), "with a place")
    diags.error(None, "without one")
    diags.warning(None, "nor this")
    assert [str(d) for d in diags.sorted()] == [
        "a.fuse:2:5: error: with a place",
        "<builtin>:0:0: error: without one",
        "<builtin>:0:0: warning: nor this",
    ]
