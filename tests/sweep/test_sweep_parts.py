"""The sweep's parts without builds: the zoo, rows, the summary, cache keys and the
result cache's trust rule."""

import json
import os

import pytest

from fusionlang.errors import InputError
from fusionlang.sweep.cache import ResultCache, build_key, rules_digest
from fusionlang.sweep.rows import make_row, without_timings
from fusionlang.sweep.summary import geomean, summarize
from fusionlang.sweep.zoo import zoo_models


def _build(kernels, bytes_, check="ok", groups=(("a", "b"),), seconds=1.0):
    return {"kernels": kernels, "launches": kernels, "bytes": bytes_, "bytes_before": 2 * bytes_, "rewrites": {},
            "groups": [list(g) for g in groups], "fuse_seconds": seconds, "compile_seconds": seconds,
            "check_reference": check, "check_onnxruntime": "ok"}


def test_a_folder_zoo_is_its_onnx_files_by_name(tmp_path):
    for name in ("b.onnx", "a.onnx", "notes.txt"):
        (tmp_path / name).write_text("x")
    assert zoo_models(str(tmp_path)) == [str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx")]


def test_a_list_zoo_is_relative_to_its_file_and_skips_comments(tmp_path):
    listing = tmp_path / "zoo.txt"
    listing.write_text("# models\nsub/m.onnx  # a comment\n\n/abs/n.onnx\n")
    assert zoo_models(str(listing)) == [str(tmp_path / "sub/m.onnx"), "/abs/n.onnx"]


@pytest.mark.parametrize("make", ["missing", "empty folder", "empty list"])
def test_a_zoo_with_no_model_is_bad_input(tmp_path, make):
    zoo = {"missing": tmp_path / "nope", "empty folder": tmp_path, "empty list": tmp_path / "z.txt"}[make]
    if make == "empty list":
        zoo.write_text("# nothing\n")
    with pytest.raises(InputError, match="sweep: "):
        zoo_models(str(zoo))


def test_a_row_compares_the_two_builds():
    row = make_row("m/x.onnx", _build(3, 100, groups=[("a", "b"), ("c",)]), _build(2, 80, groups=[("a", "b", "c")]))
    assert (row["name"], row["status"], row["groups_differ"], row["checks_ok"]) == ("x", "ok", 3, True)
    assert row["a"]["kernels"] == 3 and "groups" not in row["a"]


def test_a_failed_build_fails_its_row_and_one_error_is_said_once():
    both = make_row("m.onnx", {"error": "bad file"}, {"error": "bad file"})
    assert (both["status"], both["error"]) == ("failed", "bad file")
    one = make_row("m.onnx", _build(1, 1), {"error": "worker died (signal 11)"})
    assert one["error"] == "B: worker died (signal 11)"


def test_rows_without_timings_differ_only_in_what_was_timed():
    one = make_row("m.onnx", _build(3, 100, seconds=1.0), _build(2, 80, seconds=2.0))
    two = make_row("m.onnx", _build(3, 100, seconds=5.0), _build(2, 80, seconds=7.0)) | {"measure": {"cpu_ratio": 1}}
    assert one != two and without_timings(one) == without_timings(two)
    assert without_timings(one) != without_timings(make_row("m.onnx", _build(4, 100), _build(2, 80)))


def test_the_summary_counts_and_takes_geomeans_over_ok_rows():
    rows = [make_row("x.onnx", _build(4, 100), _build(2, 100)), make_row("y.onnx", _build(1, 50), _build(2, 100)),
            make_row("z.onnx", {"error": "e"}, {"error": "e"}),
            make_row("w.onnx", _build(2, 100, check="mismatch: y: max abs error 1"), _build(2, 100))]
    summary = summarize(rows)
    assert (summary["models"], summary["ok"], summary["failed"], summary["check_failures"]) == (4, 3, 1, 1)
    assert summary["geomean_a_over_b"]["kernels"] == {"value": pytest.approx(1.0), "models": 3}
    assert summary["geomean_a_over_b"]["bytes"]["value"] == pytest.approx(0.5 ** (1 / 3))
    assert geomean([]) is None


def test_the_cache_key_changes_with_each_part(tmp_path):
    rules = tmp_path / "mine.fuse"
    rules.write_text('import "apollo.fuse"\n')
    digest = rules_digest(str(rules))
    assert digest == rules_digest(str(rules)) != rules_digest("apollo")  # apollo alone lacks mine.fuse
    base = build_key("m", digest, None, ())
    assert len({base, build_key("m2", digest, None, ()), build_key("m", digest + "x", None, ()),
                build_key("m", digest, "dp", ()), build_key("m", digest, None, (("max_ops", 2),))}) == 5


def test_the_rules_digest_covers_imported_files(tmp_path):
    (tmp_path / "base.fuse").write_text('import "apollo.fuse"\n')
    (tmp_path / "top.fuse").write_text('import "base.fuse"\n')
    before = rules_digest(str(tmp_path / "top.fuse"))
    (tmp_path / "base.fuse").write_text('import "apollo.fuse"\n# changed\n')
    assert rules_digest(str(tmp_path / "top.fuse")) != before


def test_results_round_trip_as_json_and_a_foreign_key_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSIONLANG_CACHE_DIR", str(tmp_path / "cache"))
    cache = ResultCache()
    assert cache.problem is None and cache.get("k1") is None
    cache.put("k1", {"kernels": 3})
    assert cache.get("k1") == {"kernels": 3}
    (cache.directory / "k2.json").write_text((cache.directory / "k1.json").read_text())  # renamed onto k2
    assert cache.get("k2") is None
    assert json.loads((cache.directory / "k1.json").read_text())["key"] == "k1"


def test_a_cache_others_can_write_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSIONLANG_CACHE_DIR", str(tmp_path / "cache"))
    ResultCache().put("k", {"kernels": 1})
    os.chmod(tmp_path / "cache" / "sweep", 0o777)
    cache = ResultCache()
    assert "writable" in cache.problem and cache.get("k") is None
    assert ResultCache(enabled=False).problem == "disabled (--no-cache)"
