"""Generate tests/data/exports/: tiny Hugging Face models exported by torch.onnx's default exporter.

Each model is a random-weight configuration scaled down to a few layers, hidden size 32-64
and a small vocabulary, exported with ``torch.onnx.export(..., dynamo=True)`` at a fixed
static shape (batch 2, a short sequence). Next to each ``<name>.onnx`` (weights inside, no
external data) lies ``<name>.npz``: the inputs under ``in:<name>`` and onnxruntime's outputs
under ``out:<name>``. tests/frontend/test_real_exports.py imports, compiles and runs them
without torch. Needs torch, transformers, onnxscript, onnx and onnxruntime:

    /work/torchenv/bin/python tools/make_exports.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

OUT_DIR = Path(__file__).resolve().parent.parent / "tests" / "data" / "exports"
BATCH, SEQ, VOCAB, SEED = 2, 8, 96, 0
HIDDEN, HEADS, LAYERS, FFN = 32, 2, 2, 64
IMAGE, PATCH, MELS, FRAMES = 32, 8, 16, 16


def require_exporter_stack():
    """Import torch and transformers, or exit 2 with one line saying what is missing."""
    try:
        import onnxruntime  # noqa: F401 - checked here so the failure is one clear line
        import onnxscript  # noqa: F401
        import torch
        import transformers
    except ImportError as error:
        print(f"make_exports.py needs torch, transformers, onnxscript and onnxruntime: {error}", file=sys.stderr)
        sys.exit(2)
    return torch, transformers


def token_inputs(rng: np.random.Generator, with_types: bool) -> dict[str, np.ndarray]:
    """Token ids below the vocabulary, a mask whose second row pads its tail, token types 0/1."""
    ids = rng.integers(0, VOCAB, size=(BATCH, SEQ), dtype=np.int64)
    mask = np.ones((BATCH, SEQ), dtype=np.int64)
    mask[1, SEQ - 3:] = 0
    feeds = {"input_ids": ids, "attention_mask": mask}
    if with_types:
        types = np.zeros((BATCH, SEQ), dtype=np.int64)
        types[:, SEQ // 2:] = 1
        feeds["token_type_ids"] = types
    return feeds


def bert(tf, rng):
    config = tf.BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                           num_attention_heads=HEADS, intermediate_size=FFN, max_position_embeddings=32)
    return tf.BertModel(config), token_inputs(rng, with_types=True)


def distilbert(tf, rng):
    config = tf.DistilBertConfig(vocab_size=VOCAB, dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS, hidden_dim=FFN,
                                 max_position_embeddings=32)
    return tf.DistilBertModel(config), token_inputs(rng, with_types=False)


def gpt2(tf, rng):
    config = tf.GPT2Config(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=32,
                           use_cache=False)
    return tf.GPT2Model(config), token_inputs(rng, with_types=False)


def t5_encoder(tf, rng):
    config = tf.T5Config(vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=FFN, num_layers=LAYERS,
                         num_heads=HEADS, relative_attention_num_buckets=8, use_cache=False)
    return tf.T5EncoderModel(config), token_inputs(rng, with_types=False)


def vit(tf, rng):
    config = tf.ViTConfig(image_size=IMAGE, patch_size=PATCH, num_channels=3, hidden_size=HIDDEN,
                          num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=FFN)
    pixels = rng.standard_normal((BATCH, 3, IMAGE, IMAGE)).astype(np.float32)
    return tf.ViTModel(config, add_pooling_layer=False), {"pixel_values": pixels}


def whisper_encoder(tf, rng):
    config = tf.WhisperConfig(vocab_size=VOCAB, num_mel_bins=MELS, d_model=HIDDEN, encoder_layers=LAYERS,
                              encoder_attention_heads=HEADS, encoder_ffn_dim=FFN, decoder_layers=1,
                              decoder_attention_heads=HEADS, decoder_ffn_dim=FFN,
                              max_source_positions=FRAMES // 2, max_target_positions=16, pad_token_id=0,
                              bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    features = rng.standard_normal((BATCH, MELS, FRAMES)).astype(np.float32)
    return tf.WhisperModel(config).get_encoder(), {"input_features": features}


MODELS = {"bert": bert, "distilbert": distilbert, "gpt2": gpt2, "t5_encoder": t5_encoder, "vit": vit,
          "whisper_encoder": whisper_encoder}
#: the exporter's opset for each export: None is its default (opset 20 in torch 2.13, which spells
#: attention out in MatMul/Softmax); at opset 23 it emits the Attention and RMSNormalization ops
MODEL_OPSETS = {name: (name, None) for name in MODELS} | {
    f"{name}_opset23": (name, 23) for name in ["bert", "gpt2", "t5_encoder"]}


class PlainOutputs:
    """Wrap a model so it takes its inputs by keyword and returns a plain tuple of tensors."""

    def __new__(cls, torch, model, names):
        class Wrapper(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, *args):
                result = self.model(**dict(zip(names, args)), return_dict=False)
                return tuple(t for t in result if t is not None)

        return Wrapper().eval()


def without_node_metadata(model):
    """Drop each node's metadata_props: the exporter's stack traces name this machine's paths
    and line numbers, triple the file's size and change with every edit of this script."""
    for node in model.graph.node:
        del node.metadata_props[:]
    return model


def export_one(torch, tf, name: str) -> None:
    import onnx
    import onnxruntime

    torch.manual_seed(SEED)
    builder, opset = MODEL_OPSETS[name]
    model, feeds = MODELS[builder](tf, np.random.default_rng(SEED))
    model.eval()
    names = list(feeds)
    wrapper = PlainOutputs(torch, model, names)
    args = tuple(torch.from_numpy(feeds[n]) for n in names)
    path = OUT_DIR / f"{name}.onnx"
    with torch.no_grad():
        program = torch.onnx.export(wrapper, args, input_names=names, dynamo=True, external_data=False,
                                    opset_version=opset)
    program.save(str(path), external_data=False)
    onnx.save(without_node_metadata(onnx.load(path)), path)
    onnx.checker.check_model(onnx.load(path))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    outputs = session.run(None, feeds)
    out_names = [o.name for o in session.get_outputs()]
    sample = {f"in:{k}": v for k, v in feeds.items()} | {f"out:{k}": v for k, v in zip(out_names, outputs)}
    np.savez_compressed(OUT_DIR / f"{name}.npz", **sample)
    print(f"{name}: {path.stat().st_size / 1024:.0f} KiB, outputs {[o.shape for o in outputs]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(MODEL_OPSETS), help="export only these models")
    options = parser.parse_args(argv)
    torch, tf = require_exporter_stack()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name in options.only or MODEL_OPSETS:
        export_one(torch, tf, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
