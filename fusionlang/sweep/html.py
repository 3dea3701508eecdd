"""The sweep as one self-contained HTML page: the summary, a table of rows, and for each
measure a bar chart of A against B per model (inline SVG: no script, nothing fetched)."""

from __future__ import annotations

from html import escape

from fusionlang.ir.memory import human_bytes


def shown_bytes(n) -> str:
    """Bytes as a person reads them ("1.50 KiB"), "-" when unknown."""
    return "-" if n is None else human_bytes(int(n))


#: (title, how to read (A, B) off an ok row, how to show a value)
CHARTS = (
    ("kernels", lambda r: (r["a"]["kernels"], r["b"]["kernels"]), lambda v: f"{v:g}"),
    ("global-memory bytes", lambda r: (r["a"]["bytes"], r["b"]["bytes"]), shown_bytes),
    ("fuse + compile seconds", lambda r: (r["a"]["fuse_seconds"] + r["a"]["compile_seconds"],
                                          r["b"]["fuse_seconds"] + r["b"]["compile_seconds"]), lambda v: f"{v:.2f}"),
    ("run milliseconds (wall, median)", lambda r: (1e3 * r["measure"]["a_wall_seconds"], 1e3 * r["measure"]["b_wall_seconds"])
     if "a_wall_seconds" in r.get("measure", {}) else None, lambda v: f"{v:.3f}"),
)
COLORS = {"A": "#3b73b9", "B": "#b0b0b0"}
BAR_HEIGHT, LABEL_WIDTH, CHART_WIDTH = 12, 180, 420

STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}
td.l,th.l{text-align:left}tr.failed td{background:#fde8e8}.bad{color:#b00}.chart{margin:1.5em 0}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}"""


def sweep_html(doc: dict) -> str:
    settings = doc["settings"]
    title = f"sweep: {settings['a']['rules']} (A) against {settings['b']['rules']} (B)"
    ok = [row for row in doc["rows"] if row["status"] == "ok"]
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title>",
             f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>", _summary(doc), _table(doc["rows"]),
             "<p class='legend'>" + "".join(f"<span style='background:{c}'></span>{escape(side)}"
                                            for side, c in COLORS.items()) + "</p>"]
    parts += [_chart(title, [(r["name"], pair(r)) for r in ok if pair(r) is not None], show)
              for title, pair, show in CHARTS]
    return "\n".join(parts) + "\n</body></html>\n"


def _summary(doc: dict) -> str:
    s = doc["summary"]
    items = [f"{s['models']} models: {s['ok']} ok, {s['failed']} failed, {s['check_failures']} with a failed check",
             f"builds run {doc['builds']['run']}, from the cache {doc['builds']['cached']}"]
    items += [f"geomean A/B {name}: {g['value']:.3f} over {g['models']} models"
              for name, g in s["geomean_a_over_b"].items()]
    return "<ul>" + "".join(f"<li>{escape(item)}</li>" for item in items) + "</ul>"


def _table(rows: list[dict]) -> str:
    head = ["model", "kernels A", "kernels B", "bytes A", "bytes B", "groups differ", "fuse s A", "fuse s B",
            "compile s A", "compile s B", "check A", "check B", "run A/B (cpu)", "run A/B (wall)", "rules fired A"]
    lines = ["<table><tr>" + "".join(f"<th class='l'>{h}</th>" if i in (0, 14) else f"<th>{h}</th>"
                                     for i, h in enumerate(head)) + "</tr>"]
    for row in rows:
        name = f"<td class='l' title='{escape(row['model'])}'>{escape(row['name'])}</td>"
        if row["status"] != "ok":
            lines.append(f"<tr class='failed'>{name}<td class='l bad' colspan='{len(head) - 1}'>"
                         f"failed: {escape(row['error'])}</td></tr>")
            continue
        a, b, m = row["a"], row["b"], row.get("measure") or {}
        cells = [a["kernels"], b["kernels"], shown_bytes(a["bytes"]), shown_bytes(b["bytes"]), row["groups_differ"],
                 f"{a['fuse_seconds']:.2f}", f"{b['fuse_seconds']:.2f}", f"{a['compile_seconds']:.2f}",
                 f"{b['compile_seconds']:.2f}", _check(a), _check(b), _ratio(m.get("cpu_ratio")),
                 _ratio(m.get("wall_ratio"))]
        fired = ", ".join(f"{rule} x{n}" for rule, n in a["rewrites"].items())
        lines.append("<tr>" + name + "".join(f"<td>{c}</td>" for c in cells) + f"<td class='l'>{escape(fired)}</td></tr>")
    return "\n".join(lines) + "</table>"


def _check(side: dict) -> str:
    verdicts = [side["check_reference"], side["check_onnxruntime"]]
    failed = [v for v in verdicts if v.startswith("mismatch")]
    if failed:
        return f"<span class='bad' title='{escape('; '.join(failed))}'>mismatch</span>"
    return "ok" if verdicts[1] == "ok" else f"<span title='{escape(verdicts[1])}'>ok (reference)</span>"


def _chart(title: str, values: list, show) -> str:
    """A bar chart: for each (model name, (A, B)) of ``values``, A's bar above B's."""
    if not values:
        return ""
    largest = max(max(pair) for _, pair in values) or 1
    rows = []
    for k, (name, pair) in enumerate(values):
        y = k * (2 * BAR_HEIGHT + 8)
        rows.append(f"<text x='{LABEL_WIDTH - 6}' y='{y + BAR_HEIGHT + 4}' text-anchor='end' font-size='12'>"
                    f"{escape(name)}</text>")
        for j, (side, value) in enumerate(zip(COLORS, pair)):
            width = CHART_WIDTH * value / largest
            top = y + j * BAR_HEIGHT
            rows.append(f"<rect x='{LABEL_WIDTH}' y='{top}' width='{width:.1f}' height='{BAR_HEIGHT - 1}' "
                        f"fill='{COLORS[side]}'><title>{side}: {escape(show(value))}</title></rect>"
                        f"<text x='{LABEL_WIDTH + width + 4:.1f}' y='{top + BAR_HEIGHT - 2}' font-size='10'>"
                        f"{escape(show(value))}</text>")
    height = len(values) * (2 * BAR_HEIGHT + 8)
    return (f"<div class='chart'><h3>{escape(title)}</h3><svg xmlns='http://www.w3.org/2000/svg' "
            f"width='{LABEL_WIDTH + CHART_WIDTH + 80}' height='{height}'>" + "".join(rows) + "</svg></div>")


def _ratio(value) -> str:
    return "-" if value is None else f"{value:.3f}"
