"""Hash the C and CUDA text the loop-nest printers emit for a fixed, varied set of groups,
to check that a refactor of the codegen passes or printers changes no kernel's bytes.

    python tools/codegen_hashes.py BEFORE.json               # on the commit before
    python tools/codegen_hashes.py AFTER.json --compare BEFORE.json   # exit 1 on any difference

41 graphs (row reductions of every kind, softmax, log_softmax and layer_norm at four sizes,
GELU from tiny to float4-wide, gathers that check indices, a matmul, a row division, an
integer max), each as one group and per node; every group as C with and without OpenMP
and index checks, its outputs streamed, and as CUDA: 820 kernels. Deterministic: the same
commit writes the same file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "backend"))
from helpers import gelu, layer_norm, softmax  # noqa: E402  (the tests' builders of compound ops)

from fusionlang.backend.emit_c import emit_function  # noqa: E402
from fusionlang.backend.emit_cuda import emit_group  # noqa: E402
from fusionlang.backend.runtime import lower_group  # noqa: E402
from fusionlang.engine.plan import per_node_plan, single_group_plan  # noqa: E402
from fusionlang.ops import GraphBuilder  # noqa: E402


def _reductions():
    for op in ["reduce_max", "reduce_min", "reduce_sum", "reduce_mean", "reduce_prod"]:
        for cols in (256, 100, 1024):
            b = GraphBuilder(op)
            b.output(b.op(op, b.input("x", (6, cols)), axes=[-1]))
            yield f"{op}{cols}", b.build()


def _rows():
    for rows, cols in ((4096, 1024), (5, 200), (64, 64), (300, 7)):
        for kind in ("softmax", "log_softmax", "layer_norm"):
            b = GraphBuilder(kind)
            x = b.input("x", (rows, cols))
            if kind == "layer_norm":
                b.output(layer_norm(b, x, b.constant(np.linspace(0.5, 1, cols, dtype=np.float32)),
                                    b.constant(np.zeros(cols, np.float32))))
            else:
                b.output(softmax(b, x, log=kind == "log_softmax"))
            yield f"{kind}{rows}x{cols}", b.build()


def _others():
    for shape in ((512, 256), (3, 5), (1 << 16,), (300, 300)):
        b = GraphBuilder("gelu")
        b.output(gelu(b, b.input("x", shape)))
        yield f"gelu{shape}", b.build()
    for name, shape, count, axis in (("gathercols", (3, 40), 64, 1), ("embed", (5, 3), 4, 0)):
        b = GraphBuilder(name)
        x = b.input("x", shape, "float32")
        b.output(b.exp(b.gather(x, b.input("ids", (count,), "int64"), axis=axis)))
        yield name, b.build()
    b = GraphBuilder("mm")
    b.output(b.relu(b.matmul(b.input("x", (64, 128)), b.input("w", (128, 32)))))
    yield "matmul", b.build()
    b = GraphBuilder("big")
    x = b.input("x", (256, 1024))
    b.output(b.relu(b.exp(x)), b.op("reduce_max", x, axes=[-1]))
    yield "bigmix", b.build()
    b = GraphBuilder("div")
    x = b.input("x", (64, 512))
    b.output(b.div(x, b.op("reduce_sum", x, axes=[-1], keepdims=1)))
    yield "divrow", b.build()
    b = GraphBuilder("i64")
    b.output(b.op("reduce_max", b.input("x", (8, 64), "int64"), axes=[-1]))
    yield "intmax", b.build()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _c_text(lowered, graph, openmp: bool, check: bool) -> str:
    f = emit_function(lowered, "g", openmp=openmp, check_indices=check, streamed=frozenset(graph.outputs))
    return f.source + repr(f.params) + repr(f.sites) + repr(f.fallible)


def _cuda_text(plan, group) -> str:
    cg = emit_group(lower_group(plan, group, "cuda"), "g", check_indices=True, first_site=2)
    launches = [(k.name, k.grid, k.mode, k.scratch_bytes) for k in cg.kernels]
    return cg.source + repr(launches) + repr(cg.units) + repr(cg.sites)


def hashes() -> dict[str, str]:
    out = {}
    for name, graph in [*_reductions(), *_rows(), *_others()]:
        for how, plan in (("single", single_group_plan(graph)), ("pernode", per_node_plan(graph))):
            for group in plan.groups:
                key = f"{name}/{how}/g{group.id}"
                lowered = lower_group(plan, group)
                for openmp in (False, True):
                    for check in (False, True):
                        out[f"{key}/c/omp{openmp}/chk{check}"] = _digest(_c_text(lowered, graph, openmp, check))
                out[f"{key}/cuda"] = _digest(_cuda_text(plan, group))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--compare", type=Path, help="exit 1 where a kernel differs from this file's")
    args = parser.parse_args(argv)
    now = hashes()
    args.out.write_text(json.dumps(now, indent=0, sort_keys=True) + "\n")
    print(f"{len(now)} kernels")
    if args.compare is None:
        return 0
    before = json.loads(args.compare.read_text())
    differ = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    for key in differ:
        print(f"differs: {key}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
