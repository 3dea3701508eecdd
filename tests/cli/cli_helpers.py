"""Shared pieces of the CLI tests: small ONNX models, and running the CLI in-process,
as a subprocess with pipes, or on a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fusionlang.cli import main


def conv_bn_pool_model(path) -> str:
    """x -> conv -> bn -> relu -> pool -> y: after folding, conv+relu fuse and the max_pool
    (a reduce) stays alone, because apollo has no complex -> reduce entry."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(np.linspace(0.5, 1.5, 4).astype(np.float32), "gamma"),
             numpy_helper.from_array(np.zeros(4, np.float32), "beta"),
             numpy_helper.from_array(np.full(4, 0.1, np.float32), "mean"),
             numpy_helper.from_array(np.ones(4, np.float32), "var")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["b"], name="bn"),
             helper.make_node("Relu", ["b"], ["r"], name="relu"),
             helper.make_node("Tanh", ["r"], ["t"], name="tanh"),
             helper.make_node("MaxPool", ["t"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2])]
    graph = helper.make_graph(nodes, "near_miss",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def run_cli(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    """The CLI as a script runs it: a subprocess with stdout and stderr piped."""
    return subprocess.run([sys.executable, "-m", "fusionlang", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def run_on_terminal(*args, cwd=None) -> tuple[int, str]:
    """The CLI on a pseudo-terminal (stdout and stderr both the terminal): (status, output)."""
    master, slave = pty.openpty()
    env = dict(os.environ, COLUMNS="100", LINES="40", TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "fusionlang", *map(str, args)], stdin=slave, stdout=slave,
                            stderr=slave, cwd=cwd, env=env, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the terminal closes when the process exits
            break
        if not data:
            break
        chunks.append(data)
    status = proc.wait(timeout=300)
    os.close(master)
    return status, b"".join(chunks).decode("utf-8", errors="replace")


def one_line_error(capsys, argv) -> str:
    """Run the CLI in-process on ``argv``; it must exit 2 with one line on stderr, which is returned."""
    status = main(argv)
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    return err[:-1]
