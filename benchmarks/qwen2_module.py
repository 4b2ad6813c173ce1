"""A Qwen2-shaped decoder written in plain torch (no transformers), for machines where transformers' own Qwen2
does not export (torch < 2.13: docs/architecture.md's known limit) -- the GPU machine's host CPU among them.

Same layer as transformers' Qwen2 (RMSNorm, q/k/v with biases, rotate-half RoPE, grouped-query attention via
repeat_kv, SwiGLU MLP, tied embedding), written the way transformers writes it so the same fusion passes apply,
and the decoder signature of docs/decoders.md (past_key_<i> / past_value_<i> in, present_* out, last-position
logits). Random weights (normal, std 0.05, as benchmarks/decoder.py sets them).

    python benchmarks/qwen2_module.py --shape qwen2-0.5b --dtypes int8-a8,int4-a8 --out /tmp/q   # convert
    taskset -c 0,1 ipexconvert bench /tmp/q/qwen2-0.5b.int8-a8.ipxc --threads 2 --prompt-tokens 512 --new-tokens 32
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ipexconvert.examples.decoder_cache import DecoderShape, named_forward, decoder_dynamic_dims, decoder_example_inputs

SHAPES = {
    "qwen2-0.5b": dict(vocab=151936, hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864, positions=32768),
    # TinyLlama-1.1B (Llama: no q/k/v biases, an LM head of its own, RoPE theta 10000), for the GPU decode targets
    "tinyllama-1.1b": dict(vocab=32000, hidden=2048, layers=22, heads=32, kv_heads=4, intermediate=5632, positions=2048,
                           qkv_bias=False, tied=False, theta=10_000.0),
    "tiny": dict(vocab=512, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, positions=256),
}
THETA, EPS = 1_000_000.0, 1e-6


class RmsNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + EPS))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n_rep: int):
    batch, kv_heads, length, head_dim = x.shape
    if n_rep == 1:
        return x
    x = x[:, :, None, :, :].expand(batch, kv_heads, n_rep, length, head_dim)
    return x.reshape(batch, kv_heads * n_rep, length, head_dim)


class Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, intermediate: int, qkv_bias: bool = True):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.input_norm, self.post_norm = RmsNorm(hidden), RmsNorm(hidden)
        self.q = nn.Linear(hidden, heads * self.head_dim, bias=qkv_bias)
        self.k = nn.Linear(hidden, kv_heads * self.head_dim, bias=qkv_bias)
        self.v = nn.Linear(hidden, kv_heads * self.head_dim, bias=qkv_bias)
        self.o = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.gate = nn.Linear(hidden, intermediate, bias=False)
        self.up = nn.Linear(hidden, intermediate, bias=False)
        self.down = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x, cos, sin, mask, past_k, past_v):
        b, s, _ = x.shape
        h = self.input_norm(x)
        q = self.q(h).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.k(h).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.v(h).view(b, s, -1, self.head_dim).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        rep = self.heads // self.kv_heads
        a = F.scaled_dot_product_attention(q, repeat_kv(k, rep), repeat_kv(v, rep), attn_mask=mask)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, -1))
        h = self.post_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h)), k, v


class Qwen2Shaped(nn.Module):
    """forward(input_ids, past_key_0, past_value_0, ...) -> {logits, present_key_0, present_value_0, ...}."""

    def __init__(self, vocab: int, hidden: int, layers: int, heads: int, kv_heads: int, intermediate: int,
                 positions: int, seed: int = 0, qkv_bias: bool = True, tied: bool = True, theta: float = THETA):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList([Layer(hidden, heads, kv_heads, intermediate, qkv_bias) for _ in range(layers)])
        self.norm = RmsNorm(hidden)
        self.head = None if tied else nn.Linear(hidden, vocab, bias=False)
        head_dim = hidden // heads
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() == 2:
                    p.normal_(0.0, 0.05)
        self.shape = DecoderShape(layers=layers, kv_heads=kv_heads, head_dim=head_dim, vocab_size=vocab,
                                  max_positions=positions)
        self.forward = named_forward(self._forward, ["input_ids", *self.shape.cache_inputs()])
        self.eval()

    def _forward(self, input_ids, **past):
        past_len, seq, device = past["past_key_0"].shape[2], input_ids.shape[1], input_ids.device
        positions = torch.arange(past_len, past_len + seq, dtype=torch.float32, device=device)
        freqs = positions[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        x = self.embed(input_ids)
        cos, sin = emb.cos()[None, None].to(x.dtype), emb.sin()[None, None].to(x.dtype)
        keys = torch.arange(past_len + seq, device=device)
        causal = keys[None, :] <= torch.arange(past_len, past_len + seq, device=device)[:, None]
        mask = torch.zeros(causal.shape, dtype=x.dtype, device=device).masked_fill(~causal, float("-inf"))
        out = {}
        for i, layer in enumerate(self.layers):
            x, out[f"present_key_{i}"], out[f"present_value_{i}"] = layer(
                x, cos, sin, mask, past[f"past_key_{i}"], past[f"past_value_{i}"])
        head = self.embed.weight if self.head is None else self.head.weight  # tied or its own; last position only
        logits = F.linear(self.norm(x[:, -1:]), head)
        return {"logits": logits, **out}


# name -> optimize() settings, as benchmarks/decoder.py's ipexconvert systems (quantized LM head; timing only:
# random weights have near-flat logits, accuracy is judged in the tests)
TIMING_ONLY = dict(min_cosine=0.0, min_top1_agreement=0.0, max_perplexity_ratio=1e9)
SETTINGS = {
    "fp32": dict(dtype="fp32"),
    "bf16": dict(dtype="bf16"),
    "int8": dict(dtype="int8", int8_scheme="weight-only",
                 woq={"quantize_lm_head": True, "activations": "float", "guard": False}, **TIMING_ONLY),
    "int8-a8": dict(dtype="int8", int8_scheme="weight-only",
                    woq={"quantize_lm_head": True, "activations": "int8", "guard": False}, **TIMING_ONLY),
    "int4": dict(dtype="int4", woq={"quantize_lm_head": True, "activations": "float", "guard": False}, **TIMING_ONLY),
    "int4-a8": dict(dtype="int4", woq={"quantize_lm_head": True, "activations": "int8", "guard": False}, **TIMING_ONLY),
    "int4-bf16": dict(dtype="int4", woq={"quantize_lm_head": True, "activations": "bf16", "guard": False}, **TIMING_ONLY),
}
# the same with the KV cache in bf16 (--kv-cache bf16): "int8-a8-kv16", "int4-a8-kv16", ..., and as int8 rows
# (--kv-cache int8): "int8-a8-kv8", "int4-a8-kv8", ..., "bf16-kv8", "int4-bf16-kv8" (bf16 activations cache bf16
# by default: no -kv16 of those)
FLOAT_ACTIVATIONS = [name for name in SETTINGS if name not in ("bf16", "int4-bf16")]
SETTINGS.update({f"{name}-kv8": dict(SETTINGS[name], kv_cache="int8") for name in list(SETTINGS)})
SETTINGS.update({f"{name}-kv16": dict(SETTINGS[name], kv_cache="bf16") for name in FLOAT_ACTIVATIONS})


def main() -> None:
    import ipexconvert

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen2-0.5b")
    ap.add_argument("--dtypes", default="int8-a8,int4-a8", help=f"comma-separated, of {', '.join(SETTINGS)}")
    ap.add_argument("--out", type=Path, required=True, help="folder for the artifacts")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    module = Qwen2Shaped(**SHAPES[args.shape])
    example = decoder_example_inputs(module.shape, batch=1, seq=4, past=3)
    dims = decoder_dynamic_dims(module.shape, max_batch=4)
    for name in args.dtypes.split(","):
        start = time.perf_counter()
        path = args.out / f"{args.shape}.{name}.ipxc"
        ipexconvert.optimize(module, example, dynamic_dims=dims, output=path, eos_token_ids=[0], **SETTINGS[name])
        print(f"{path}: converted in {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
