"""Constant evaluation lives in one place (fusionlang.ops.evaluate): the interpreter, the
importer's and the engine's folding, and compile's const groups all use it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from fusionlang.ops import GraphBuilder, run
from fusionlang.ops.evaluate import fold_constants


def test_the_engine_and_backend_fold_without_importing_the_frontend():
    code = ("import sys, fusionlang.engine.passes, fusionlang.engine.rewrite, fusionlang.backend.runtime; "
            "print(sorted(m for m in sys.modules if m.startswith('fusionlang.frontend')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_folding_computes_what_the_interpreter_computes():
    b = GraphBuilder("consts")
    c = b.constant(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4))
    x = b.input("x", (3, 4))
    y = b.add(x, b.exp(b.neg(c)))
    b.output(y)
    graph = b.build()
    feeds = {"x": np.ones((3, 4), np.float32)}
    expected = run(graph, feeds)[y]
    folded = graph.copy()
    assert fold_constants(folded) == 2
    np.testing.assert_array_equal(run(folded, feeds)[y], expected)
