"""The four models bench/torch_runtime.py times, built from configs with random weights
(nothing downloaded): a ResNet-18, a MobileNetV2, a BERT-like encoder and a Llama-like
decoder. ``build(name, size)`` gives the model and an example input; "bench" is the timed
size (the full architectures at small inputs), "test" a small one for tests (the same
layers, narrower, and the CNNs shorter).

The ResNet-18 and MobileNetV2 are written out (torchvision's layouts: BasicBlock
[2, 2, 2, 2]; inverted residuals with ReLU6) so no torchvision install is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


# ----- ResNet-18 -------------------------------------------------------------------------
class BasicBlock(nn.Module):
    def __init__(self, inputs: int, outputs: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.down = None
        if stride != 1 or inputs != outputs:
            self.down = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """torchvision's ResNet-18 at ``width`` (64 there); ``blocks`` per stage (2 there)."""

    def __init__(self, width: int = 64, classes: int = 1000, blocks: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, channels = [], width
        for stage, stride in enumerate((1, 2, 2, 2)):
            outputs = width * 2 ** stage
            layers += [BasicBlock(channels, outputs, stride)]
            layers += [BasicBlock(outputs, outputs, 1) for _ in range(blocks - 1)]
            channels = outputs
        self.blocks = nn.Sequential(*layers)
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# ----- MobileNetV2 -----------------------------------------------------------------------
def conv_bn(inputs: int, outputs: int, kernel: int, stride: int, groups: int = 1, relu6: bool = True) -> nn.Sequential:
    layers = [nn.Conv2d(inputs, outputs, kernel, stride, kernel // 2, groups=groups, bias=False),
              nn.BatchNorm2d(outputs)]
    return nn.Sequential(*layers, nn.ReLU6()) if relu6 else nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, inputs: int, outputs: int, stride: int, expand: int):
        super().__init__()
        hidden = inputs * expand
        layers = [conv_bn(inputs, hidden, 1, 1)] if expand != 1 else []
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden), conv_bn(hidden, outputs, 1, 1, relu6=False)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and inputs == outputs

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


#: torchvision's MobileNetV2 settings: expansion, channels, repeats, first stride
MOBILENET_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                      (6, 320, 1, 1))


class MobileNetV2(nn.Module):
    """torchvision's MobileNetV2 at ``width`` (1.0 there), each stage's repeats capped at
    ``max_repeats`` (none there)."""

    def __init__(self, width: float = 1.0, classes: int = 1000, max_repeats: int = 4):
        super().__init__()
        channels = max(8, int(32 * width))
        layers = [conv_bn(3, channels, 3, 2)]
        for expand, outputs, repeats, stride in MOBILENET_SETTINGS:
            outputs = max(8, int(outputs * width))
            for k in range(min(repeats, max_repeats)):
                layers.append(InvertedResidual(channels, outputs, stride if k == 0 else 1, expand))
                channels = outputs
        last = max(16, int(1280 * width))
        layers.append(conv_bn(channels, last, 1, 1))
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(last, classes)

    def forward(self, x):
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# ----- BERT-like encoder -----------------------------------------------------------------
class EncoderLayer(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden)

    def forward(self, x):
        batch, seq, hidden = x.shape
        q, k, v = (t.reshape(batch, seq, self.heads, hidden // self.heads).transpose(1, 2)
                   for t in self.qkv(x).split(hidden, dim=-1))
        attention = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(batch, seq, hidden)
        x = self.norm1(x + self.out(attention))  # post-norm, as BERT
        return self.norm2(x + self.down(F.gelu(self.up(x))))


class BertEncoder(nn.Module):
    def __init__(self, vocab: int, hidden: int, heads: int, layers: int, max_len: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(max_len, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)
        self.classifier = nn.Linear(hidden, 2)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.norm(self.tokens(ids) + self.positions(positions))
        for layer in self.layers:
            x = layer(x)
        return self.classifier(torch.tanh(self.pooler(x[:, 0])))


# ----- Llama-like decoder ----------------------------------------------------------------
class RMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotary_tables(seq: int, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    frequencies = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(seq).float(), frequencies)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + turned * sin


class DecoderLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, intermediate: int):
        super().__init__()
        self.heads = heads
        self.attention_norm = RMSNorm(hidden)
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden, bias=False) for _ in range(4))
        self.mlp_norm = RMSNorm(hidden)
        self.gate = nn.Linear(hidden, intermediate, bias=False)
        self.up = nn.Linear(hidden, intermediate, bias=False)
        self.down = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x, cos, sin):
        batch, seq, hidden = x.shape
        h = self.attention_norm(x)
        q, k, v = (proj(h).reshape(batch, seq, self.heads, hidden // self.heads).transpose(1, 2)
                   for proj in (self.q, self.k, self.v))
        attention = F.scaled_dot_product_attention(rotate(q, cos, sin), rotate(k, cos, sin), v, is_causal=True)
        x = x + self.o(attention.transpose(1, 2).reshape(batch, seq, hidden))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class LlamaDecoder(nn.Module):
    def __init__(self, vocab: int, hidden: int, heads: int, layers: int, intermediate: int, max_len: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(DecoderLayer(hidden, heads, intermediate) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        cos, sin = rotary_tables(max_len, hidden // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, ids):
        seq = ids.shape[1]
        cos, sin = self.cos[:seq], self.sin[:seq]
        x = self.tokens(ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


# ----- configs ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    """One model at one size: how to build it and the shape of its example input."""

    name: str
    build: object
    input_shape: tuple[int, ...]
    #: token ids below this (a language model's input); 0 for an image
    vocab: int = 0


CONFIGS = {
    "bench": [
        Config("resnet18", lambda: ResNet18(64, 1000), (4, 3, 64, 64)),
        Config("mobilenet_v2", lambda: MobileNetV2(1.0, 1000), (4, 3, 64, 64)),
        Config("bert", lambda: BertEncoder(8000, 256, 4, 4, 128), (4, 64), vocab=8000),
        Config("llama", lambda: LlamaDecoder(8000, 256, 4, 2, 688, 128), (4, 64), vocab=8000),
    ],
    # narrower and shorter (one block per stage) so a test compiles in seconds; the
    # batch-norm statistics still see enough values at the last stage to be well conditioned
    "test": [
        Config("resnet18", lambda: ResNet18(4, 10, blocks=1), (2, 3, 64, 64)),
        Config("mobilenet_v2", lambda: MobileNetV2(0.25, 10, max_repeats=1), (2, 3, 64, 64)),
        Config("bert", lambda: BertEncoder(50, 32, 2, 2, 16), (2, 8), vocab=50),
        Config("llama", lambda: LlamaDecoder(50, 32, 2, 2, 64, 16), (2, 8), vocab=50),
    ],
}
MODELS = tuple(config.name for config in CONFIGS["bench"])


def build(name: str, size: str = "bench", seed: int = 0) -> tuple[nn.Module, torch.Tensor]:
    """The model ``name`` at ``size`` (random weights from ``seed``, BN statistics made
    non-trivial) and an example input."""
    config = next(c for c in CONFIGS[size] if c.name == name)
    torch.manual_seed(seed)
    model = config.build()
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
    if config.vocab:
        example = torch.randint(0, config.vocab, config.input_shape)
    else:
        example = torch.randn(config.input_shape)
    return model, example


def loss_of(output: torch.Tensor) -> torch.Tensor:
    """The training step's loss, computed in eager outside the compiled model: a scalar
    that reads every output (no target is needed to time forward, loss and backward)."""
    return output.square().mean()
