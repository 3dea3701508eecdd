"""How a fusion plan is shown to people: one self-contained HTML file per plan.

    from fusionlang.report import write_report
    write_report(plan, "resnet50.html")                     # graph, groups, summary
    write_report(plan, "resnet50.html", compiled=compiled)  # plus each group's loop nests

The graph is laid out by Graphviz ``dot`` when it is on PATH and by a pure-Python layered
layout otherwise (:mod:`.layout`); large models are paginated (:mod:`.pages`); the page
itself is written by :mod:`.render`.
"""

from fusionlang.report.layout import dot_available
from fusionlang.report.render import render_report, write_report

__all__ = ["dot_available", "render_report", "write_report"]
