"""`fusionlang lint` of a small file stays off the heavy parts: no polyhedral library, no
property-testing library, no model importers, no C toolchain, no ml_dtypes (0.8 s to import;
the IR imports it when a dtype of its is named), and no shipped standard trees for a file
that imports no standard file (issue 36: lint of an empty file took 2.75 s), and no engine
(cost model, partitioners, rewrite engine) for a file that declares no policy and has no
`test` block. What it does import is measured in the issue's report."""

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


#: what only a declared policy or a `test` block needs: the cost model, the partitioners and
#: the rewrite engine (half a second of imports); and what only a file naming an op needs: the
#: op families' sympy (a third of a second) and the checker's loop search's networkx
ENGINE = ("fusionlang.engine", "fusionlang.testing", "sympy", "networkx")


def test_a_file_of_categories_and_imports_imports_no_engine_sympy_or_networkx(tmp_path):
    (tmp_path / "lattice.fuse").write_text("categories elemwise < reduce\n")
    path = tmp_path / "small.fuse"
    path.write_text('import "lattice.fuse"\n\ncategories elemwise < reduce < opaque\n')
    empty = tmp_path / "empty.fuse"
    empty.write_text("")
    assert _lint_imports(path, ENGINE) == "0 []"
    assert _lint_imports(empty, ENGINE) == "0 []"


def test_a_file_with_a_policy_still_has_it_checked(tmp_path):
    path = tmp_path / "policy.fuse"
    path.write_text('import "apollo.fuse"\n\nstrategy apolo { max_ops = 8 }\n')
    assert _lint_imports(path, ("fusionlang.engine.policy_check",)) == "2 ['fusionlang.engine.policy_check']"


def test_a_file_naming_an_op_still_has_it_checked(tmp_path):
    path = tmp_path / "rules.fuse"
    path.write_text('rewrite drop: nag(x) => x\n')
    assert _lint_imports(path, ("fusionlang.ops.activation",)) == "2 ['fusionlang.ops.activation']"


def test_a_file_of_rewrites_over_ops_has_them_checked_without_sympy(tmp_path):
    # the op families register names, arities, attributes and dtype rules without sympy,
    # which only formulas (access specs, symbolic checks, code generation) need
    path = tmp_path / "rules.fuse"
    path.write_text('import "std/ops.fuse"\n\n'
                    "rewrite double_neg: neg(neg(x)) => x\n"
                    "rewrite exp_log: exp(log(sigmoid(x))) => sigmoid(x)\n"
                    "rewrite neg_sum: neg(neg(s @ reduce_sum(x))) => s\n"
                    "rewrite bias: add(m @ matmul(a, b), c) where rank(c) == 1 => m\n")
    assert _lint_imports(path, ("sympy", "fusionlang.ops.scalar")) == "0 []"
    path.write_text('import "std/ops.fuse"\n\nrewrite bad: neg(x, x) => x\n')
    assert _lint_imports(path, ("sympy",)) == "2 []"
