"""Each distinct conv of ResNet-18 / ResNet-50 / MobileNetV2 (batch 1, 224x224; MobileNetV2's
stem and pointwise convs, its depthwise ones are not GEMMs) as a one-conv ONNX model
(conv + bias + ReLU), timed on one thread against ONNX Runtime and OpenVINO: process CPU
time, medians of interleaved rounds (the machine is shared: wall time is not trusted).

    PYTHONPATH=$PWD .venv/bin/python bench/conv_layers.py --model resnet18 --rounds 15
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fusionlang  # noqa: E402
from model_runtime import _Onnx, interleaved, openvino_runner, ort_session  # noqa: E402

#: (in channels, out channels, kernel, stride, input size) of each distinct conv
RESNET18 = [(3, 64, 7, 2, 224), (64, 64, 3, 1, 56), (64, 128, 3, 2, 56), (64, 128, 1, 2, 56), (128, 128, 3, 1, 28),
            (128, 256, 3, 2, 28), (128, 256, 1, 2, 28), (256, 256, 3, 1, 14), (256, 512, 3, 2, 14),
            (256, 512, 1, 2, 14), (512, 512, 3, 1, 7)]
RESNET50 = [(3, 64, 7, 2, 224), (64, 64, 1, 1, 56), (64, 64, 3, 1, 56), (64, 256, 1, 1, 56), (256, 64, 1, 1, 56),
            (256, 128, 1, 1, 56), (128, 128, 3, 2, 56), (128, 512, 1, 1, 28), (256, 512, 1, 2, 56),
            (512, 128, 1, 1, 28), (128, 128, 3, 1, 28), (512, 256, 1, 1, 28), (256, 256, 3, 2, 28),
            (256, 1024, 1, 1, 14), (512, 1024, 1, 2, 28), (1024, 256, 1, 1, 14), (256, 256, 3, 1, 14),
            (1024, 512, 1, 1, 14), (512, 512, 3, 2, 14), (512, 2048, 1, 1, 7), (1024, 2048, 1, 2, 14),
            (2048, 512, 1, 1, 7), (512, 512, 3, 1, 7)]
MOBILENET_V2 = [(3, 32, 3, 2, 224), (32, 16, 1, 1, 112), (16, 96, 1, 1, 112), (96, 24, 1, 1, 56), (24, 144, 1, 1, 56),
                (144, 24, 1, 1, 56), (144, 32, 1, 1, 28), (32, 192, 1, 1, 28), (192, 32, 1, 1, 28),
                (192, 64, 1, 1, 14), (64, 384, 1, 1, 14), (384, 64, 1, 1, 14), (384, 96, 1, 1, 14),
                (96, 576, 1, 1, 14), (576, 96, 1, 1, 14), (576, 160, 1, 1, 7), (160, 960, 1, 1, 7),
                (960, 160, 1, 1, 7), (960, 320, 1, 1, 7), (320, 1280, 1, 1, 7)]
MODELS = {"resnet18": RESNET18, "resnet50": RESNET50, "mobilenet_v2": MOBILENET_V2}


def conv_model(cin: int, cout: int, kernel: int, stride: int, size: int):
    g = _Onnx(f"conv{cin}_{cout}_{kernel}s{stride}_{size}")
    y = g.op("Conv", "x", g.weight((cout, cin, kernel, kernel), float(1 / np.sqrt(cin * kernel * kernel))),
             g.const(np.zeros(cout, np.float32) + 0.01), kernel_shape=[kernel, kernel], strides=[stride, stride],
             pads=[kernel // 2] * 4)
    return g.model("x", (1, cin, size, size), g.op("Relu", y))


def layer_fns(model, peers: bool = True) -> tuple[dict, dict]:
    x = np.random.default_rng(0).standard_normal([d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim])
    feeds = {"x": x.astype(np.float32)}
    compiled = fusionlang.compile(fusionlang.fuse(fusionlang.from_onnx(model)), "c")
    fns = {"fl": lambda: compiled.run(feeds)}
    if peers:
        session = ort_session(model, 1)
        fns["ort"] = lambda: session.run(None, feeds)
        ov = openvino_runner(model, 1)
        if ov is not None:
            fns["ov"] = lambda: ov(feeds)
    return fns, compiled.kernels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="resnet18")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--only", type=int, nargs="*", help="indices of the layers to time")
    args = parser.parse_args()
    print(f"{'conv':28} {'GFLOP':>6} {'fl ms':>7} {'ORT ms':>7} {'OV ms':>7} {'fl/ORT':>7} {'fl/OV':>6} {'fl GF/s':>7}")
    for index, (cin, cout, k, s, size) in enumerate(MODELS[args.model]):
        if args.only and index not in args.only:
            continue
        fns, _ = layer_fns(conv_model(cin, cout, k, s, size))
        timing, results = interleaved(fns, args.rounds)
        want = np.asarray(results["ort"][0])
        err = float(np.abs(np.asarray(results["fl"]["relu_2"]).reshape(want.shape) - want).max()) \
            if isinstance(results["fl"], dict) else 0.0
        ms = {key: t["cpu_ms"] for key, t in timing.items()}
        out = -(-size // s)
        gflop = 2 * cin * cout * k * k * out * out / 1e9
        ov = ms.get("ov", float("nan"))
        print(f"{index:2} {cin:4}->{cout:4} {k}x{k}/{s} @{size:3}   {gflop:6.3f} {ms['fl']:7.3f} {ms['ort']:7.3f} "
              f"{ov:7.3f} {ms['fl'] / ms['ort']:7.2f} {ms['fl'] / ov:6.2f} {gflop / ms['fl'] * 1e3:7.1f}  err {err:.1e}",
              flush=True)


if __name__ == "__main__":
    main()
