"""run --output-dir: file names made from tensor names are safe, bounded and distinct, and
the run says which output went to which file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper

from fusionlang.cli import main
from fusionlang.cli.outputs import MAX_STEM_BYTES, file_stems, safe_stem

LONG = "x" * 5000
HOSTILE_NAMES = ["a/b", "a_b", "A_B", LONG, "..", "\x1b[31mred\r", "../../etc/passwd", ".hidden"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    nodes = [helper.make_node("Relu", ["x"], [n], name=f"n{k}") for k, n in enumerate(HOSTILE_NAMES)]
    graph = helper.make_graph(nodes, "names", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in HOSTILE_NAMES])
    path = tmp_path_factory.mktemp("names") / "names.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_every_output_lands_in_its_own_file_inside_the_folder(capsys, model, tmp_path):
    out_dir = tmp_path / "out"
    assert main(["--json", "run", model, "--random-inputs", "0", "--output-dir", str(out_dir)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    files = json.loads(captured.out)["files"]
    assert list(files) == HOSTILE_NAMES
    paths = [Path(p) for p in files.values()]
    assert all(p.parent == out_dir for p in paths)
    assert sorted(out_dir.iterdir()) == sorted(paths)
    assert len({p.name.lower() for p in paths}) == len(paths)
    relu = np.maximum(np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32), 0)
    for name, path in files.items():
        np.testing.assert_array_equal(np.load(path), relu, err_msg=repr(name))


def test_the_text_output_names_renamed_outputs(capsys, model, tmp_path):
    assert main(["run", model, "--random-inputs", "0", "--output-dir", str(tmp_path)]) == 0
    wrote = [line for line in capsys.readouterr().out.splitlines() if line.startswith("wrote ")]
    assert f"wrote {tmp_path / 'a_b.npy'}" in wrote
    assert f"wrote {tmp_path / 'output.npy'}  (output '..')" in wrote
    assert f"wrote {tmp_path / '__31mred_.npy'}  (output '\\x1b[31mred\\r')" in wrote


def test_a_long_name_is_cut_and_keeps_a_digest():
    stem = safe_stem(LONG)
    digest = hashlib.sha256(LONG.encode()).hexdigest()[:8]
    assert len(stem.encode()) == MAX_STEM_BYTES and stem.endswith(f"-{digest}")
    assert safe_stem(LONG + "y") != stem


@pytest.mark.parametrize("name, stem", [
    ("y", "y"), ("a/b", "a_b"), ("..", "output"), ("../../etc/passwd", "_.._etc_passwd"), (".hidden", "hidden"),
    ("", "output"), ("tab\there", "tab_here"), ("ü", "_"),
])
def test_safe_stem(name, stem):
    assert safe_stem(name) == stem


def test_names_that_need_no_change_keep_them():
    assert file_stems(["a/b", "a_b", "A_B"]) == {"a/b": "a_b-3", "a_b": "a_b", "A_B": "A_B-2"}


@given(st.lists(st.text(max_size=300), max_size=12, unique=True))
def test_file_stems_are_safe_bounded_and_distinct(names):
    stems = file_stems(names)
    assert list(stems) == names
    assert len({s.lower() for s in stems.values()}) == len(names)
    for stem in stems.values():
        assert 0 < len(stem.encode()) <= MAX_STEM_BYTES
        assert not stem.startswith(".") and "/" not in stem and stem.isascii() and stem.isprintable()
