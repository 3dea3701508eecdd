"""`fusionlang lint` of a small file stays off the heavy parts: no polyhedral library, no
property-testing library, no model importers, no C toolchain, no ml_dtypes (0.8 s to import;
the IR imports it when a dtype of its is named), and no shipped standard trees for a file
that imports no standard file (issue 36: lint of an empty file took 2.75 s). sympy and
networkx are still imported: the op registry and the checker's loop search are built on
them. What it does import is measured in the issue's report."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("islpy", "hypothesis", "onnx", "onnxruntime", "torch", "ml_dtypes", "fusionlang.backend", "fusionlang.frontend")

PROBE = """\
import sys
from fusionlang.cli import main
status = main(["lint", sys.argv[1]])
heavy = sorted({m for m in sys.modules for h in %r if m == h or m.startswith(h + ".")})
print(status, heavy)
""" % (HEAVY,)


def _lint_imports(path, heavy=HEAVY) -> str:
    probe = PROBE.replace(repr(HEAVY), repr(heavy))
    done = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=300)
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr


def test_lint_of_a_small_file_imports_nothing_heavy(tmp_path):
    path = tmp_path / "small.fuse"
    path.write_text('import "std/ops.fuse"\n\nrewrite drop_double_neg: neg(neg(x)) => x\n')
    assert _lint_imports(path) == "0 []"


def test_a_file_that_imports_no_standard_file_reads_no_shipped_trees(tmp_path):
    path = tmp_path / "empty.fuse"
    path.write_text("")
    assert _lint_imports(path, HEAVY + ("fusionlang.lang.std_modules",)) == "0 []"
