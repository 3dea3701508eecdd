"""Helpers shared by the command modules: loading models, rules and feeds, writing
outputs, comparing results, and the exit codes."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from fusionlang.errors import FuseError, InputError

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def console(args):
    from rich.console import Console

    # model and rule names are data: never interpret them as rich markup
    return Console(stderr=False, quiet=getattr(args, "quiet", False), markup=False, soft_wrap=True,
                   no_color=getattr(args, "no_color", False) or "NO_COLOR" in os.environ, highlight=False)


def parse_shapes(items: list[str] | None) -> dict[str, tuple[int, ...]] | None:
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
