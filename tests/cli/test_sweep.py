"""`fusionlang sweep` as a rule author runs it: two small models and a broken file with
--rules xla --baseline apollo write the JSON and the HTML with one row per model, the
broken one failed; a rerun comes from the cache; --jobs 2 and --ray give the rows
--jobs 1 gives (less the timings); bad input is one line and exit 2."""

from __future__ import annotations

import json
import sys

import pytest
from cli_helpers import one_line_error

from fusionlang.cli import main
from fusionlang.sweep.rows import without_timings
from small_models import mlp_model, silu_model


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("zoo")
    silu_model(folder / "silu.onnx")
    mlp_model(folder / "mlp.onnx")
    (folder / "broken.onnx").write_bytes(b"not an onnx model")
    return folder


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSIONLANG_CACHE_DIR", str(tmp_path / "cache"))


def sweep(tmp_path, zoo, *flags) -> tuple[int, dict]:
    out = tmp_path / "sweep.json"
    status = main(["sweep", str(zoo), "--rules", "xla", "--baseline", "apollo", "--json", str(out), *flags])
    return status, json.loads(out.read_text())


@pytest.fixture(scope="module")
def serial_rows(zoo, tmp_path_factory):
    """--jobs 1 (in this process), written once for the module: the rows the others must give."""
    folder = tmp_path_factory.mktemp("serial")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FUSIONLANG_CACHE_DIR", str(folder / "cache"))
        status = main(["sweep", str(zoo), "--rules", "xla", "--baseline", "apollo", "--jobs", "1",
                       "--json", str(folder / "s.json"), "--report", str(folder / "s.html")])
        doc = json.loads((folder / "s.json").read_text())
        # a rerun comes from the cache: no build runs
        assert main(["sweep", str(zoo), "--rules", "xla", "--baseline", "apollo", "--jobs", "1",
                     "--json", str(folder / "again.json")]) == 1
    again = json.loads((folder / "again.json").read_text())
    pages = {path.name: path.read_text() for path in (folder / "s_models").iterdir()}
    return status, doc, (folder / "s.html").read_text(), again, pages


def test_one_row_per_model_and_the_broken_file_is_a_failed_row(serial_rows, capsys):
    status, doc, html, _, pages = serial_rows
    assert status == 1  # a row failed: the sweep completed and says so
    rows = {row["name"]: row for row in doc["rows"]}
    assert list(rows) == ["broken", "mlp", "silu"]
    assert rows["broken"]["status"] == "failed" and "not a valid ONNX file" in rows["broken"]["error"]
    assert "\n" not in rows["broken"]["error"]
    mlp = rows["mlp"]
    assert mlp["status"] == "ok" and mlp["checks_ok"]
    assert mlp["a"]["check_reference"] == "ok" and mlp["b"]["check_onnxruntime"] == "ok"
    assert mlp["a"]["kernels"] > mlp["b"]["kernels"] and mlp["groups_differ"] > 0  # xla fuses less than apollo
    assert doc["summary"]["models"] == 3 and doc["summary"]["failed"] == 1
    assert doc["summary"]["geomean_a_over_b"]["kernels"]["models"] == 2
    assert doc["builds"] == {"run": 6, "cached": 0}
    assert html.count("<tr") == 4 and "<svg" in html and "not a valid ONNX file" in html and "<script" not in html
    # each ok row links to its model's report under both policies, written beside the page
    assert rows["mlp"]["reports"] == {"A": "s_models/002-mlp-A.html", "B": "s_models/002-mlp-B.html"}
    assert "href='s_models/002-mlp-A.html'" in html and "reports" not in rows["broken"]


def test_the_model_reports_are_each_policys_plan(serial_rows):
    pages = serial_rows[4]
    assert sorted(pages) == ["002-mlp-A.html", "002-mlp-B.html", "003-silu-A.html", "003-silu-B.html"]
    assert "mlp under xla" in pages["002-mlp-A.html"] and "mlp under apollo" in pages["002-mlp-B.html"]


def test_a_rerun_hits_the_cache(serial_rows):
    _, doc, _, again, _ = serial_rows
    assert again["builds"] == {"run": 0, "cached": 6}
    # timings too: they are the cached builds' (the rerun wrote no report pages to link)
    assert again["rows"] == [{k: v for k, v in row.items() if k != "reports"} for row in doc["rows"]]


def test_jobs_2_gives_the_rows_of_jobs_1_and_measures(serial_rows, zoo, tmp_path):
    status, doc = sweep(tmp_path, zoo, "--jobs", "2", "--measure", "--rounds", "2")
    assert status == 1 and doc["builds"]["run"] == 6
    assert [without_timings(r) for r in doc["rows"]] == [without_timings(r) for r in serial_rows[1]["rows"]]
    measured = [row["measure"] for row in doc["rows"] if row["status"] == "ok"]
    assert len(measured) == 2 and all(m["rounds"] == 2 and m["wall_ratio"] > 0 for m in measured)
    assert "run_wall" in doc["summary"]["geomean_a_over_b"]


@pytest.mark.ray
def test_ray_on_a_local_cluster_gives_the_rows_of_the_pool(serial_rows, zoo, tmp_path):
    status, doc = sweep(tmp_path, zoo, "--ray", "--jobs", "2", "--no-cache", "--measure", "--rounds", "1")
    assert status == 1 and doc["settings"]["executor"] == "ray" and doc["builds"]["run"] == 6
    assert [without_timings(r) for r in doc["rows"]] == [without_timings(r) for r in serial_rows[1]["rows"]]
    # measured in the timer actor the local cluster's fusionlang_timer resource admits
    measured = [row["measure"] for row in doc["rows"] if row["status"] == "ok"]
    assert len(measured) == 2 and all(m["rounds"] == 1 and m["cpu_ratio"] > 0 for m in measured)


@pytest.mark.parametrize("flags, message", [
    (["--jobs", "0"], "argument --jobs: the job count must be"),
    (["--rounds", "x"], "argument --rounds:"),
    (["--json", "/no/such/dir/out.json"], "cannot write '/no/such/dir/out.json'"),
    (["--ray", "127.0.0.1:1", "--jobs", "2"], "--jobs sets the CPUs of a local Ray cluster"),
    (["--option", "max_ops"], "argument --option: expected KEY=VALUE"),
    (["--option", "max_opz=3"], "unknown option 'max_opz' for strategy 'apollo'; did you mean 'max_ops'"),
    (["--option", "max_ops=0"], "option 'max_ops' of strategy 'apollo' must be at least 1"),
])
def test_bad_flags_are_one_line_and_exit_2(zoo, capsys, flags, message):
    argv = ["sweep", str(zoo), "--rules", "xla", "--baseline", "apollo", *flags]
    assert message in one_line_error(capsys, argv)


def test_an_unknown_rule_set_is_the_loaders_diagnostic_and_exit_2(zoo, capsys):
    # a rule set is loaded before any build: a typo costs no build
    assert main(["sweep", str(zoo), "--rules", "xla", "--baseline", "no_such_rules"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("no_such_rules:1:1: error: no rule file or rule set named 'no_such_rules'")


def test_a_zoo_that_is_missing_or_empty_is_one_line_and_exit_2(tmp_path, capsys):
    for zoo in (tmp_path / "missing", tmp_path):
        assert "sweep: " in one_line_error(capsys, ["sweep", str(zoo), "--rules", "xla", "--baseline", "apollo"])


def test_a_listed_zoo_resolves_paths_against_its_file(zoo, tmp_path, capsys):
    listing = tmp_path / "zoo.txt"
    listing.write_text(f"# one model\n{zoo.name}/silu.onnx\n")
    (tmp_path / zoo.name).symlink_to(zoo)
    assert main(["--json", "sweep", str(listing), "--rules", "xla", "--baseline", "apollo", "--jobs", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in doc["rows"]] == ["silu"] and doc["rows"][0]["status"] == "ok"


def test_a_ray_address_where_nothing_listens_is_one_line_and_exit_2_not_a_hang(zoo, capsys):
    import socket

    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    argv = ["sweep", str(zoo), "--rules", "xla", "--baseline", "apollo", "--ray", f"127.0.0.1:{port}"]
    assert f"--ray: cannot reach a Ray cluster at 127.0.0.1:{port}: ConnectionRefusedError" in one_line_error(capsys, argv)


def test_ray_not_installed_says_how_to_install_it(zoo, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if it were not installed
    argv = ["sweep", str(zoo), "--rules", "xla", "--baseline", "apollo", "--ray"]
    assert "--ray: Ray is not installed (pip install 'fusionlang[ray]'" in one_line_error(capsys, argv)


def test_a_terminal_gets_a_progress_bar_with_counts_and_an_eta(tmp_path):
    from cli_helpers import run_on_terminal

    silu_model(tmp_path / "silu.onnx")
    status, output = run_on_terminal("sweep", tmp_path, "--rules", "xla", "--baseline", "apollo", "--jobs", "1",
                                     "--no-cache")
    assert status == 0, output
    assert "build" in output and "/2" in output and "ETA" in output
    assert "silu: kernels 1 vs 1" in output
