"""Ops a rule file `def`s stay known after the engine copies the graph (opening compound
ops inside groups, rewriting): the graph carries its op registry as a declared field."""

import numpy as np
import pytest

from fusionlang.api import compile, fuse, load_rules
from fusionlang.engine.lowering import lower_compound_groups
from fusionlang.engine.partition import partition
from fusionlang.engine.rewrite import apply_rules
from fusionlang.errors import FuseError, UnsupportedOpError
from fusionlang.ops import GraphBuilder
from fusionlang.reference import run as reference_run

SWISH_RULES = """\
import "tvm.fuse"

class swish : elemwise
def swish(x) = x * sigmoid(x)
"""


@pytest.fixture(scope="module")
def rules(tmp_path_factory):
    path = tmp_path_factory.mktemp("defs") / "swish.fuse"
    path.write_text(SWISH_RULES)
    return load_rules(str(path))


def swish_softmax(rules):
    """softmax (compound: tvm keeps it whole until code generation) of a def'd op."""
    b = GraphBuilder("swish_softmax", registry=rules.registry)
    x = b.input("x", (4, 8))
    b.output(b.op("softmax", b.op("swish", x), axis=-1))
    return b.build()


def test_the_builder_declares_its_registry_on_the_graph(rules):
    assert swish_softmax(rules).registry is rules.registry


def test_rewriting_keeps_the_registry(rules):
    assert apply_rules(swish_softmax(rules), rules).graph.registry is rules.registry


def test_lowering_keeps_the_registry(rules):
    whole = partition(swish_softmax(rules), rules, "tvm")
    lowered = lower_compound_groups(whole, rules)
    assert "softmax" not in {n.op for n in lowered.graph.nodes}  # opened in a copy of the graph
    assert lowered.graph.registry is rules.registry


def test_lowering_without_a_rule_set_opens_nothing_it_was_not_given(rules):
    whole = partition(swish_softmax(rules), rules, "tvm")
    with pytest.raises(FuseError, match=r"\(softmax\) is a compound op and no decomposition in no rule set opens "
                                        r"it .*import \"decompose.fuse\" for lowering$"):
        lower_compound_groups(whole, None)


def test_a_def_op_next_to_a_compound_op_compiles_under_tvm(rules):
    graph = swish_softmax(rules)
    feeds = {"x": np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)}
    compiled = compile(fuse(graph, rules, "tvm"), "c")
    got = compiled.run(feeds)
    want = reference_run(graph, feeds)
    np.testing.assert_allclose(got[graph.outputs[0]], want[graph.outputs[0]], rtol=1e-5, atol=1e-6)


def test_without_its_registry_a_def_op_is_an_unknown_op(rules):
    # what every copy that dropped the registry used to give: the registry is what knows swish
    graph = swish_softmax(rules)
    graph.registry = None
    with pytest.raises(UnsupportedOpError, match=r"^node 'swish_0': unknown op 'swish'$") as error:
        reference_run(graph, {"x": np.zeros((4, 8), np.float32)})
    assert error.value.exit_code == 2
