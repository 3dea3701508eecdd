"""The resnet50 report in headless Chromium: it renders (screenshot), its script runs
without errors, the SVG has one box per fused group, and searching by URL selects the
node. Skipped only where Chromium cannot be run at all (probed on a trivial page)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

import fusionlang
from fusionlang.report import write_report
from report_helpers import HOSTILE, Elements, light_model, report_data, small_plan

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WINDOW = (1400, 1000)


def _chromium() -> str | None:
    return next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)


def run_chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"  # a fresh profile per run
    profile.mkdir()
    return subprocess.run([_chromium(), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if _chromium() is None:
        pytest.skip("chromium is not installed")
    tmp = tmp_path_factory.mktemp("chromium")
    probe = tmp / "probe.html"
    probe.write_text("<!DOCTYPE html><html><body><p id=x>ok</p></body></html>")
    try:
        result = run_chromium(tmp, "--dump-dom", probe.as_uri())
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"chromium cannot be run here: {exc}")
    if result.returncode != 0 or '<p id="x">ok</p>' not in result.stdout:
        pytest.skip(f"chromium cannot be run here: {result.stderr.strip()[-300:]}")
    return tmp


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    plan = fusionlang.fuse(fusionlang.from_onnx(light_model("resnet50")), "apollo")
    path = tmp_path_factory.mktemp("report") / "resnet50.html"
    write_report(plan, path)
    return plan, path


def dump(browser: Path, url: str) -> tuple[str, Elements]:
    result = run_chromium(browser, "--dump-dom", url)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout, Elements(result.stdout)


def script_errors(dom: str) -> str:
    """What the page's window.onerror wrote into <pre id="script-errors">."""
    (errors,) = re.findall(r'<pre id="script-errors"[^>]*>(.*?)</pre>', dom, re.S)
    return errors


def test_resnet50_report_renders_without_script_errors(browser, resnet):
    plan, path = resnet
    target = plan.graph.nodes[len(plan.graph.nodes) // 2]
    dom, page = dump(browser, f"{path.as_uri()}#node={target.name}")
    body = next(a for t, a in page.tags if t == "body")
    assert body.get("data-ready") == "1"  # the script ran to its end
    assert script_errors(dom) == "" and "data-script-errors" not in body
    # one box per fused group, in both views; the live DOM agrees (counted by the script)
    for view in ("ops", "groups"):
        assert len(page.with_class("rect", "group-box", view)) == len(plan.groups)
    assert body.get("data-group-boxes") == str(2 * len(plan.groups))
    # #node=NAME selected the node, its group box and its group's table
    gid = plan.group_of()[target.name]
    hits = page.with_class("g", "hit")
    assert [a["id"] for a in hits] == [f"o{plan.graph.nodes.index(target)}"]
    assert {a["id"] for a in page.with_class("g", "selected")} == {f"g{gid}", f"c{gid}"}
    shown = [a for a in page.with_class("section", "gdetail") if "hidden" not in a]
    assert [a["data-gid"] for a in shown] == [str(gid)]


def test_resnet50_report_screenshot(browser, resnet):
    _, path = resnet
    shot = browser / "resnet50.png"
    result = run_chromium(browser, f"--window-size={WINDOW[0]},{WINDOW[1]}", "--hide-scrollbars",
                          f"--screenshot={shot}", path.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == WINDOW
    # a blank page of this size compresses to a few KiB; the drawn graph to far more
    blank = browser / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    blank_shot = browser / "blank.png"
    run_chromium(browser, f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={blank_shot}", blank.as_uri())
    assert len(data) > 5 * len(blank_shot.read_bytes())


def test_hostile_names_stay_text_in_the_browser(browser, tmp_path):
    plan = small_plan(HOSTILE)
    path = write_report(plan, tmp_path / "hostile.html")
    dom, page = dump(browser, path.as_uri() + "#node=" + HOSTILE["conv"].replace("%", "%25").replace("#", "%23"))
    body = next(a for t, a in page.tags if t == "body")
    assert body.get("data-ready") == "1"
    assert script_errors(dom) == "" and "data-script-errors" not in body
    assert "img" not in {t for t, _ in page.tags}
    text = "".join(page.text)
    for name in HOSTILE.values():
        assert name in text, name
    assert len(page.with_class("g", "hit")) == 1
    # a malformed %-escape in the URL selects nothing and breaks nothing
    dom, page = dump(browser, path.as_uri() + "#node=%E0%A4%A")
    assert script_errors(dom) == "" and next(a for t, a in page.tags if t == "body").get("data-ready") == "1"
    assert page.with_class("g", "hit") == []


def test_search_by_url_switches_to_the_nodes_page(browser, resnet, tmp_path):
    plan, _ = resnet
    path = write_report(plan, tmp_path / "paged.html", page_ops=40)
    data = report_data(path.read_text())
    name, _, gid, page, element, _ = next(n for n in data["nodes"] if n[3] == 2)
    dom, shown = dump(browser, f"{path.as_uri()}#node={name}")
    assert script_errors(dom) == ""
    visible = [a for t, a in shown.tags if t == "svg" and "graph" in a.get("class", "").split() and "hidden" not in a]
    # large models open on the groups view; the node's page is the one shown
    assert [(a["data-page"], a["data-view"]) for a in visible] == [(str(page), "groups")]
    tables = [a for a in shown.with_class("section", "page-table") if "hidden" not in a]
    assert [a["data-page"] for a in tables] == [str(page)]
    assert [a["data-page"] for a in shown.with_class("button", "current") if "data-page" in a] == [str(page)]
    assert {a["id"] for a in shown.with_class("g", "selected")} == {f"g{gid}", f"c{gid}"}
    assert [a["id"] for a in shown.with_class("g", "hit")] == [element]
