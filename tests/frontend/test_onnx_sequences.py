"""The ONNX sequence ops, resolved at import time into tensor ops on the sequence's elements.

Each model ends in tensors (SequenceAt, ConcatFromSequence, SequenceLength): fusionlang's
graphs hold tensors only. Expected values are computed with Python lists and NumPy, which
share the spec's rules for negative positions.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import fusionlang.onnx_backend as backend
from fusionlang.errors import InputError, ModelError, RuntimeInputError, ShapeError, UnsupportedOpError
from fusionlang.frontend import from_onnx
from onnx_cases import I64, make_model, random_array, run_fusionlang

SHAPE = [2, 3]
XYZ = {"x": SHAPE, "y": SHAPE, "z": SHAPE}


def feeds_xyz() -> dict[str, np.ndarray]:
    return {name: random_array(SHAPE, seed) for seed, name in enumerate("xyz")}


def stacked(nodes, inputs, initializers=None, seq="seq") -> onnx.ModelProto:
    """A model whose output ``out`` stacks sequence ``seq`` along a new axis 0."""
    stack = helper.make_node("ConcatFromSequence", [seq], ["out"], axis=0, new_axis=1)
    return make_model([*nodes, stack], inputs, {"out": None}, 12, initializers)


def position(value: int) -> np.ndarray:
    return np.array(value, np.int64)


def construct_xyz():
    return helper.make_node("SequenceConstruct", ["x", "y", "z"], ["seq"])


@pytest.mark.parametrize("pos", [0, 2, -1, -3])
def test_sequence_at_reads_the_element_at_a_position_negative_from_the_end(pos):
    at = helper.make_node("SequenceAt", ["seq", "pos"], ["out"])
    model = make_model([construct_xyz(), at], XYZ, {"out": None}, 12, {"pos": position(pos)})
    feeds = feeds_xyz()
    (out,) = run_fusionlang(model, feeds)
    np.testing.assert_array_equal(out, [feeds["x"], feeds["y"], feeds["z"]][pos])


@pytest.mark.parametrize("pos", [None, 0, 1, 2, -1, -2])
def test_sequence_insert_at_a_position_or_at_the_end(pos):
    inputs = ["seq0", "z"] + ([] if pos is None else ["pos"])
    nodes = [helper.make_node("SequenceConstruct", ["x", "y"], ["seq0"]),
             helper.make_node("SequenceInsert", inputs, ["seq"])]
    model = stacked(nodes, XYZ, {} if pos is None else {"pos": position(pos)})
    feeds = feeds_xyz()
    expected = [feeds["x"], feeds["y"]]
    expected.insert(len(expected) if pos is None else pos, feeds["z"])
    np.testing.assert_array_equal(run_fusionlang(model, feeds)[0], np.stack(expected))


def test_sequence_empty_then_inserts_builds_the_sequence_in_order():
    nodes = [helper.make_node("SequenceEmpty", [], ["seq0"]),
             helper.make_node("SequenceInsert", ["seq0", "x"], ["seq1"]),
             helper.make_node("SequenceInsert", ["seq1", "y", "front"], ["seq"])]
    model = stacked(nodes, XYZ, {"front": position(0)})
    feeds = feeds_xyz()
    np.testing.assert_array_equal(run_fusionlang(model, feeds)[0], np.stack([feeds["y"], feeds["x"]]))


@pytest.mark.parametrize("pos", [None, 0, 1, -1, -3])
def test_sequence_erase_removes_the_position_or_the_last(pos):
    inputs = ["seq0"] + ([] if pos is None else ["pos"])
    nodes = [helper.make_node("SequenceConstruct", ["x", "y", "z"], ["seq0"]),
             helper.make_node("SequenceErase", inputs, ["seq"])]
    model = stacked(nodes, XYZ, {} if pos is None else {"pos": position(pos)})
    feeds = feeds_xyz()
    expected = [feeds["x"], feeds["y"], feeds["z"]]
    del expected[-1 if pos is None else pos]
    np.testing.assert_array_equal(run_fusionlang(model, feeds)[0], np.stack(expected))


def test_identity_passes_a_sequence_through():
    nodes = [construct_xyz(), helper.make_node("Identity", ["seq"], ["same"]),
             helper.make_node("SequenceAt", ["same", "pos"], ["out"])]
    model = make_model(nodes, XYZ, {"out": None}, 14, {"pos": position(-2)})
    feeds = feeds_xyz()
    np.testing.assert_array_equal(run_fusionlang(model, feeds)[0], feeds["y"])


def test_sequence_length_is_a_constant():
    nodes = [construct_xyz(), helper.make_node("SequenceErase", ["seq"], ["seq2"]),
             helper.make_node("SequenceLength", ["seq2"], ["n"])]
    graph = from_onnx(make_model(nodes, XYZ, {"n": ([], I64)}, 12))
    assert graph.constants[graph.outputs[0]].dtype == np.int64
    assert int(graph.constants[graph.outputs[0]]) == 2


@pytest.mark.parametrize("axis,new_axis", [(0, 0), (1, 0), (-1, 0), (-2, 0), (0, 1), (2, 1), (-1, 1), (-3, 1)])
def test_concat_from_sequence_with_and_without_a_new_axis(axis, new_axis):
    concat = helper.make_node("ConcatFromSequence", ["seq"], ["out"], axis=axis, new_axis=new_axis)
    model = make_model([construct_xyz(), concat], XYZ, {"out": None}, 12)
    feeds = feeds_xyz()
    parts = [feeds["x"], feeds["y"], feeds["z"]]
    expected = np.stack(parts, axis) if new_axis else np.concatenate(parts, axis)
    np.testing.assert_array_equal(run_fusionlang(model, feeds)[0], expected)


def split_model(split=None, axis=1, keepdims=None, shape=(2, 7)):
    """A SplitToSequence node of x, its initializers (split, when given) and x's shape."""
    attrs = {"axis": axis} if keepdims is None else {"axis": axis, "keepdims": keepdims}
    inits = {} if split is None else {"split": np.asarray(split, np.int64)}
    split_node = helper.make_node("SplitToSequence", ["x"] + ([] if split is None else ["split"]), ["seq"], **attrs)
    return split_node, inits, list(shape)


def split_elements(split=None, axis=1, keepdims=None, shape=(2, 7)) -> tuple[np.ndarray, list[np.ndarray]]:
    """x and every element of its split, each read back by SequenceAt (as many as SequenceLength says)."""
    split_node, inits, shape = split_model(split, axis, keepdims, shape)
    n_model = make_model([split_node, helper.make_node("SequenceLength", ["seq"], ["n"])], {"x": shape},
                         {"n": ([], I64)}, 12, inits)
    graph = from_onnx(n_model)
    n = int(graph.constants[graph.outputs[0]])
    ats = [helper.make_node("SequenceAt", ["seq", f"p{k}"], [f"out{k}"]) for k in range(n)]
    model = make_model([split_node, *ats], {"x": shape}, {f"out{k}": None for k in range(n)}, 12,
                       {**inits, **{f"p{k}": position(k) for k in range(n)}})
    x = random_array(shape)
    return x, run_fusionlang(model, {"x": x})


def chunks(x: np.ndarray, sizes: list[int], axis: int) -> list[np.ndarray]:
    return np.split(x, np.cumsum(sizes)[:-1], axis)


@pytest.mark.parametrize("split,sizes", [(3, [3, 3, 1]), (7, [7]), (2, [2, 2, 2, 1]), ([2, 0, 5], [2, 0, 5]),
                                         ([7], [7])])
def test_split_to_sequence_with_a_scalar_or_a_list_of_lengths(split, sizes):
    x, parts = split_elements(split)
    assert len(parts) == len(sizes)
    for part, expected in zip(parts, chunks(x, sizes, 1)):
        np.testing.assert_array_equal(part, expected)


@pytest.mark.parametrize("keepdims", [None, 1, 0])
@pytest.mark.parametrize("axis", [1, -1, 0])
def test_split_to_sequence_without_split_cuts_unit_slices_keeping_or_dropping_the_axis(axis, keepdims):
    x, parts = split_elements(None, axis, keepdims)
    expected = chunks(x, [1] * x.shape[axis], axis)
    if keepdims == 0:
        expected = [np.squeeze(e, axis) for e in expected]
    assert len(parts) == x.shape[axis]
    for part, want in zip(parts, expected):
        assert part.shape == want.shape
        np.testing.assert_array_equal(part, want)


def test_keepdims_is_ignored_when_split_is_given():
    x, parts = split_elements(3, 1, keepdims=0)
    assert [p.shape for p in parts] == [e.shape for e in chunks(x, [3, 3, 1], 1)]


# ----- positions known only at run time ------------------------------------------------------
def fed_position_model():
    at = helper.make_node("SequenceAt", ["seq", "pos"], ["out"])
    return make_model([construct_xyz(), at], {**XYZ, "pos": ([], I64)}, {"out": None}, 12)


def test_a_fed_position_names_the_input_to_give():
    with pytest.raises(RuntimeInputError, match=r"node 'SequenceAt#1' \(SequenceAt\): input 1 \(position\) comes "
                                                r"from graph input 'pos', whose value only a run knows") as info:
        from_onnx(fed_position_model())
    assert list(info.value.values) == ["pos"]


def test_a_fed_position_is_specialized_on_by_the_backend():
    rep = backend.prepare(fed_position_model())
    assert isinstance(rep, backend.SpecializingRep)
    feeds = feeds_xyz()
    for pos in (1, -1):
        (out,) = rep.run({**feeds, "pos": position(pos)})
        np.testing.assert_array_equal(out, [feeds["x"], feeds["y"], feeds["z"]][pos])


def test_fed_split_lengths_are_specialized_on():
    split = helper.make_node("SplitToSequence", ["x", "split"], ["seq"])
    model = make_model([split, helper.make_node("SequenceLength", ["seq"], ["n"])],
                       {"x": ["N"], "split": ([2], I64)}, {"n": ([], I64)}, 12)
    x = np.arange(5, dtype=np.float32)
    assert int(backend.run_model(model, [x, np.array([1, 4], np.int64)])[0]) == 2


# ----- refusals -----------------------------------------------------------------------------
@pytest.mark.parametrize("op,pos,length,accepted", [
    ("SequenceAt", 3, 3, "-3 to 2"), ("SequenceAt", -4, 3, "-3 to 2"),
    ("SequenceErase", 3, 3, "-3 to 2"), ("SequenceInsert", 4, 3, "-3 to 3"), ("SequenceInsert", -4, 3, "-3 to 3")])
def test_an_out_of_range_position_in_the_model_is_a_model_error(op, pos, length, accepted):
    inputs = ["seq", "x", "pos"] if op == "SequenceInsert" else ["seq", "pos"]
    node = helper.make_node(op, inputs, ["seq2" if op != "SequenceAt" else "out"])
    nodes = [construct_xyz(), node] + ([] if op == "SequenceAt" else
                                       [helper.make_node("SequenceLength", ["seq2"], ["out"])])
    model = make_model(nodes, XYZ, {"out": None}, 12, {"pos": position(pos)})
    with pytest.raises(ModelError) as info:
        from_onnx(model)
    assert type(info.value) is ModelError
    assert str(info.value) == (f"node '{op}#1' ({op}): position {pos} is out of range for a sequence of {length} "
                               f"tensors (accepted: {accepted})")


def test_an_out_of_range_position_a_run_feeds_is_an_input_error():
    with pytest.raises(InputError, match=r"^node 'SequenceAt#1' \(SequenceAt\): position 3 is out of range for a "
                                         r"sequence of 3 tensors \(accepted: -3 to 2\)$"):
        from_onnx(fed_position_model(), constant_inputs={"pos": position(3)})


def test_erasing_from_an_empty_sequence_is_refused():
    nodes = [helper.make_node("SequenceEmpty", [], ["seq"]), helper.make_node("SequenceErase", ["seq"], ["seq2"]),
             helper.make_node("SequenceLength", ["seq2"], ["n"])]
    with pytest.raises(ModelError, match=r"^node 'SequenceErase#1' \(SequenceErase\): cannot erase from an empty "
                                         r"sequence$"):
        from_onnx(make_model(nodes, {}, {"n": ([], I64)}, 12))


def test_a_position_must_be_one_integer():
    with pytest.raises(ModelError, match=r"^node 'SequenceAt#1' \(SequenceAt\): input 1 \(position\) must hold one "
                                         r"integer, got 2$"):
        from_onnx(make_model([construct_xyz(), helper.make_node("SequenceAt", ["seq", "p"], ["out"])], XYZ,
                             {"out": None}, 12, {"p": np.array([0, 1], np.int64)}))


@pytest.mark.parametrize("split,message", [
    (0, r"split=0: a chunk length must be positive"),
    ([3, 3], r"split \[3, 3\] does not divide dim 7 of axis 1 \(lengths must be non-negative and sum to it\)"),
    ([8, -1], r"split \[8, -1\] does not divide dim 7 of axis 1"),
    ([[7]], r"input 1 \(split\) must be a scalar or 1-D, got shape \[1, 1\]")])
def test_bad_split_lengths_are_refused(split, message):
    split_node, inits, shape = split_model(split)
    model = make_model([split_node, helper.make_node("SequenceLength", ["seq"], ["n"])], {"x": shape},
                       {"n": ([], I64)}, 12, inits)
    with pytest.raises(ModelError, match=r"^node 'SplitToSequence#0' \(SplitToSequence\): " + message):
        from_onnx(model)


def test_concat_axis_out_of_range_is_a_shape_error():
    concat = helper.make_node("ConcatFromSequence", ["seq"], ["out"], axis=3, new_axis=1)
    with pytest.raises(ShapeError, match=r"^node 'ConcatFromSequence#1' \(ConcatFromSequence\): axis=3 is out of "
                                         r"range for rank 3 \(element rank \+ 1, for new_axis=1\)$"):
        from_onnx(make_model([construct_xyz(), concat], XYZ, {"out": None}, 12))


def test_an_element_of_another_dtype_is_refused():
    nodes = [construct_xyz(), helper.make_node("SequenceInsert", ["seq", "i"], ["seq2"]),
             helper.make_node("SequenceLength", ["seq2"], ["n"])]
    model = make_model(nodes, {**XYZ, "i": (SHAPE, TensorProto.INT32)}, {"n": ([], I64)}, 12)
    with pytest.raises(ModelError, match=r"^node 'SequenceInsert#1' \(SequenceInsert\): input 1 \('i'\) is int32, "
                                         r"but the sequence holds float32$"):
        from_onnx(model)


def test_a_sequence_graph_output_is_refused_naming_its_producer():
    model = make_model([helper.make_node("SplitToSequence", ["x"], ["seq"])], {"x": SHAPE}, {}, 12)
    model.graph.output.append(helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None))
    with pytest.raises(UnsupportedOpError, match=r"^graph output 'seq' is a sequence \(made by node "
                                                 r"'SplitToSequence#0' \(SplitToSequence\)\); fusionlang's graphs "
                                                 r"hold tensors only, so a sequence may only live inside the model$"):
        from_onnx(model)


def test_a_sequence_graph_input_is_refused_naming_its_reader():
    model = make_model([helper.make_node("SequenceLength", ["seq"], ["n"])], {}, {"n": ([], I64)}, 12)
    model.graph.input.append(helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None))
    with pytest.raises(UnsupportedOpError, match=r"^graph input 'seq' is a sequence, read by node 'SequenceLength#0' "
                                                 r"\(SequenceLength\); fusionlang's graphs hold tensors only"):
        from_onnx(model)


def test_a_sequence_read_as_a_tensor_is_refused_naming_the_reader():
    model = make_model([construct_xyz(), helper.make_node("Relu", ["seq"], ["out"])], XYZ, {"out": None}, 12)
    with pytest.raises(UnsupportedOpError, match=r"^node 'Relu#1' \(Relu\) reads sequence 'seq' \(made by node "
                                                 r"'SequenceConstruct#0' \(SequenceConstruct\)\) as a tensor"):
        from_onnx(model)


def test_a_tensor_read_as_a_sequence_is_refused():
    model = make_model([helper.make_node("SequenceLength", ["x"], ["n"])], {"x": SHAPE}, {"n": ([], I64)}, 12)
    with pytest.raises(ModelError, match=r"^node 'SequenceLength#0' \(SequenceLength\): reads 'x' as a sequence, "
                                         r"but it is a tensor$"):
        from_onnx(model)


def test_a_sequence_flowing_into_sequence_map_is_refused_naming_the_op():
    body = helper.make_graph([helper.make_node("Relu", ["a"], ["b"])], "body", [helper.make_tensor_value_info(
        "a", TensorProto.FLOAT, None)], [helper.make_tensor_value_info("b", TensorProto.FLOAT, None)])
    nodes = [construct_xyz(), helper.make_node("SequenceMap", ["seq"], ["seq2"], body=body),
             helper.make_node("ConcatFromSequence", ["seq2"], ["out"], axis=0)]
    model = make_model(nodes, XYZ, {"out": None}, 17)
    with pytest.raises(UnsupportedOpError, match=r"SequenceMap \(domain ai.onnx, opset 17\): 1 node, first "
                                                 r"'SequenceMap#1'"):
        from_onnx(model)
