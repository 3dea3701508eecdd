"""The `fusionlang` command line.

Every failure caused by input (a model, a rule file, a flag) is a FuseError: it is
printed as one line (or a rendered diagnostic with caret) and the exit status is 2. A
check that runs and finds a mismatch exits 1. Nothing prints a Python traceback unless
FUSIONLANG_DEBUG=1 is set.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

from fusionlang.errors import FuseError, InputError

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class Mismatch(Exception):
    """A check ran and failed (exit 1)."""


# ----- shared helpers -----------------------------------------------------------------


def _console(args):
    from rich.console import Console

    return Console(stderr=False, quiet=getattr(args, "quiet", False),
                   no_color=getattr(args, "no_color", False) or "NO_COLOR" in os.environ, highlight=False)


def _parse_shapes(items: list[str] | None) -> dict[str, tuple[int, ...]] | None:
    if not items:
        return None
    shapes = {}
    for item in items:
        name, sep, dims = item.rpartition("=")
        if not sep or not name or not re.fullmatch(r"\d+(x\d+)*", dims):
            raise InputError(f"--input-shape {item!r}: expected NAME=DIMxDIM..., e.g. x=1x3x224x224")
        shapes[name] = tuple(int(d) for d in dims.split("x"))
    return shapes


def load_graph(path: str, shapes=None):
    from fusionlang.frontend import from_onnx

    if not Path(path).exists():
        raise InputError(f"{path}: no such file")
    return from_onnx(path, input_shapes=shapes)


def load_rules(name_or_path: str):
    from fusionlang.lang import load_rules as load

    return load(name_or_path)


def read_feeds(graph, items: list[str] | None, random_seed: int | None) -> dict[str, np.ndarray]:
    feeds = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise InputError(f"--input {item!r}: expected NAME=FILE.npy")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InputError(f"--input {name}: cannot read {path!r}: {exc}") from None
    missing = [n for n in graph.inputs if n not in feeds]
    if missing and random_seed is None:
        shapes = ", ".join(f"{n} {graph.types[n]}" for n in missing)
        raise InputError(f"missing inputs: {shapes} (pass --input NAME=FILE.npy, or --random-inputs SEED)")
    rng = np.random.default_rng(random_seed)
    for name in missing:
        t = graph.types[name]
        if t.is_float:
            feeds[name] = rng.standard_normal(t.shape).astype(t.dtype)
        elif t.dtype == "bool":
            feeds[name] = rng.integers(0, 2, t.shape).astype(bool)
        else:
            feeds[name] = rng.integers(0, 4, t.shape).astype(t.dtype)
    return feeds


def safe_filename(name: str) -> str:
    """A file name for a tensor name: keeps [A-Za-z0-9_.-], replaces the rest."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".")
    return cleaned or "output"


def write_outputs(outputs: dict[str, np.ndarray], directory: str) -> list[Path]:
    out_dir = Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    used = set()
    for name, array in outputs.items():
        stem = safe_filename(name)
        while stem in used:
            stem += "_"
        used.add(stem)
        path = out_dir / f"{stem}.npy"
        np.save(path, array)
        written.append(path)
    return written


def compare(outputs: dict, expected: dict, rtol: float, atol: float) -> list[str]:
    problems = []
    for name, want in expected.items():
        got = outputs[name]
        if got.shape != want.shape:
            problems.append(f"{name}: shape {list(got.shape)} != reference {list(want.shape)}")
            continue
        if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
            err = np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))
            problems.append(f"{name}: max abs error {err:.3g} exceeds rtol={rtol} atol={atol}")
    return problems


# ----- commands -------------------------------------------------------------------------


def cmd_run(args) -> int:
    console = _console(args)
    graph = load_graph(args.model, _parse_shapes(args.input_shape))
    feeds = read_feeds(graph, args.input, args.random_inputs)
    started = time.perf_counter()
    if args.target == "reference":
        from fusionlang.reference import run

        outputs = run(graph, feeds)
        expected = None
    else:
        from fusionlang.api import compile_model

        compiled = compile_model(graph, args.rules, args.strategy, target=args.target)
        outputs = compiled.run(feeds)
        expected = None
        if args.check:
            from fusionlang.reference import run

            expected = run(graph, feeds)
    elapsed = time.perf_counter() - started
    report = {"model": args.model, "target": args.target, "seconds": elapsed,
              "outputs": {k: list(v.shape) for k, v in outputs.items()}}
    if args.output_dir:
        report["written"] = [str(p) for p in write_outputs(outputs, args.output_dir)]
    problems = compare(outputs, expected, args.rtol, args.atol) if expected is not None else []
    report["check"] = "skipped" if expected is None else ("ok" if not problems else problems)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for name, value in outputs.items():
            console.print(f"{name}: {value.dtype}{list(value.shape)}  mean {float(np.mean(value)):.6g}")
        for path in report.get("written", []):
            console.print(f"wrote {path}")
        if expected is not None:
            console.print("check against the reference interpreter: " + ("ok" if not problems else "MISMATCH"))
        console.print(f"{args.target}: {elapsed:.3f} s")
    if problems:
        for p in problems:
            print(f"fusionlang: mismatch: {p}", file=sys.stderr)
        return EXIT_MISMATCH
    return EXIT_OK


def cmd_fuse(args) -> int:
    console = _console(args)
    from fusionlang.api import fuse

    graph = load_graph(args.model, _parse_shapes(args.input_shape))
    plan = fuse(graph, args.rules, args.strategy)
    data = plan.to_dict()
    if args.json_file:
        Path(args.json_file).write_text(plan.to_json(indent=2))
    if args.report:
        from fusionlang.report import write_report

        write_report(plan, args.report)
    if args.json:
        print(plan.to_json(indent=2))
        return EXIT_OK
    console.print(plan.summary())
    if args.verbose:
        for group in plan.groups:
            ops = ", ".join(f"{n}:{o}" for n, o in zip(group.nodes, data["groups"][group.id]["ops"]))
            console.print(f"  group {group.id} [{group.kind}/{group.category}] {ops}")
    if args.json_file:
        console.print(f"wrote {args.json_file}")
    if args.report:
        console.print(f"wrote {args.report}")
    return EXIT_OK


def cmd_lint(args) -> int:
    from fusionlang.lang import lint, render

    diagnostics = lint(args.files)
    errors = [d for d in diagnostics if d.severity == "error"]
    for d in diagnostics:
        print(render(d, color=not args.no_color and sys.stderr.isatty()), file=sys.stderr)
    if not args.quiet:
        print(f"{len(args.files)} file(s): {len(errors)} error(s), {len(diagnostics) - len(errors)} warning(s)")
    return EXIT_BAD_INPUT if errors else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fusionlang", description="Operator fusion with the policy written as data.")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only errors")
    parser.add_argument("--no-color", action="store_true", help="plain output")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def model_args(p):
        p.add_argument("model", help="an ONNX model file")
        p.add_argument("--input-shape", action="append", metavar="NAME=DxD..",
                       help="static shape for an input with symbolic dims (repeatable)")
        p.add_argument("--rules", default="apollo", help="rule set: apollo, tvm, dnnfusion or a .fuse file")
        p.add_argument("--strategy", choices=["apollo", "tvm", "dp"], default=None,
                       help="partitioner (default: the rule set's own strategy)")
        p.add_argument("--json", action="store_true", help="print machine-readable JSON")

    p = sub.add_parser("run", help="run a model (compiled or with the reference interpreter)")
    model_args(p)
    p.add_argument("--target", choices=["c", "cuda", "reference"], default="c")
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    p.add_argument("--random-inputs", type=int, metavar="SEED", help="fill missing inputs with seeded noise")
    p.add_argument("--output-dir", metavar="DIR", help="write each output as DIR/<name>.npy")
    p.add_argument("--check", action="store_true", help="compare with the reference interpreter (exit 1 on mismatch)")
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-4)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("fuse", help="partition a model into fused groups and print a summary")
    model_args(p)
    p.add_argument("--json-file", "--json-out", dest="json_file", metavar="FILE", help="write the plan as JSON")
    p.add_argument("--report", metavar="FILE.html", help="write a self-contained HTML report")
    p.add_argument("--verbose", "-v", action="store_true", help="list every group")
    p.set_defaults(func=cmd_fuse)

    p = sub.add_parser("lint", help="parse and check .fuse rule files")
    p.add_argument("files", nargs="+", metavar="FILE.fuse")
    p.set_defaults(func=cmd_lint)

    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        return args.func(args)
    except FuseError as exc:
        print(_one_line_or_block(exc), file=sys.stderr)
        return exc.exit_code
    except Mismatch as exc:
        print(f"fusionlang: {exc}", file=sys.stderr)
        return EXIT_MISMATCH
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug in fusionlang, not in the user's input
        if os.environ.get("FUSIONLANG_DEBUG"):
            raise
        print(f"fusionlang: internal error: {type(exc).__name__}: {exc} "
              "(please report it; FUSIONLANG_DEBUG=1 shows a traceback)", file=sys.stderr)
        return EXIT_INTERNAL


def _one_line_or_block(exc: FuseError) -> str:
    text = str(exc)
    if getattr(exc, "diagnostics", None):
        from fusionlang.lang import render

        return "\n".join(render(d) for d in exc.diagnostics)
    return text if re.match(r"^\S+:\d+:\d+: ", text) else f"fusionlang: error: {text}"


if __name__ == "__main__":
    sys.exit(main())
