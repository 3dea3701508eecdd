"""Fuzzing the command line in-process: generated bad paths, bad flags and bad models.

Whatever the arguments, ``fusionlang.cli.main`` returns 0, 1 or 2 and nothing escapes
it: exit 2 prints exactly one line on stderr (or ``file:line:col`` diagnostics), never a
traceback and never exit 3 (an internal error); no output holds a raw control character.

Budget: examples per test follow the hypothesis profile (ci: bounded, derandomized;
thorough: long); commands that compile C are a small share of the draws.
"""

from __future__ import annotations

import contextlib
import io
import os
import re

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from fusionlang.cli import main

#: examples per test: the profile's (most bad input fails in milliseconds; a compile takes
#: up to a second)
EXAMPLES = settings.default.max_examples
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

#: a rule-file diagnostic (rendered, or one located line such as "decompose.fuse:34:17: ...")
DIAGNOSTIC = re.compile(r"^.+:\d+:\d+: ")
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def cli(argv: list[str]) -> tuple[int, str, str]:
    """Run the CLI in-process: (status, stdout, stderr). Nothing may escape it."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def check_outcome(argv, status: int, out: str, err: str) -> None:
    shown = f"argv={argv!r}\nstatus={status}\nstderr={err[:2000]!r}"
    assert status in (0, 1, 2), shown
    assert "Traceback" not in err and "internal error" not in err, shown
    assert not RAW_CONTROL.search(out + err), shown
    if status == 2:
        lines = err.splitlines()
        assert lines, shown
        if not DIAGNOSTIC.match(lines[0]):  # diagnostics may span lines (source, caret, hint)
            assert len(lines) == 1 and lines[0].startswith("fusionlang: error: "), shown


def fuzz_cli(argv: list[str]) -> None:
    check_outcome(argv, *cli(argv))


# ----- a valid model and the places around it -------------------------------------------------


def small_model() -> onnx.ModelProto:
    """x[2,3] -> add w -> relu -> softmax -> reduce_mean -> y; plus a gather of a table."""
    w = numpy_helper.from_array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), "w")
    table = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "table")
    idx = numpy_helper.from_array(np.array([0, 3], np.int64), "idx")
    nodes = [helper.make_node("Add", ["x", "w"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["s"], name="softmax", axis=-1),
             helper.make_node("ReduceMean", ["s"], ["y"], name="mean", axes=[1], keepdims=1),
             helper.make_node("Gather", ["table", "idx"], ["g"], name="gather", axis=0)]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1]),
                               helper.make_tensor_value_info("g", TensorProto.FLOAT, [2, 3])], [w, table, idx])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    onnx.save(small_model(), str(root / "m.onnx"))
    np.save(root / "x.npy", np.ones((2, 3), np.float32))
    (root / "folder").mkdir()
    (root / "a_file").write_text("not a folder")
    os.mkfifo(root / "fifo")
    (root / "ok.fuse").write_text('import "apollo.fuse"\n')
    return root


# ----- bad paths ----------------------------------------------------------------------------

PATH_KINDS = ["missing", "folder", "devnull", "long", "control", "no_parent", "file_parent", "fifo", "good"]


def bad_path(place, kind: str, text: str) -> str:
    return {
        "missing": str(place / f"missing_{len(text)}.x"),
        "folder": str(place / "folder"),
        "devnull": os.devnull,
        "long": str(place / ("p" * (256 + len(text)))),
        "control": str(place / f"c{text}\x1b[31m\r.x"),
        "no_parent": str(place / "no_such_dir" / "deeper" / "f.x"),
        "file_parent": str(place / "a_file" / "f.x"),
        "fifo": str(place / "fifo"),
        "good": str(place / "m.onnx"),
    }[kind]


@FUZZ
@given(slot=st.sampled_from(["model", "input", "json", "report", "output_dir", "rules"]),
       kind=st.sampled_from(PATH_KINDS), text=st.text(alphabet=st.characters(blacklist_categories=["Cs"],
                                                                           blacklist_characters="\x00/"), max_size=8))
def test_bad_paths(place, slot, kind, text):
    path = bad_path(place, kind, text)
    if kind == "good" and slot == "rules":
        path = str(place / "ok.fuse")  # a model as a rule file: the rule loader's own fuzz covers that
    if kind == "fifo" and slot in ("json", "report"):
        kind, path = "folder", str(place / "folder")  # writing a fifo nobody reads blocks, as in any tool
    model = str(place / "m.onnx")
    argv = {
        "model": ["fuse", path],
        "input": ["run", model, "--target", "reference", "--input", f"x={path}"],
        "json": ["fuse", model, "--json", path],
        "report": ["fuse", model, "--report", path],
        "output_dir": ["run", model, "--target", "reference", "--random-inputs", "0", "--output-dir", path],
        "rules": ["fuse", model, "--rules", path],
    }[slot]
    try:
        fuzz_cli(argv)
    finally:
        _tidy(place)


def _tidy(place) -> None:
    """Outputs a fuzzed command may have written next to the fixtures: keep the place as it was."""
    for entry in place.iterdir():
        if entry.name not in {"m.onnx", "x.npy", "folder", "a_file", "fifo", "ok.fuse"}:
            if entry.is_dir():
                for f in entry.rglob("*"):
                    if f.is_file():
                        f.unlink()
                for d in sorted(entry.rglob("*"), reverse=True):
                    d.rmdir()
                entry.rmdir()
            else:
                entry.unlink()


# ----- bad flags ----------------------------------------------------------------------------

numbers = st.one_of(st.integers(-2**70, 2**70).map(str),
                    st.floats(allow_nan=True, allow_infinity=True).map(repr),
                    st.text(max_size=12),
                    st.sampled_from(["-5", "0", "4294967295", "4294967296", "1e400", "nan", "-0", "0x10", "1_000"]))
flag_text = st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=12)


@FUZZ
@given(seed=numbers, rtol=numbers, atol=numbers, unknown=st.one_of(st.none(), flag_text.map(lambda t: "--" + t)),
       command=st.sampled_from(["run", "demo_flags", "fuse", "explain"]))
def test_bad_flags(place, seed, rtol, atol, unknown, command):
    model = str(place / "m.onnx")
    argv = {
        "run": ["run", model, "--target", "reference", "--random-inputs", seed, "--rtol", rtol, "--atol", atol],
        # demo's flags fail before it runs anything; good ones would run the whole demo: keep one bad
        "demo_flags": ["demo", "--seed", seed, "--repeat", "0", "--rtol", rtol],
        "fuse": ["fuse", model, "--input-shape", f"x={seed}"],
        "explain": ["explain", model, "--node", seed],
    }[command]
    if unknown is not None:
        argv.append(unknown)
    fuzz_cli(argv)


# ----- bad models ---------------------------------------------------------------------------

OP_TYPES = ["Relu", "Add", "Softmax", "ReduceMean", "Gather", "MatMul", "Reshape", "Transpose", "Concat", "Conv",
            "Expand", "Div", "Sign", "Cast", "NoSuchOp", "", "\x1b[31m"]


@st.composite
def mutated_models(draw) -> bytes:
    """The small model with one to three fields changed, serialized without any check."""
    model = small_model()
    graph = model.graph
    for _ in range(draw(st.integers(1, 3))):
        what = draw(st.sampled_from(["op_type", "attribute", "input_dim", "name", "edge", "elem_type",
                                     "initializer", "opset", "drop", "rename"]))
        node = graph.node[draw(st.integers(0, len(graph.node) - 1))] if len(graph.node) else None
        if what == "op_type" and node is not None:
            node.op_type = draw(st.sampled_from(OP_TYPES))
        elif what == "attribute" and node is not None:
            name = draw(st.sampled_from(["axis", "axes", "keepdims", "perm", "to", "kernel_shape"]))
            value = draw(st.one_of(st.integers(-2**40, 2**40), st.lists(st.integers(-10, 10), min_size=1, max_size=4)))
            del node.attribute[:]
            node.attribute.append(helper.make_attribute(name, value))
        elif what == "input_dim":
            dims = graph.input[0].type.tensor_type.shape.dim
            dims[draw(st.integers(0, len(dims) - 1))].dim_value = draw(
                st.sampled_from([0, 1, 7, 100000, 2**40, 2**62]))
        elif what == "name" and node is not None:
            node.name = draw(st.text(max_size=6)) + "\x1b[31m\r"
        elif what == "edge" and node is not None and len(node.input):
            node.input[draw(st.integers(0, len(node.input) - 1))] = draw(st.sampled_from(["", "x", "y", "nowhere"]))
        elif what == "elem_type":
            graph.input[0].type.tensor_type.elem_type = draw(st.sampled_from([0, 2, 7, 9, 10, 11, 16, 99]))
        elif what == "initializer":
            init = graph.initializer[draw(st.integers(0, len(graph.initializer) - 1))]
            init.dims[0] = draw(st.sampled_from([0, 1, 3, 1000, 2**40]))
        elif what == "opset":
            model.opset_import[0].version = draw(st.sampled_from([1, 5, 13, 21, 22, 99]))
        elif what == "rename" and node is not None:
            # a tensor renamed everywhere it appears: the model stays valid, its names hostile
            old, new = node.output[0], draw(st.sampled_from(["", "../x", "a/b", "\x1b[31m\r", "y" * 3000, "x"]))
            for n in graph.node:
                n.input[:] = [new if v == old else v for v in n.input]
                n.output[:] = [new if v == old else v for v in n.output]
            for out in graph.output:
                out.name = new if out.name == old else out.name
        elif what == "drop" and len(graph.node) > 1:
            del graph.node[draw(st.integers(0, len(graph.node) - 1))]
    return model.SerializeToString()


VALID = small_model().SerializeToString()

model_bytes = st.one_of(
    st.binary(max_size=200),
    st.integers(0, len(VALID) - 1).map(lambda n: VALID[:n]),
    mutated_models(),
)

model_commands = st.sampled_from([
    ["fuse"],
    ["fuse", "--strategy", "tvm"],
    ["explain", "--node", "relu"],
    ["run", "--target", "reference", "--random-inputs", "0"],
    ["run", "--random-inputs", "0", "--check"],
    ["run", "--target", "reference", "--random-inputs", "0", "--output-dir", "{out}"],
])


@FUZZ
@given(data=model_bytes, command=model_commands)
def test_bad_models(tmp_path_factory, data, command):
    root = tmp_path_factory.mktemp("model")
    path = root / "fuzzed.onnx"
    path.write_bytes(data)
    fuzz_cli([command[0], str(path), *(a.format(out=root / "out") for a in command[1:])])
