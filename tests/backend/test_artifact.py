"""A compiled C graph saved with CompiledGraph.save and loaded with fusionlang.load, in a
fresh process, computes the same bits, imports none of the compiler's libraries, checks
feeds and reports bad indices as the compiled graph does, and is refused (ArtifactError,
one line) when it is missing a file, of another version, built for CPU features this
machine lacks, or changed after saving."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fusionlang
from fusionlang.backend import artifact
from fusionlang.backend.ccompile import native_features
from fusionlang.backend.machine import cpu_features
from fusionlang.engine.plan import per_node_plan
from fusionlang.errors import ArtifactError, InputError
from fusionlang.frontend import from_onnx
from fusionlang.ops import GraphBuilder

from helpers import random_feeds

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import model_runtime  # noqa: E402  (bench/: the BERT layer the runtime benchmark times)

#: what loading and running an artifact must not import (islpy, sympy, lark: the compiler's)
HEAVY = ("islpy", "sympy", "lark", "networkx", "onnx")


def embedding_graph(scale: float = 1.0):
    """x[ids] -> matmul -> relu: a checked gather, a constant, a template kernel."""
    b = GraphBuilder("embed")
    x = b.input("x", (5, 3), "float32")
    ids = b.input("ids", (4,), "int64")
    w = b.constant(np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2) * np.float32(scale))
    b.output(b.relu(b.matmul(b.gather(x, ids, axis=0), w)))
    return b.build()


def embedding_feeds(ids=(0, 4, 2, -1)):
    return {"x": np.arange(15, dtype=np.float32).reshape(5, 3) - 4, "ids": np.asarray(ids, np.int64)}


@pytest.fixture(scope="module")
def embedding(tmp_path_factory):
    """(compiled graph, its artifact directory)."""
    compiled = fusionlang.compile(fusionlang.fuse(embedding_graph(), "apollo"), "c")
    return compiled, compiled.save(tmp_path_factory.mktemp("artifact") / "embed.fl")


def bert_layer_graph():
    """A BERT encoder layer (attention, layer norms, GELU feed-forward), small."""
    return from_onnx(model_runtime.bert_layer(seq=8, hidden=32, heads=4, ffn=64))


def _run_in_fresh_process(path: Path, feeds: dict, tmp_path: Path) -> tuple[dict, list[str]]:
    """(outputs of fusionlang.load(path).run(feeds), HEAVY modules loaded) in a new interpreter."""
    np.savez(tmp_path / "feeds.npz", **feeds)
    code = (f"import json, sys, numpy as np, fusionlang\n"
            f"feeds = dict(np.load({str(tmp_path / 'feeds.npz')!r}))\n"
            f"out = fusionlang.load({str(path)!r}).run(feeds)\n"
            f"np.savez({str(tmp_path / 'out.npz')!r}, **out)\n"
            f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return dict(np.load(tmp_path / "out.npz")), json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("build", [embedding_graph, bert_layer_graph])
def test_a_loaded_artifact_computes_the_same_bits_in_a_fresh_process_without_the_compiler(build, tmp_path):
    graph = build()
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c")
    feeds = embedding_feeds() if graph.name == "embed" else random_feeds(graph)
    want = compiled.run(feeds)
    got, heavy = _run_in_fresh_process(compiled.save(tmp_path / "m.fl"), feeds, tmp_path)
    assert heavy == []
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].tobytes() == want[name].tobytes(), name


def test_saving_over_an_artifact_leaves_a_process_running_it_as_it_was(tmp_path):
    first = fusionlang.compile(fusionlang.fuse(embedding_graph(), "apollo"), "c")
    loaded = fusionlang.load(first.save(tmp_path / "m.fl"))
    want = loaded.run(embedding_feeds())
    other = fusionlang.compile(fusionlang.fuse(embedding_graph(scale=3.0), "apollo"), "c")
    other.save(tmp_path / "m.fl")  # same sizes, other weights: files replaced, not rewritten in place
    (name,) = want
    assert loaded.run(embedding_feeds())[name].tobytes() == want[name].tobytes()
    assert fusionlang.load(tmp_path / "m.fl").run(embedding_feeds())[name].tobytes() != want[name].tobytes()
    assert sorted(p.name for p in (tmp_path / "m.fl").iterdir()) == artifact_files()  # no scratch left


def artifact_files():
    return ["constants.npz", "manifest.json", "model.so", "plan.json"]


def test_the_artifact_directory_holds_its_four_files(embedding):
    _, path = embedding
    assert sorted(p.name for p in path.iterdir()) == artifact_files()
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["inputs"] == [{"name": "x", "shape": [5, 3], "dtype": "float32"},
                                  {"name": "ids", "shape": [4], "dtype": "int64"}]
    assert manifest["fusionlang"] == fusionlang.__version__ and manifest["format"] == artifact.FORMAT
    assert "-march=native" in manifest["compiler"]["flags"]
    assert {"groups"} <= set(json.loads((path / "plan.json").read_text()))


def test_the_manifest_names_the_instruction_sets_the_library_may_use(embedding):
    features = set(json.loads((embedding[1] / "manifest.json").read_text())["cpu_features"])
    assert features <= cpu_features()
    if platform.machine() == "x86_64" and native_features() is not None:  # GCC lists what -march=native enables
        assert {"sse2", "avx2", "fma"} & cpu_features() <= features
        assert not features & {"hypervisor", "constant_tsc", "cpuid", "tsc_known_freq"}  # not instruction sets


def test_feeds_are_checked_with_the_compiled_graphs_words(embedding):
    compiled, path = embedding
    loaded = fusionlang.load(path)
    for bad in ({"x": embedding_feeds()["x"]}, {**embedding_feeds(), "z": np.zeros(1)},
                {**embedding_feeds(), "x": np.zeros((5, 4), np.float32)},
                {**embedding_feeds(), "ids": np.array([0, 1, 2, 2**40], np.int64).astype(np.float64)}):
        with pytest.raises(InputError) as want:
            compiled.run(bad)
        with pytest.raises(InputError) as got:
            loaded.run(bad)
        assert str(got.value) == str(want.value)


def test_a_bad_gather_index_is_the_same_input_error(embedding):
    compiled, path = embedding
    with pytest.raises(InputError) as want:
        compiled.run(embedding_feeds(ids=(0, 9, 1, 2)))
    with pytest.raises(InputError) as got:
        fusionlang.load(path).run(embedding_feeds(ids=(0, 9, 1, 2)))
    assert "index 9 is out of range" in str(got.value) and str(got.value) == str(want.value)


def test_an_openmp_build_loads_and_runs_on_its_threads(tmp_path):
    graph = embedding_graph()
    compiled = fusionlang.compile(fusionlang.fuse(graph, "apollo"), "c", threads=2)
    want, got = compiled.run(embedding_feeds()), fusionlang.load(compiled.save(tmp_path / "t")).run(embedding_feeds())
    assert json.loads((tmp_path / "t" / "manifest.json").read_text())["options"]["threads"] == 2
    assert all(got[name].tobytes() == want[name].tobytes() for name in want)


def test_outputs_that_are_feeds_or_constants_come_back_too(tmp_path):
    b = GraphBuilder("passing")
    x = b.input("x", (2, 3))
    c = b.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    b.output(b.exp(x), x, c)
    graph = b.build()
    compiled = fusionlang.compile(per_node_plan(graph), "c")
    feeds = random_feeds(graph)
    want, got = compiled.run(feeds), fusionlang.load(compiled.save(tmp_path / "p")).run(feeds)
    assert list(got) == list(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


def test_bfloat16_constants_keep_their_dtype(tmp_path):
    import ml_dtypes

    b = GraphBuilder("bf16")
    x = b.input("x", (4,), "bfloat16")
    b.output(b.add(x, b.constant(np.array([1.5, -2, 3, 0.25], ml_dtypes.bfloat16))))
    graph = b.build()
    compiled = fusionlang.compile(per_node_plan(graph), "c")
    feeds = {"x": np.array([1, 2, 3, 4], ml_dtypes.bfloat16)}
    want, got = compiled.run(feeds), fusionlang.load(compiled.save(tmp_path / "b")).run(feeds)
    (name,) = want
    assert got[name].dtype == want[name].dtype and got[name].tobytes() == want[name].tobytes()


# ----- refusals -----------------------------------------------------------------------------
def _copy(path: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy.fl"
    copy.mkdir()
    for f in path.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    return copy


def _edit_manifest(path: Path, **changes) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    manifest.update(changes)
    (path / "manifest.json").write_text(json.dumps(manifest))


def _refusal(path: Path) -> str:
    with pytest.raises(ArtifactError) as exc:
        fusionlang.load(path)
    assert exc.value.exit_code == 2 and "\n" not in str(exc.value)
    return str(exc.value)


def test_a_changed_library_byte_is_refused(embedding, tmp_path):
    copy = _copy(embedding[1], tmp_path)
    data = bytearray((copy / "model.so").read_bytes())
    data[len(data) // 2] ^= 1
    (copy / "model.so").write_bytes(bytes(data))
    assert "model.so: its SHA-256 is not the one the manifest records" in _refusal(copy)


def test_changed_constants_are_refused(embedding, tmp_path):
    copy = _copy(embedding[1], tmp_path)
    with np.load(copy / "constants.npz") as archive:
        arrays = {k: archive[k].copy() for k in archive.files}
    arrays["c0"][0] ^= 1
    np.savez(copy / "constants.npz", **arrays)
    assert "constants.npz: its SHA-256 is not the one" in _refusal(copy)


@pytest.mark.parametrize("version, refused", [("99.1.0", True), ("0.0.1", True), (None, False)])
def test_another_major_minor_version_is_refused(embedding, tmp_path, version, refused):
    copy = _copy(embedding[1], tmp_path)
    same_minor = artifact._minor_version(fusionlang.__version__) + ".999"
    _edit_manifest(copy, fusionlang=version or same_minor)
    if refused:
        assert f"saved by fusionlang {version}" in _refusal(copy)
    else:
        assert fusionlang.load(copy).run(embedding_feeds())


def test_another_format_is_refused(embedding, tmp_path):
    copy = _copy(embedding[1], tmp_path)
    _edit_manifest(copy, format=artifact.FORMAT + 1)
    assert f"artifact format {artifact.FORMAT + 1}" in _refusal(copy)


def test_a_cpu_feature_this_machine_lacks_is_refused(embedding, tmp_path):
    copy = _copy(embedding[1], tmp_path)
    manifest = json.loads((copy / "manifest.json").read_text())
    _edit_manifest(copy, cpu_features=manifest["cpu_features"] + ["no_such_feature_zz"])
    assert "CPU features this processor lacks (no_such_feature_zz)" in _refusal(copy)


def test_another_kind_of_processor_is_refused(embedding, tmp_path):
    copy = _copy(embedding[1], tmp_path)
    _edit_manifest(copy, machine="pdp11")
    assert "built for pdp11 processors" in _refusal(copy)


@pytest.mark.parametrize("missing", ["model.so", "constants.npz", "manifest.json"])
def test_a_missing_file_is_refused(embedding, tmp_path, missing):
    copy = _copy(embedding[1], tmp_path)
    (copy / missing).unlink()
    assert missing in _refusal(copy)


@pytest.mark.parametrize("text, says", [("{not json", "corrupt manifest"), ("[1, 2]", "corrupt manifest (no 'format')"),
                                        ('{"format": 1}', "corrupt manifest (no 'fusionlang')")])
def test_a_corrupt_manifest_is_refused(embedding, tmp_path, text, says):
    copy = _copy(embedding[1], tmp_path)
    (copy / "manifest.json").write_text(text)
    assert says in _refusal(copy)


def test_a_path_that_is_not_a_directory_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    assert "not an artifact directory (not a directory)" in _refusal(tmp_path / "file")
    assert "not an artifact directory (no such path)" in _refusal(tmp_path / "nothing")


def test_save_refuses_other_targets_and_a_foreign_directory(embedding, tmp_path):
    plan = fusionlang.fuse(embedding_graph(), "apollo")
    with pytest.raises(ArtifactError, match="only C artifacts are supported .*'cuda-emu'"):
        fusionlang.compile(plan, "cuda-emu").save(tmp_path / "emu")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(ArtifactError, match="non-empty directory that holds no artifact"):
        embedding[0].save(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    again = embedding[0].save(_copy(embedding[1], tmp_path))  # an earlier artifact is replaced
    assert fusionlang.load(again).run(embedding_feeds())


def test_constants_are_an_npz_numpy_reads_and_load_uses_their_bytes_in_place(embedding):
    _, path = embedding
    manifest = json.loads((path / "manifest.json").read_text())
    with np.load(path / "constants.npz", allow_pickle=False) as archive:
        saved = [archive[f"c{k}"] for k in range(len(manifest["constants"]))]
    loaded = fusionlang.load(path)._program.constants
    for raw, constant in zip(saved, loaded):
        assert constant.tobytes() == raw.tobytes() and constant.ctypes.data % artifact.ALIGN == 0


def test_constants_written_otherwise_are_refused_even_with_their_hash_recorded(embedding, tmp_path):
    import hashlib
    import zipfile

    copy = _copy(embedding[1], tmp_path)
    with np.load(copy / "constants.npz") as archive:
        arrays = {k: archive[k] for k in archive.files}
    np.savez_compressed(copy / "constants.npz", **arrays)
    with zipfile.ZipFile(copy / "constants.npz") as z:
        assert z.infolist()[0].compress_type == zipfile.ZIP_DEFLATED
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["sha256"]["constants.npz"] = hashlib.sha256((copy / "constants.npz").read_bytes()).hexdigest()
    (copy / "manifest.json").write_text(json.dumps(manifest))
    assert "constants.npz: corrupt constants (ValueError: c0.npy is compressed)" in _refusal(copy)


@pytest.mark.parametrize("damage, says", [
    (lambda layout: layout.update(arena_bytes=0), "outside the arena"),
    (lambda layout: layout["slots"].append(["const", 999]), "(const) names 999"),
    (lambda layout: layout["slots"].append(["arena", "nowhere"]), "(arena) names 'nowhere'"),
    (lambda layout: layout["outputs"][0].update(shape=[1000, 1000]), "does not fit where it is read"),
    (lambda layout: layout.update(align=3), "aligned to 3"),
    (lambda layout: layout.pop("calls"), "KeyError: 'calls'"),
])
def test_a_run_layout_that_would_reach_outside_its_memory_is_refused(embedding, tmp_path, damage, says):
    copy = _copy(embedding[1], tmp_path)
    manifest = json.loads((copy / "manifest.json").read_text())
    damage(manifest["layout"])
    (copy / "manifest.json").write_text(json.dumps(manifest))
    assert "corrupt run layout" in _refusal(copy) and says in _refusal(copy)
