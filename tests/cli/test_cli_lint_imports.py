"""`fusionlang lint` of a small file stays off the heavy parts: no polyhedral library, no
property-testing library, no model importers, no C toolchain (issue 36: lint of an empty
file took 2.75 s). What it does import is measured in the issue's report."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("islpy", "hypothesis", "onnx", "onnxruntime", "torch", "fusionlang.backend", "fusionlang.frontend")

PROBE = """\
import sys
from fusionlang.cli import main
status = main(["lint", sys.argv[1]])
heavy = sorted({m for m in sys.modules for h in %r if m == h or m.startswith(h + ".")})
print(status, heavy)
""" % (HEAVY,)


def test_lint_of_a_small_file_imports_nothing_heavy(tmp_path):
    path = tmp_path / "small.fuse"
    path.write_text('import "std/ops.fuse"\n\nrewrite drop_double_neg: neg(neg(x)) => x\n')
    done = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stdout + done.stderr
