"""A small decoder written by hand (no transformers) following the signature of docs/decoders.md: input_ids and
past_key_<i> / past_value_<i> in, a dict of logits and present_key_<i> / present_value_<i> out. Learned positions,
two grouped-query attention layers whose cache grows by torch.cat along dim 2, an LM head. Options break the
signature in one way each, for the tests of its errors. Shared by the tests of decoder_signature.py,
decoder_settings.py and the CLI (a module with a unique name, on the path through tests/conftest.py)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ipexconvert.ir.dynamic_dims import DynamicDim

VOCAB, DIM, HEADS, KV_HEADS, LAYERS, MAX_POSITIONS = 256, 64, 4, 2, 2, 160
HEAD_DIM = DIM // HEADS
CACHE = [f"past_{kind}_{i}" for i in range(LAYERS) for kind in ("key", "value")]


class _Layer(nn.Module):
    def __init__(self, llama: bool = False):
        super().__init__()
        norm = (lambda: nn.RMSNorm(DIM, eps=1e-6)) if llama else (lambda: nn.LayerNorm(DIM))
        self.norm1, self.norm2 = norm(), norm()
        self.q = nn.Linear(DIM, DIM)
        self.k, self.v = nn.Linear(DIM, KV_HEADS * HEAD_DIM), nn.Linear(DIM, KV_HEADS * HEAD_DIM)
        self.o = nn.Linear(DIM, DIM)
        self.up, self.down = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)
        self.gate = nn.Linear(DIM, 4 * DIM, bias=False) if llama else None  # SwiGLU: down(silu(gate) * up)

    def forward(self, x, past_k, past_v, mask, append: bool = True):
        b, s, _ = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, s, HEADS, HEAD_DIM).transpose(1, 2)
        k = self.k(h).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = self.v(h).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
        all_k, all_v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        rep = HEADS // KV_HEADS
        a = F.scaled_dot_product_attention(q, all_k.repeat_interleave(rep, 1), all_v.repeat_interleave(rep, 1),
                                           attn_mask=mask)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, DIM))
        h = self.norm2(x)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h) if self.gate is not None else F.gelu(self.up(h)))
        return (x, all_k, all_v) if append else (x, k, v)


class TinyDecoder(nn.Module):
    """forward(input_ids, past_key_0, past_value_0, past_key_1, past_value_1) -> {logits, present_key_0, ...}.

    all_logits: logits of every new position ([batch, seq, vocab]) instead of the last one's.
    llama: RMSNorm and a SwiGLU MLP (Llama's layer) instead of LayerNorm and GELU.
    Breaking the signature: outputs "tuple" (unnamed outputs), drop (an output left out), logits_rank2 (logits
    [batch, vocab]), present_new_only (present_* without the past), attention_mask (an extra input)."""

    def __init__(self, all_logits: bool = False, outputs: str = "dict", drop: tuple[str, ...] = (),
                 logits_rank2: bool = False, present_new_only: bool = False, seed: int = 0, llama: bool = False):
        super().__init__()
        torch.manual_seed(seed)
        self.embed, self.pos = nn.Embedding(VOCAB, DIM), nn.Embedding(MAX_POSITIONS, DIM)
        self.layers = nn.ModuleList([_Layer(llama) for _ in range(LAYERS)])
        self.norm = nn.RMSNorm(DIM, eps=1e-6) if llama else nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.all_logits, self.outputs, self.drop = all_logits, outputs, drop
        self.logits_rank2, self.present_new_only = logits_rank2, present_new_only
        self.eval()

    def forward(self, input_ids, past_key_0, past_value_0, past_key_1, past_value_1):
        return self.run(input_ids, [(past_key_0, past_value_0), (past_key_1, past_value_1)])

    def run(self, input_ids, cache):
        past, seq = cache[0][0].shape[2], input_ids.shape[1]
        positions = torch.arange(past, past + seq)
        mask = torch.arange(past + seq)[None, :] <= positions[:, None]  # causal, over the cache and the new tokens
        x = self.embed(input_ids) + self.pos(positions)[None]
        out = {}
        for i, (layer, (past_k, past_v)) in enumerate(zip(self.layers, cache)):
            x, out[f"present_key_{i}"], out[f"present_value_{i}"] = layer(x, past_k, past_v, mask,
                                                                        append=not self.present_new_only)
        x = self.norm(x)
        logits = self.head(x if self.all_logits else x[:, -1:])
        if self.logits_rank2:
            logits = logits[:, -1]
        result = {"logits": logits, **out}
        for name in self.drop:
            result.pop(name)
        return tuple(result.values()) if self.outputs == "tuple" else result


class WithAttentionMask(TinyDecoder):
    """An extra input generate() would not feed."""

    def forward(self, input_ids, attention_mask, past_key_0, past_value_0, past_key_1, past_value_1):
        return self.run(input_ids * attention_mask, [(past_key_0, past_value_0), (past_key_1, past_value_1)])


def build(**kwargs) -> TinyDecoder:
    """A --model-factory for the CLI tests."""
    return TinyDecoder(**kwargs)


def example_inputs(batch: int = 1, seq: int = 6, past: int = 3, seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    inputs = {"input_ids": torch.randint(0, VOCAB, (batch, seq), generator=generator)}
    for name in CACHE:
        inputs[name] = torch.randn(batch, KV_HEADS, past, HEAD_DIM, generator=generator)
    return inputs


def dynamic_dims(cache_dim: str = "past", cache_min: int = 0) -> dict:
    batch = DynamicDim("batch", 1, 8)
    dims = {"input_ids": {0: batch, 1: DynamicDim("seq", 1, MAX_POSITIONS)}}
    for name in CACHE:
        dims[name] = {0: batch, 2: DynamicDim(cache_dim, cache_min, MAX_POSITIONS - 1)}
    return dims


def input_args(cache_dim: str = "past") -> list[str]:
    """The same signature as --input NAME:SHAPE:DTYPE arguments."""
    return [f"input_ids:batch[1..8],seq[1..{MAX_POSITIONS}]:int64",
            *[f"{name}:batch[1..8],{KV_HEADS},{cache_dim}[0..{MAX_POSITIONS - 1}],{HEAD_DIM}:float32" for name in CACHE]]


def eager_greedy(module: TinyDecoder, prompt: torch.Tensor, new_tokens: int) -> list[list[int]]:
    """The module's own greedy loop in eager torch: the prompt, then one token a call with the cache it returned."""
    cache = [(torch.zeros(prompt.shape[0], KV_HEADS, 0, HEAD_DIM),) * 2 for _ in range(LAYERS)]
    step, chosen = prompt, []
    with torch.no_grad():
        for _ in range(new_tokens):
            out = module.run(step, cache)
            next_ids = out["logits"][:, -1].argmax(-1)
            chosen.append(next_ids)
            cache = [(out[f"present_key_{i}"], out[f"present_value_{i}"]) for i in range(LAYERS)]
            step = next_ids[:, None]
    return torch.stack(chosen, dim=1).tolist()
