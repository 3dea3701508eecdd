"""A zoo of real architectures, exported from torch here, timed like bench/model_runtime.py:
fusionlang's fused C against ONNX Runtime and OpenVINO, one process, interleaved rounds.

Every model is built from its library's constructor or config with random weights (seed 0,
nothing downloaded) and exported with ``torch.onnx.export(..., dynamo=True)`` at the
exporter's default opset, batch 1:

* CNNs from torchvision and timm at 224 x 224: ResNet-18/50, MobileNetV2/V3-Large,
  EfficientNet-B0, RegNetY-400MF, DenseNet-121, ConvNeXt-T, GhostNet, ShuffleNetV2;
* vision transformers at 224 x 224: ViT-S/16 and DeiT-Ti/16 (timm), Swin-T (torchvision),
  MobileViT-S and MobileViT-XXS (timm, 256 x 256, their native size);
* a small diffusion UNet (diffusers' UNet2DConditionModel, 2 levels of 64/128 channels,
  cross-attention over 77 tokens of width 128, a 4 x 32 x 32 latent, the timestep fixed);
* decoders and encoders from transformers configs **scaled down** to 2 layers, hidden 256,
  4 heads (Llama/Qwen2/Mistral: 2 KV heads), feed-forward 1024, vocabulary 1000, 128 tokens:
  BERT, DistilBERT, T5 encoder, GPT-2, Llama, Qwen2, Mistral.

Exports are cached under ``$XDG_CACHE_HOME/fusionlang-zoo/`` (``NAME.onnx`` and the inputs
in ``NAME.npz``; not committed) and rebuilt when missing. A model whose export, import,
compile or run fails is a row that says where and why; the run goes on.

Competitors and clocks are bench/model_runtime.py's (``competitors``, ``interleaved``,
``agreement``): 1 thread compares process CPU time, ``--threads all`` wall time. The
unfused build (and its profile) is left out here: what is timed is fused fusionlang, ORT
and OpenVINO. Writes bench/results/model_runtime_zoo[_threads].json after every model;
``--markdown`` prints the README's table from them.

torchvision, timm, transformers, diffusers and onnxscript are not in the project's
environment and must not be: install them into a directory of their own, torchvision pinned
to torch's version (0.28 for torch 2.13) and ``--no-deps`` so pip leaves torch alone::

    pip install --target /work/zoo-site --no-deps torchvision==0.28.0 timm transformers diffusers \\
        onnxscript onnx_ir huggingface_hub httpx2 httpcore2 h11 anyio sniffio certifi idna truststore \\
        safetensors tokenizers regex tqdm pillow importlib_metadata zipp
    PYTHONPATH=.:/work/zoo-site python bench/torch_zoo.py [--rounds 3] [--threads 1|all] [--only resnet18,gpt2]
    python bench/torch_zoo.py --markdown

Only ``--markdown`` and cached exports run without that directory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import onnx

import _checkout  # noqa: F401  (first of ours: this checkout's fusionlang)
import fusionlang
import model_runtime
from model_runtime import PEERS, RESULTS, geomean

sys.path.insert(0, str(_checkout.ROOT / "tools"))
from make_exports import PlainOutputs, without_node_metadata  # noqa: E402

SEED = 0
IMAGE = 224
SEQ, HIDDEN, HEADS, KV_HEADS, LAYERS, FFN, VOCAB = 128, 256, 4, 2, 2, 1024, 1000
UNET_LATENT, UNET_TOKENS, UNET_CONTEXT = 32, 77, 128


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "fusionlang-zoo"


# ----- the models -------------------------------------------------------------------------


def _import_torchvision():
    """torchvision, importable beside a CPU-only torch.

    PyPI's torchvision wheel is built against CUDA torch: its C extension does not load
    here, and 0.28's fake-tensor registrations then fail on the missing ``torchvision::nms``
    schema. Defining the two schemas they name lets the import through; no zoo model calls
    them (they are detection ops)."""
    import torch

    if not hasattr(torch.ops.torchvision, "nms"):
        library = torch.library.Library("torchvision", "DEF")
        for op in ("nms", "qnms"):
            library.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _import_torchvision.library = library  # kept alive: dropping it removes the schemas
    import torchvision

    return torchvision


def _image(size: int = IMAGE) -> dict:
    return {"pixels": np.random.default_rng(SEED).standard_normal((1, 3, size, size)).astype(np.float32)}


def torchvision_model(name: str):
    return lambda: (_import_torchvision().models.get_model(name, weights=None), _image())


def timm_model(name: str, size: int = IMAGE):
    def build():
        import timm

        return timm.create_model(name, pretrained=False), _image(size)

    return build


def _tokens() -> dict:
    return {"input_ids": np.random.default_rng(SEED).integers(0, VOCAB, size=(1, SEQ), dtype=np.int64)}


def transformers_model(model_class: str, config_class: str, **config):
    def build():
        import transformers

        built = getattr(transformers, config_class)(**config)
        model = getattr(transformers, model_class)(built)
        return PlainOutputs(__import__("torch"), model, ["input_ids"]), _tokens()

    return build


_DECODER = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                num_key_value_heads=KV_HEADS, intermediate_size=FFN, max_position_embeddings=2 * SEQ,
                use_cache=False)


def unet():
    import torch
    from diffusers import UNet2DConditionModel

    model = UNet2DConditionModel(
        sample_size=UNET_LATENT, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(64, 128),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=UNET_CONTEXT, attention_head_dim=8, norm_num_groups=32)

    class FixedStep(torch.nn.Module):
        """The UNet at timestep 500: the step is a constant of the export, not an input."""

        def __init__(self):
            super().__init__()
            self.unet = model

        def forward(self, sample, context):
            return self.unet(sample, 500, encoder_hidden_states=context, return_dict=False)[0]

    rng = np.random.default_rng(SEED)
    return FixedStep(), {"sample": rng.standard_normal((1, 4, UNET_LATENT, UNET_LATENT)).astype(np.float32),
                         "context": rng.standard_normal((1, UNET_TOKENS, UNET_CONTEXT)).astype(np.float32)}


#: name -> (family, builder of (module, inputs by name))
ZOO = {
    "resnet18": ("cnn", torchvision_model("resnet18")),
    "resnet50": ("cnn", torchvision_model("resnet50")),
    "mobilenet_v2": ("cnn", torchvision_model("mobilenet_v2")),
    "mobilenet_v3_large": ("cnn", torchvision_model("mobilenet_v3_large")),
    "efficientnet_b0": ("cnn", torchvision_model("efficientnet_b0")),
    "regnet_y_400mf": ("cnn", torchvision_model("regnet_y_400mf")),
    "densenet121": ("cnn", torchvision_model("densenet121")),
    "convnext_tiny": ("cnn", torchvision_model("convnext_tiny")),
    "shufflenet_v2": ("cnn", torchvision_model("shufflenet_v2_x1_0")),
    "ghostnet": ("cnn", timm_model("ghostnet_100")),
    "vit_s16": ("vision transformer", timm_model("vit_small_patch16_224")),
    "deit_ti16": ("vision transformer", timm_model("deit_tiny_patch16_224")),
    "swin_t": ("vision transformer", torchvision_model("swin_t")),
    "mobilevit_s": ("vision transformer", timm_model("mobilevit_s", 256)),
    "mobilevit_xxs": ("vision transformer", timm_model("mobilevit_xxs", 256)),
    "unet_small": ("diffusion", unet),
    "bert": ("transformer (scaled)", transformers_model(
        "BertModel", "BertConfig", vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, intermediate_size=FFN, max_position_embeddings=2 * SEQ)),
    "distilbert": ("transformer (scaled)", transformers_model(
        "DistilBertModel", "DistilBertConfig", vocab_size=VOCAB, dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS,
        hidden_dim=FFN, max_position_embeddings=2 * SEQ)),
    "t5_encoder": ("transformer (scaled)", transformers_model(
        "T5EncoderModel", "T5Config", vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=FFN,
        num_layers=LAYERS, num_heads=HEADS, use_cache=False)),
    "gpt2": ("transformer (scaled)", transformers_model(
        "GPT2Model", "GPT2Config", vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
        n_inner=FFN, n_positions=2 * SEQ, use_cache=False)),
    "llama": ("transformer (scaled)", transformers_model("LlamaModel", "LlamaConfig", **_DECODER)),
    "qwen2": ("transformer (scaled)", transformers_model("Qwen2Model", "Qwen2Config", **_DECODER)),
    "mistral": ("transformer (scaled)", transformers_model("MistralModel", "MistralConfig", **_DECODER)),
}


# ----- exports ----------------------------------------------------------------------------


def export(name: str, cache: Path) -> tuple[onnx.ModelProto, dict]:
    """The cached export of ``name`` and its inputs, exported first when missing."""
    path, inputs = cache / f"{name}.onnx", cache / f"{name}.npz"
    if not (path.exists() and inputs.exists()):
        _export(name, path, inputs)
    with np.load(inputs) as saved:
        feeds = {key: saved[key] for key in saved.files}
    return onnx.load(path), feeds


def settle_batch_norm(torch, module, args) -> None:
    """Batch norms' running statistics set to the statistics of one pass over ``args``.

    At initialization they are mean 0 and variance 1 whatever the activations are, and a
    deep random CNN's output then shrinks or grows block by block (EfficientNet-B0's to
    1e-14): nothing to compare outputs on, and activations nearing the denormals would time
    something no trained model does."""
    norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average: after one pass, that pass's statistics
    if norms:
        module.train()
        with torch.no_grad():
            module(*args)
    module.eval()


def _export(name: str, path: Path, inputs: Path) -> None:
    import torch

    with contextlib.suppress(ImportError):  # a builder that needs it says it is missing
        _import_torchvision()  # first: timm, transformers and diffusers import it when it is installed
    torch.manual_seed(SEED)
    module, feeds = ZOO[name][1]()
    args = tuple(torch.from_numpy(value) for value in feeds.values())
    settle_batch_norm(torch, module, args)
    with torch.no_grad():
        program = torch.onnx.export(module, args, input_names=list(feeds), dynamo=True, external_data=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.onnx")
    program.save(str(partial), external_data=False)
    onnx.save(without_node_metadata(onnx.load(partial)), partial)
    np.savez(inputs, **feeds)
    partial.replace(path)  # last: a half-written export is never taken for a cached one


# ----- timing -----------------------------------------------------------------------------


def one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def bench_one(name: str, rounds: int, threads: str, cache: Path) -> dict:
    """One model's row: timings and ratios, or ``error`` naming the stage that failed."""
    family = ZOO[name][0]
    row = {"workload": name, "family": family, "load_average_before": os.getloadavg()}
    stage = "export"
    try:
        model, feeds = export(name, cache)
        stage = "import"
        fusionlang.from_onnx(model)
        stage = "compile or run"
        row.update(timed(model, feeds, rounds, threads))
    except Exception as error:  # a failing model is a finding, reported in its row
        row["error"] = f"{stage}: {one_line(error)}"
        row["where"] = traceback.format_exc(limit=-3).strip().splitlines()[-3:]
    return row


def timed(model: onnx.ModelProto, feeds: dict, rounds: int, threads: str) -> dict:
    fns, _, info = model_runtime.competitors(model, threads, feeds=feeds, unfused=False)
    timing, results = model_runtime.interleaved(fns, rounds)
    clock = {key: value["wall_ms" if threads == "all" else "cpu_ms"] for key, value in timing.items()}
    row = {"inputs": {key: list(value.shape) for key, value in feeds.items()}, **info, "timing": timing,
           # relative to the output's own magnitude: some random-weight outputs are far below 1
           "max_rel_diff_from_ort": model_runtime.agreement(results, floor=0.0), "fused_over_ort": clock["fused"] / clock["ort"]}
    if "ov" in clock:
        row["fused_over_ov"] = clock["fused"] / clock["ov"]
    row["fused_over_best"] = clock["fused"] / min(clock[k] for k in PEERS if k in clock)
    return row


def summarize(rows: list[dict]) -> dict:
    timed_rows = [r for r in rows if "error" not in r]
    summary = {"models": len(rows), "timed": len(timed_rows), "failed": [r["workload"] for r in rows if "error" in r]}
    for ratio in ("fused_over_ort", "fused_over_ov", "fused_over_best"):
        values = [r[ratio] for r in timed_rows if ratio in r]
        summary[f"geomean_{ratio}"] = geomean(values)
        summary[f"worst_{ratio}"] = max(values, default=float("nan"))
    return summary


def result_path(threads: str) -> Path:
    return RESULTS / f"model_runtime_zoo{'' if threads == '1' else '_threads'}.json"


def write(rows: list[dict], args, started: list[float]) -> None:
    result = {"date": time.strftime("%Y-%m-%d"), "machine": platform.processor() or platform.machine(),
              "cores": os.cpu_count(), "threads": args.threads, "rounds": args.rounds,
              "command": "python bench/torch_zoo.py " + " ".join(args.argv),
              "onnxruntime": model_runtime._version("onnxruntime"), "openvino": model_runtime._version("openvino"),
              "torch": model_runtime._version("torch"), "load_average_start": started,
              "load_average_end": os.getloadavg(), "summary": summarize(rows), "rows": rows}
    result_path(args.threads).write_text(json.dumps(result, indent=2) + "\n")


# ----- the README's table -----------------------------------------------------------------

RATIOS = ("fused_over_ort", "fused_over_ov", "fused_over_best")


def load_results() -> dict:
    """The JSON of each thread setting that has one, by setting ("1", "all")."""
    return {threads: json.loads(result_path(threads).read_text()) for threads in ("1", "all")
            if result_path(threads).exists()}


def markdown(results: dict) -> list[str]:
    """One row a model: fusionlang's milliseconds and its ratios to ORT, OpenVINO and the
    better of the two at each thread setting, the largest output difference; then a line of
    geomeans and worsts a setting."""
    settings = list(results)
    head = ["model", "family"] + [f"{label} {'1t' if t == '1' else t}" for t in settings
                                  for label in ("fl ms", "fl/ORT", "fl/OV", "fl/best")] + ["max diff"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "--:|" * (len(head) - 2)]
    rows = {t: {r["workload"]: r for r in results[t]["rows"]} for t in settings}
    for name in dict.fromkeys(n for t in settings for n in rows[t]):
        found = [rows[t].get(name) for t in settings]
        family = next(r["family"] for r in found if r)
        cells = [cell for t, row in zip(settings, found) for cell in _cells(row, t)]
        diffs = [max(r["max_rel_diff_from_ort"].values()) for r in found if r and "error" not in r]
        diff = f"{max(diffs):.1e}" if diffs else ""
        lines.append(f"| {name} | {family} | " + " | ".join(cells) + f" | {diff} |")
    return lines + [""] + [_summary_line(results[t]) for t in settings]


def _setting(threads: str) -> str:
    return "1t: 1 thread, CPU time" if threads == "1" else "all: every core, wall time"


def _cells(row: dict | None, threads: str) -> list[str]:
    if row is None:
        return ["not run", "", "", ""]
    if "error" in row:
        return [f"failed: {row['error'].replace('|', '/')}", "", "", ""]
    ms = row["timing"]["fused"]["wall_ms" if threads == "all" else "cpu_ms"]
    return [f"{ms:.1f}"] + [f"{row[ratio]:.2f}" if ratio in row else "-" for ratio in RATIOS]


def _summary_line(result: dict) -> str:
    s = result["summary"]
    load = [f"{v:.1f}" for v in result["load_average_start"][:1] + result["load_average_end"][:1]]
    ratios = ", ".join(f"fl/{peer} {s[f'geomean_{ratio}']:.2f} (worst {s[f'worst_{ratio}']:.2f})"
                       for peer, ratio in zip(("ORT", "OV", "best"), RATIOS))
    return (f"{_setting(result['threads'])}: medians of {result['rounds']} interleaved rounds, {result['date']}, "
            f"load average {load[0]} at the start and {load[1]} at the end; {s['timed']} of {s['models']} "
            f"timed; geomean {ratios}.")


# ----- command line -----------------------------------------------------------------------


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", choices=["1", "all"], default="1")
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--markdown", action="store_true", help="print the README's tables from the JSON")
    args = parser.parse_args(argv)
    args.argv = argv
    if args.markdown:
        print("\n".join(markdown(load_results())))
        return 0
    chosen = [w for w in args.only.split(",") if w] or list(ZOO)
    unknown = [w for w in chosen if w not in ZOO]
    if unknown:
        parser.error(f"--only: unknown {', '.join(unknown)}; known: {', '.join(ZOO)}")
    if args.threads == "all":  # before libgomp starts with the first compiled model
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    started, rows = list(os.getloadavg()), []
    RESULTS.mkdir(exist_ok=True)
    for name in chosen:
        print(f"... {name}", file=sys.stderr, flush=True)
        rows.append(bench_one(name, args.rounds, args.threads, cache_dir()))
        print(f"    {rows[-1].get('error') or round(rows[-1]['fused_over_best'], 2)}", file=sys.stderr, flush=True)
        write(rows, args, started)  # after each model: a stopped run keeps what it measured
    print("\n".join(markdown({args.threads: load_results()[args.threads]})))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
