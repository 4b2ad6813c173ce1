"""Every op in the opset: its reference matches the eager torch function it stands for,
and its shape/dtype rule (`infer`) matches what the reference really produces, on
concrete shapes and on symbolic ones.

Each case is one op call: inputs, attrs, and the eager torch expression it must equal.
A new op registered without a case here makes test_every_registered_op_has_a_case fail.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, Optional

import pytest
import torch
import torch.nn.functional as F

from ipexconvert.ir import OPSET, TensorSpec, get_op
from ipexconvert.ir.dims import resolve, resolve_shape, same
from ipexconvert.ir.ops.aten import AtenOp, refusal_reason

_GEN = torch.Generator().manual_seed(1234)


def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(shape, generator=_GEN).to(dtype)


def randint(high: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=_GEN)


@dataclass
class Case:
    id: str
    op: str
    inputs: list[Optional[torch.Tensor]]
    attrs: dict
    eager: Callable[..., object]  # called with the same inputs, positionally
    dims: dict[str, int] = field(default_factory=dict)  # named dims the attrs refer to
    # input index -> axis -> dim name, for the symbolic shape-rule check
    symbolic: dict[int, dict[int, str]] = field(default_factory=dict)
    atol: float = 1e-5
    rtol: float = 1e-5


BF16 = dict(atol=2e-2, rtol=2e-2)


def _rope_kv_append(q, k, v, c, s, past_key, past_value):
    """Heads split off by reshape and permute, rope in float32 rounded once, the caches concatenated."""
    def heads(x):
        return x.reshape(x.shape[0], x.shape[1], -1, past_key.shape[3]).permute(0, 2, 1, 3)

    def rope(x):
        xf, half = x.float(), x.shape[-1] // 2
        return (xf * c + torch.cat([-xf[..., half:], xf[..., :half]], dim=-1) * s).to(x.dtype)

    q, k, v = heads(q), heads(k), heads(v)
    cache = past_key.dtype  # (a cache narrower than the projections: rope's result rounded to it)
    return rope(q), torch.cat([past_key, rope(k).to(cache)], dim=2), torch.cat([past_value, v.to(cache)], dim=2)


def _rope_kv_write(q, k, v, c, s, cache_key, cache_value, position: int):
    """rope_kv_append's q, k and v, with k and v written over the caches' positions [position, position + seq)."""
    q, k, v = _rope_kv_append(q, k, v, c, s, cache_key[:, :, :0], cache_value[:, :, :0])
    end = position + k.shape[2]
    return (q, torch.cat([cache_key[:, :, :position], k, cache_key[:, :, end:]], dim=2),
            torch.cat([cache_value[:, :, :position], v, cache_value[:, :, end:]], dim=2))


def _merged(qkv, q_end: int, k_end: int):
    """q, k and v: the column ranges of a merged projection."""
    return qkv[..., :q_end], qkv[..., q_end:k_end], qkv[..., k_end:]


def _ln(x, w, b, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], w, b, eps)


CASES: list[Case] = [
    # ---- conv2d -------------------------------------------------------------
    Case("conv2d-bias", "conv2d", [randn(2, 3, 9, 9), randn(4, 3, 3, 3), randn(4)],
         {"stride": [1, 1], "padding": [1, 1]}, lambda x, w, b: F.conv2d(x, w, b, padding=1),
         symbolic={0: {0: "batch", 2: "h", 3: "w"}}),
    Case("conv2d-stride-dilation-groups-nobias", "conv2d", [randn(2, 4, 11, 10), randn(6, 2, 3, 3), None],
         {"stride": [2, 3], "padding": [2, 1], "dilation": [2, 1], "groups": 2},
         lambda x, w, b: F.conv2d(x, w, None, stride=(2, 3), padding=(2, 1), dilation=(2, 1), groups=2),
         symbolic={0: {0: "batch", 2: "h", 3: "w"}}),
    Case("conv2d-post-op-relu", "conv2d", [randn(1, 3, 6, 6), randn(5, 3, 3, 3), randn(5)],
         {"post_ops": [{"kind": "relu"}]}, lambda x, w, b: torch.relu(F.conv2d(x, w, b)),
         symbolic={0: {0: "batch"}}),
    Case("conv2d-post-op-residual-add-then-silu", "conv2d",
         [randn(2, 3, 6, 6), randn(3, 3, 1, 1), randn(3), randn(2, 3, 6, 6)],
         {"post_ops": [{"kind": "add", "operand": 3}, {"kind": "silu"}]},
         lambda x, w, b, r: F.silu(F.conv2d(x, w, b) + r),
         symbolic={0: {0: "batch"}, 3: {0: "batch"}}),
    Case("conv2d-channels-last-input", "conv2d",
         [randn(2, 3, 8, 8).contiguous(memory_format=torch.channels_last), randn(4, 3, 3, 3), randn(4)],
         {}, lambda x, w, b: F.conv2d(x, w, b)),
    # ---- linear / matmul --------------------------------------------------
    Case("linear-3d-bias", "linear", [randn(2, 5, 8), randn(6, 8), randn(6)], {},
         lambda x, w, b: F.linear(x, w, b), symbolic={0: {0: "batch", 1: "seq"}}),
    Case("linear-no-bias-gelu-tanh", "linear", [randn(3, 8), randn(4, 8), None],
         {"post_ops": [{"kind": "gelu_tanh"}]}, lambda x, w, b: F.gelu(F.linear(x, w), approximate="tanh"),
         symbolic={0: {0: "batch"}}),
    Case("linear-post-op-mul-operand", "linear", [randn(2, 3, 8), randn(4, 8), randn(4), randn(2, 3, 4)],
         {"post_ops": [{"kind": "mul", "operand": 3}, {"kind": "sigmoid"}]},
         lambda x, w, b, m: torch.sigmoid(F.linear(x, w, b) * m),
         symbolic={0: {0: "batch", 1: "seq"}, 3: {0: "batch", 1: "seq"}}),
    Case("matmul-2d", "matmul", [randn(4, 5), randn(5, 3)], {}, torch.matmul, symbolic={0: {0: "m"}, 1: {1: "n"}}),
    Case("matmul-broadcast-batch", "matmul", [randn(2, 1, 4, 5), randn(3, 5, 6)], {}, torch.matmul,
         symbolic={0: {0: "batch", 2: "seq"}}),
    Case("matmul-post-op-add-tanh", "matmul", [randn(2, 4, 5), randn(2, 5, 3), randn(3)],
         {"post_ops": [{"kind": "add", "operand": 2}, {"kind": "tanh"}]},
         lambda a, b, c: torch.tanh(torch.matmul(a, b) + c), symbolic={0: {0: "batch"}, 1: {0: "batch"}}),
    # ---- attention ------------------------------------------------------------
    Case("sdpa-no-mask", "sdpa", [randn(2, 2, 5, 8), randn(2, 2, 7, 8), randn(2, 2, 7, 4), None], {},
         lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v),
         symbolic={0: {0: "batch", 2: "seq"}, 1: {0: "batch", 2: "kv"}, 2: {0: "batch", 2: "kv"}}),
    Case("sdpa-bool-mask", "sdpa",
         [randn(2, 2, 5, 8), randn(2, 2, 5, 8), randn(2, 2, 5, 8), torch.rand(2, 1, 5, 5, generator=_GEN) > 0.3],
         {}, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
         symbolic={**{i: {0: "batch", 2: "seq"} for i in range(3)}, 3: {0: "batch", 2: "seq", 3: "seq"}}),
    Case("sdpa-additive-mask-and-scale", "sdpa",
         [randn(2, 2, 5, 8), randn(2, 2, 5, 8), randn(2, 2, 5, 8), randn(2, 1, 1, 5)],
         {"scale": 0.2}, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.2)),
    Case("sdpa-causal", "sdpa", [randn(1, 2, 6, 8), randn(1, 2, 6, 8), randn(1, 2, 6, 8), None],
         {"is_causal": True}, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
    Case("sdpa-gqa", "sdpa", [randn(1, 4, 5, 8), randn(1, 2, 5, 8), randn(1, 2, 5, 8), None],
         {"enable_gqa": True}, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)),
    # ---- decoders ----------------------------------------------------------------------------
    Case("kv_append", "kv_append", [randn(2, 2, 5, 8), randn(2, 2, 3, 8)], {},
         lambda past, new: torch.cat([past, new], dim=2),
         symbolic={0: {0: "batch", 2: "past"}, 1: {0: "batch", 2: "seq"}}),
    Case("kv_append-empty-past", "kv_append", [randn(1, 2, 0, 8), randn(1, 2, 4, 8)], {},
         lambda past, new: torch.cat([past, new], dim=2)),
    Case("kv_append-bf16-cache-f32-positions", "kv_append", [randn(1, 2, 3, 8, dtype=torch.bfloat16), randn(1, 2, 1, 8)],
         {}, lambda past, new: torch.cat([past, new.bfloat16()], dim=2)),
    Case("sdpa-gqa-f32-query-bf16-cache", "sdpa",
         [randn(1, 4, 1, 8), randn(1, 2, 5, 8, dtype=torch.bfloat16), randn(1, 2, 5, 8, dtype=torch.bfloat16), None],
         {"enable_gqa": True}, lambda q, k, v, m: F.scaled_dot_product_attention(q, k.float(), v.float(), enable_gqa=True)),
    Case("rope_kv_append-merged-bf16-cache", "rope_kv_append",
         [randn(1, 1, 48), randn(1, 1, 1, 8), randn(1, 1, 1, 8), randn(1, 1, 5, 8, dtype=torch.bfloat16),
          randn(1, 1, 5, 8, dtype=torch.bfloat16)], {},
         lambda qkv, c, s, pk, pv: _rope_kv_append(qkv[..., :32], qkv[..., 32:40], qkv[..., 40:], c, s, pk, pv)),
    Case("kv_write-bf16-cache-f32-positions", "kv_write",
         [randn(1, 2, 6, 8, dtype=torch.bfloat16), randn(1, 2, 1, 8), torch.tensor(2)], {},
         lambda cache, new, p: torch.cat([cache[:, :, :2], new.bfloat16(), cache[:, :, 3:]], dim=2)),
    Case("rope", "rope", [randn(2, 3, 5, 8), randn(2, 1, 5, 8), randn(2, 1, 5, 8)], {},
         lambda x, c, s: x * c + torch.cat([-x[..., 4:], x[..., :4]], dim=-1) * s,
         symbolic={0: {0: "batch", 2: "seq"}, 1: {0: "batch", 2: "seq"}, 2: {0: "batch", 2: "seq"}}),
    Case("rope-bf16-shared-table", "rope", [randn(2, 3, 5, 8, dtype=torch.bfloat16), randn(1, 1, 5, 8), randn(1, 1, 5, 8)], {},
         lambda x, c, s: (x.float() * c + torch.cat([-x.float()[..., 4:], x.float()[..., :4]], dim=-1) * s).bfloat16(),
         **BF16),
    Case("rope_kv_append-merged", "rope_kv_append",
         [randn(2, 3, 48), randn(1, 1, 3, 8), randn(1, 1, 3, 8), randn(2, 1, 5, 8), randn(2, 1, 5, 8)], {},
         lambda qkv, c, s, pk, pv: _rope_kv_append(qkv[..., :32], qkv[..., 32:40], qkv[..., 40:], c, s, pk, pv),
         symbolic={0: {0: "batch", 1: "seq"}, 1: {2: "seq"}, 2: {2: "seq"}, 3: {0: "batch", 2: "past"},
                   4: {0: "batch", 2: "past"}}),
    Case("rope_kv_append-three-projections-bf16", "rope_kv_append",
         [randn(2, 3, 32, dtype=torch.bfloat16), randn(2, 3, 16, dtype=torch.bfloat16), randn(2, 3, 16, dtype=torch.bfloat16),
          randn(2, 1, 3, 8), randn(2, 1, 3, 8), randn(2, 2, 0, 8, dtype=torch.bfloat16), randn(2, 2, 0, 8, dtype=torch.bfloat16)],
         {}, lambda q, k, v, c, s, pk, pv: _rope_kv_append(q, k, v, c, s, pk, pv), **BF16),
    Case("kv_write", "kv_write", [randn(2, 2, 9, 8), randn(2, 2, 3, 8), torch.tensor(4)], {},
         lambda cache, new, p: torch.cat([cache[:, :, :4], new, cache[:, :, 7:]], dim=2),
         symbolic={0: {0: "batch", 2: "capacity"}, 1: {0: "batch", 2: "seq"}}),
    Case("kv_write-last-positions-bf16", "kv_write",
         [randn(1, 2, 6, 8, dtype=torch.bfloat16), randn(1, 2, 1, 8, dtype=torch.bfloat16), torch.tensor(5)], {},
         lambda cache, new, p: torch.cat([cache[:, :, :5], new], dim=2)),
    Case("rope_kv_write-merged", "rope_kv_write",
         [randn(2, 3, 48), randn(1, 1, 3, 8), randn(1, 1, 3, 8), randn(2, 1, 7, 8), randn(2, 1, 7, 8), torch.tensor(2)], {},
         lambda qkv, c, s, ck, cv, p: _rope_kv_write(qkv[..., :32], qkv[..., 32:40], qkv[..., 40:], c, s, ck, cv, 2),
         symbolic={0: {0: "batch", 1: "seq"}, 1: {2: "seq"}, 2: {2: "seq"}, 3: {0: "batch", 2: "capacity"},
                   4: {0: "batch", 2: "capacity"}}),
    Case("rope_kv_write-three-projections-bf16", "rope_kv_write",
         [randn(1, 1, 32, dtype=torch.bfloat16), randn(1, 1, 16, dtype=torch.bfloat16), randn(1, 1, 16, dtype=torch.bfloat16),
          randn(1, 1, 1, 8), randn(1, 1, 1, 8), randn(1, 2, 4, 8, dtype=torch.bfloat16), randn(1, 2, 4, 8, dtype=torch.bfloat16),
          torch.tensor(0)],
         {}, lambda q, k, v, c, s, ck, cv, p: _rope_kv_write(q, k, v, c, s, ck, cv, 0), **BF16),
    Case("sdpa-bf16-with-fp32-additive-mask", "sdpa",
         [randn(2, 2, 5, 8, dtype=torch.bfloat16), randn(2, 2, 5, 8, dtype=torch.bfloat16),
          randn(2, 2, 5, 8, dtype=torch.bfloat16), randn(2, 1, 1, 5)],
         {}, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m.to(torch.bfloat16)), **BF16),
    # ---- normalisation -----------------------------------------------------------
    Case("layer_norm-fp32", "layer_norm", [randn(2, 3, 16), randn(16), randn(16)], {"normalized_shape": [16]},
         lambda x, w, b: _ln(x, w, b), symbolic={0: {0: "batch", 1: "seq"}}),
    Case("layer_norm-no-affine-eps", "layer_norm", [randn(4, 16), None, None], {"normalized_shape": [16], "eps": 1e-3},
         lambda x, w, b: _ln(x, None, None, 1e-3)),
    Case("layer_norm-bf16", "layer_norm",
         [randn(2, 3, 16, dtype=torch.bfloat16) * 4 + 3, randn(16, dtype=torch.bfloat16), randn(16, dtype=torch.bfloat16)],
         {"normalized_shape": [16]}, lambda x, w, b: _ln(x, w, b), symbolic={0: {0: "batch"}}, **BF16),
    Case("add_layer_norm-fp32", "add_layer_norm", [randn(2, 3, 16), randn(2, 3, 16), randn(16), randn(16)],
         {"normalized_shape": [16], "eps": 1e-6}, lambda x, r, w, b: _ln(x + r, w, b, 1e-6),
         symbolic={0: {0: "batch", 1: "seq"}, 1: {0: "batch", 1: "seq"}}),
    Case("add_layer_norm-return-sum-broadcast-residual", "add_layer_norm", [randn(2, 3, 16), randn(3, 16), None, None],
         {"normalized_shape": [16], "return_sum": True}, lambda x, r, w, b: (_ln(x + r, None, None), x + r),
         symbolic={0: {0: "batch"}}),
    Case("add_layer_norm-bf16", "add_layer_norm",
         [randn(2, 3, 16, dtype=torch.bfloat16), randn(2, 3, 16, dtype=torch.bfloat16), randn(16, dtype=torch.bfloat16), None],
         {"normalized_shape": [16], "return_sum": True},
         lambda x, r, w, b: (_ln(x + r, w, None), x + r), **BF16),
    Case("rms_norm-fp32", "rms_norm", [randn(2, 3, 16), randn(16)], {"normalized_shape": [16], "eps": 1e-6},
         lambda x, w: torch.rms_norm(x, [16], w, 1e-6), symbolic={0: {0: "batch", 1: "seq"}}),
    Case("rms_norm-bf16-default-eps-no-weight", "rms_norm", [randn(2, 16, dtype=torch.bfloat16) * 0.05, None],
         {"normalized_shape": [16]}, lambda x, w: torch.rms_norm(x, [16]), **BF16),
    Case("softmax-fp32", "softmax", [randn(2, 3, 7)], {"dim": -1}, lambda x: torch.softmax(x, -1),
         symbolic={0: {0: "batch", 2: "seq"}}),
    Case("softmax-bf16-middle-axis", "softmax", [randn(2, 5, 3, dtype=torch.bfloat16) * 3], {"dim": 1},
         lambda x: torch.softmax(x, 1), **BF16),
    Case("batch_norm-fp32", "batch_norm", [randn(2, 4, 3, 3), randn(4), randn(4), randn(4), torch.rand(4, generator=_GEN) + 0.5],
         {"eps": 1e-3}, lambda x, w, b, m, v: F.batch_norm(x, m, v, w, b, False, 0.0, 1e-3),
         symbolic={0: {0: "batch", 2: "h", 3: "w"}}),
    Case("batch_norm-bf16-activations-fp32-stats-no-affine", "batch_norm",
         [randn(2, 4, 3, 3, dtype=torch.bfloat16), None, None, randn(4), torch.rand(4, generator=_GEN) + 0.5], {},
         lambda x, w, b, m, v: F.batch_norm(x, m, v, None, None, False, 0.0, 1e-5), **BF16),
    # ---- pooling / layout ----------------------------------------------------------
    Case("max_pool2d-k3-s2-p1", "max_pool2d", [randn(2, 3, 9, 8)],
         {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]},
         lambda x: F.max_pool2d(x, 3, 2, 1), symbolic={0: {0: "batch", 2: "h", 3: "w"}}),
    Case("max_pool2d-dilation", "max_pool2d", [randn(1, 2, 10, 10)],
         {"kernel_size": [2, 3], "stride": [1, 2], "dilation": [2, 1]},
         lambda x: F.max_pool2d(x, (2, 3), (1, 2), 0, (2, 1)), symbolic={0: {2: "h", 3: "w"}}),
    Case("adaptive_avg_pool2d-global", "adaptive_avg_pool2d", [randn(2, 3, 5, 7)], {"output_size": [1, 1]},
         lambda x: F.adaptive_avg_pool2d(x, 1), symbolic={0: {0: "batch", 2: "h", 3: "w"}}),
    Case("adaptive_avg_pool2d-2x3", "adaptive_avg_pool2d", [randn(1, 2, 8, 9)], {"output_size": [2, 3]},
         lambda x: F.adaptive_avg_pool2d(x, (2, 3))),
    Case("flatten-from-1", "flatten", [randn(2, 3, 4, 5)], {"start_dim": 1}, lambda x: x.flatten(1),
         symbolic={0: {0: "batch", 2: "h", 3: "w"}}),
    Case("flatten-0-1", "flatten", [randn(2, 3, 4)], {"start_dim": 0, "end_dim": 1}, lambda x: x.flatten(0, 1),
         symbolic={0: {0: "batch", 1: "seq"}}),
    Case("permute", "permute", [randn(2, 3, 4, 5)], {"perm": [0, 2, 1, 3]}, lambda x: x.permute(0, 2, 1, 3),
         symbolic={0: {0: "batch", 1: "seq"}}),
    Case("reshape-static-with-minus-one", "reshape", [randn(2, 3, 4)], {"shape": [-1, 4]}, lambda x: x.reshape(-1, 4),
         symbolic={0: {0: "batch", 1: "seq"}}),
    Case("reshape-symbolic-shape-strings", "reshape", [randn(2, 3, 16)], {"shape": ["batch*seq", 2, 8]},
         lambda x: x.reshape(6, 2, 8), dims={"batch": 2, "seq": 3}, symbolic={0: {0: "batch", 1: "seq"}}),
    Case("reshape-symbolic-with-minus-one", "reshape", [randn(4, 6, 8)], {"shape": ["batch", "seq", -1, 4]},
         lambda x: x.reshape(4, 6, 2, 4), dims={"batch": 4, "seq": 6}, symbolic={0: {0: "batch", 1: "seq"}}),
    Case("reshape-floor-division-expression", "reshape", [randn(2, 8, 3)], {"shape": ["batch", "floor(seq/2)", -1]},
         lambda x: x.reshape(2, 4, 6), dims={"batch": 2, "seq": 8}, symbolic={0: {0: "batch", 1: "seq"}}),
    Case("to_dtype-float-to-bf16", "to_dtype", [randn(2, 3)], {"dtype": "bfloat16"}, lambda x: x.to(torch.bfloat16),
         symbolic={0: {0: "batch"}}),
    Case("to_dtype-int-to-float", "to_dtype", [randint(10, 2, 3)], {"dtype": "float32"}, lambda x: x.float()),
    Case("to_memory_format-channels-last", "to_memory_format", [randn(2, 3, 4, 5)], {"memory_format": "channels_last"},
         lambda x: x.contiguous(memory_format=torch.channels_last), symbolic={0: {0: "batch"}}),
    Case("to_memory_format-back-to-contiguous", "to_memory_format",
         [randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)], {"memory_format": "contiguous"},
         lambda x: x.contiguous()),
    Case("attention_mask-bool-to-additive-bf16", "attention_mask", [randint(2, 2, 1, 3, 3).bool()], {"dtype": "bfloat16"},
         lambda m: torch.where(m, 0.0, float("-inf")).to(torch.bfloat16), symbolic={0: {0: "batch"}}),
    Case("attention_mask-float32-to-bf16", "attention_mask", [randn(2, 1, 3, 3)], {"dtype": "bfloat16"},
         lambda m: m.to(torch.bfloat16)),
    Case("identity", "identity", [randn(2, 3)], {}, lambda x: x, symbolic={0: {0: "batch"}}),
    Case("embedding", "embedding", [randn(10, 4), randint(10, 2, 3)], {}, lambda w, i: F.embedding(i, w),
         symbolic={1: {0: "batch", 1: "seq"}}),
    # ---- element-wise -----------------------------------------------------------------
    Case("relu", "relu", [randn(2, 5)], {}, torch.relu, symbolic={0: {0: "batch"}}),
    Case("sigmoid", "sigmoid", [randn(2, 5)], {}, torch.sigmoid, symbolic={0: {0: "batch"}}),
    Case("silu", "silu", [randn(2, 5)], {}, F.silu, symbolic={0: {0: "batch"}}),
    Case("silu_mul", "silu_mul", [randn(2, 5), randn(2, 5)], {}, lambda a, b: F.silu(a) * b,
         symbolic={0: {0: "batch"}, 1: {0: "batch"}}),
    Case("silu_mul-halves", "silu_mul", [randn(2, 3, 8)], {}, lambda x: F.silu(x[..., :4]) * x[..., 4:],
         symbolic={0: {0: "batch"}}),
    Case("silu_mul-bf16", "silu_mul", [randn(2, 6, dtype=torch.bfloat16), randn(2, 6, dtype=torch.bfloat16)], {},
         lambda a, b: (F.silu(a.float()) * b.float()).bfloat16(), **BF16),
    Case("tanh", "tanh", [randn(2, 5)], {}, torch.tanh, symbolic={0: {0: "batch"}}),
    Case("gelu-erf", "gelu", [randn(2, 5)], {}, F.gelu, symbolic={0: {0: "batch"}}),
    Case("gelu-tanh", "gelu", [randn(2, 5)], {"approximate": "tanh"}, lambda x: F.gelu(x, approximate="tanh")),
    Case("add-broadcast", "add", [randn(2, 3, 4), randn(3, 1)], {}, torch.add, symbolic={0: {0: "batch"}}),
    Case("add-symbolic-broadcast-both-sides", "add", [randn(2, 3, 1), randn(1, 3, 4)], {}, torch.add,
         symbolic={0: {0: "batch", 1: "seq"}, 1: {1: "seq"}}),
    Case("add-int-scalar-keeps-int64", "add", [randint(50, 2, 3)], {"rhs_scalar": 7}, lambda x: x + 7,
         symbolic={0: {0: "batch"}}),
    Case("add-float-scalar-on-int-tensor-gives-float", "add", [randint(50, 2, 3)], {"rhs_scalar": 0.5},
         lambda x: x + 0.5),
    Case("add-bf16-and-fp32-promotes", "add", [randn(2, 3, dtype=torch.bfloat16), randn(2, 3)], {}, torch.add),
    Case("sub-tensor", "sub", [randn(2, 3), randn(2, 3)], {}, torch.sub, symbolic={0: {0: "batch"}, 1: {0: "batch"}}),
    Case("sub-int-scalar-keeps-int64", "sub", [randint(50, 2, 3)], {"rhs_scalar": 3}, lambda x: x - 3),
    Case("sub-scalar-lhs", "sub", [randn(2, 3)], {"lhs_scalar": 2.0}, lambda x: 2.0 - x, symbolic={0: {0: "batch"}}),
    Case("mul-int-scalar-keeps-int64", "mul", [randint(50, 2, 3)], {"rhs_scalar": 4}, lambda x: x * 4,
         symbolic={0: {0: "batch"}}),
    Case("mul-bool-scalar", "mul", [randn(2, 3)], {"rhs_scalar": True}, lambda x: x * True),
    Case("mul-broadcast", "mul", [randn(4, 1, 3), randn(2, 3)], {}, torch.mul),
    Case("div-float-scalar", "div", [randn(2, 3)], {"rhs_scalar": 8.0}, lambda x: x / 8.0, symbolic={0: {1: "seq"}}),
    Case("div-int-tensor-by-int-scalar-is-true-division", "div", [randint(50, 2, 3)], {"rhs_scalar": 4},
         lambda x: x / 4),
    Case("div-scalar-lhs", "div", [randn(2, 3).abs() + 1], {"lhs_scalar": 3}, lambda x: 3 / x),
    # ---- int8 -------------------------------------------------------------------------------------
    # torch's own quantize (quint8/qint8 tensors) is the oracle for the codes.
    Case("quantize-per-tensor-uint8", "quantize", [randn(3, 7) * 4], {"scale": 0.037, "zero_point": 128, "dtype": "uint8"},
         lambda x: torch.quantize_per_tensor(x, 0.037, 128, torch.quint8).int_repr(), symbolic={0: {0: "batch"}}),
    Case("quantize-per-tensor-int8-saturates", "quantize", [randn(2, 5) * 100], {"scale": 0.1, "zero_point": 0, "dtype": "int8"},
         lambda x: torch.quantize_per_tensor(x, 0.1, 0, torch.qint8).int_repr()),
    Case("quantize-bf16-input", "quantize", [randn(4, 6, dtype=torch.bfloat16)], {"scale": 0.02, "zero_point": 100},
         lambda x: torch.quantize_per_tensor(x.float(), 0.02, 100, torch.quint8).int_repr()),
    Case("quantize-smoothquant-multiplier", "quantize", [randn(2, 3, 4), torch.tensor([10.0, 20.0, 5.0, 1.0])],
         {"scale": 0.05, "zero_point": 10},
         lambda x, m: torch.clamp(torch.round(x * m) + 10, 0, 255).to(torch.uint8)),
    # fake_quantize promises ONNX's Q -> DQ arithmetic: x / scale rounded half to even. A power-of-two scale
    # makes torch's x * (1 / scale) the same number, so torch is the oracle for random inputs; the ties
    # case states the promise itself.
    Case("fake_quantize-int8", "fake_quantize", [randn(3, 7) * 5], {"scale": 0.0625, "zero_point": -3, "dtype": "int8"},
         lambda x: torch.fake_quantize_per_tensor_affine(x, 0.0625, -3, -128, 127), symbolic={0: {0: "batch"}}),
    Case("fake_quantize-ties-to-even-and-saturation", "fake_quantize",
         [torch.tensor([-0.375, -0.125, 0.125, 0.375, 0.625, 100.0, -100.0])], {"scale": 0.25, "zero_point": 10},
         lambda x: torch.tensor([-0.5, 0.0, 0.0, 0.5, 0.5, 61.25, -2.5])),
    Case("qlinear-float-output-with-gelu", "qlinear",
         [randint(256, 2, 3, 8).to(torch.uint8), randint(255, 5, 8).sub(127).to(torch.int8), randn(5).abs() * 0.01,
          randn(5)], {"x_scale": 0.05, "x_zero_point": 120, "post_ops": [{"kind": "gelu"}]},
         lambda x, w, s, b: F.gelu(F.linear((x.float() - 120) * 0.05, w.float() * s[:, None], b)),
         symbolic={0: {0: "batch"}}, atol=1e-4, rtol=1e-4),
    Case("qlinear-bf16-output-residual-add", "qlinear",
         [randint(256, 4, 8).to(torch.uint8), randint(255, 5, 8).sub(127).to(torch.int8), randn(5).abs() * 0.01,
          None, randn(4, 5)], {"x_scale": 0.05, "x_zero_point": 3, "output_dtype": "bfloat16",
                               "post_ops": [{"kind": "add", "operand": 4}]},
         lambda x, w, s, b, r: (F.linear((x.float() - 3) * 0.05, w.float() * s[:, None]) + r).bfloat16(), **BF16),
    Case("qlinear-requantized-uint8-output", "qlinear",
         [randint(256, 4, 8).to(torch.uint8), randint(255, 5, 8).sub(127).to(torch.int8), randn(5).abs() * 0.01,
          randn(5)], {"x_scale": 0.05, "x_zero_point": 128, "output_dtype": "uint8", "output_scale": 0.03,
                      "output_zero_point": 7, "post_ops": [{"kind": "relu"}]},
         lambda x, w, s, b: torch.quantize_per_tensor(
             F.relu(F.linear((x.float() - 128) * 0.05, w.float() * s[:, None], b)), 0.03, 7, torch.quint8).int_repr()),
    Case("qconv2d-groups-stride-relu", "qconv2d",
         [randint(256, 2, 4, 7, 6).to(torch.uint8), randint(255, 6, 2, 3, 3).sub(127).to(torch.int8),
          randn(6).abs() * 0.01, randn(6)],
         {"x_scale": 0.02, "x_zero_point": 128, "stride": [2, 1], "padding": [1, 0], "groups": 2,
          "post_ops": [{"kind": "relu"}]},
         lambda x, w, s, b: F.relu(F.conv2d((x.float() - 128) * 0.02, w.float() * s[:, None, None, None], b,
                                            stride=(2, 1), padding=(1, 0), groups=2)),
         symbolic={0: {0: "batch", 2: "h", 3: "w"}}, atol=1e-4, rtol=1e-4),
    Case("qconv2d-uint8-residual-add-relu", "qconv2d",
         [randint(256, 2, 4, 5, 6).to(torch.uint8), randint(255, 6, 4, 3, 3).sub(127).to(torch.int8),
          randn(6).abs() * 0.01, randn(6), randint(256, 2, 6, 5, 6).to(torch.uint8)],
         {"x_scale": 0.02, "x_zero_point": 128, "padding": [1, 1], "accum_scale": 0.03, "accum_zero_point": 100,
          "post_ops": [{"kind": "add", "operand": 4}, {"kind": "relu"}]},
         lambda x, w, s, b, r: F.relu(F.conv2d((x.float() - 128) * 0.02, w.float() * s[:, None, None, None], b,
                                               padding=1) + (r.float() - 100) * 0.03),
         symbolic={0: {0: "batch", 2: "h", 3: "w"}, 4: {0: "batch", 2: "h", 3: "w"}}, atol=1e-4, rtol=1e-4),
    # ---- weight-only quantized linear: W = (q - zero) * scale per group of input features --------------
    Case("woq_linear-int8-per-channel-bias", "woq_linear",
         [randn(2, 3, 8), randint(255, 5, 8).sub(127).to(torch.int8), randn(5, 1).abs() * 0.01, None, randn(5)],
         {"bits": 8, "group_size": 8}, lambda x, q, s, z, b: F.linear(x, q.float() * s, b),
         symbolic={0: {0: "batch", 1: "seq"}}),
    Case("woq_linear-int4-symmetric-groups-gelu", "woq_linear",
         [randn(3, 8), randint(256, 4, 4).to(torch.uint8), randn(4, 2).abs() * 0.1, None, None],
         {"bits": 4, "group_size": 4, "post_ops": [{"kind": "gelu"}]},
         lambda x, q, s, z, b: F.gelu(F.linear(x, (torch.stack([q & 15, q >> 4], -1).reshape(4, 8).float() - 8)
                                               * s.repeat_interleave(4, 1))),
         symbolic={0: {0: "batch"}}),
    Case("woq_linear-int4-asymmetric-residual-add", "woq_linear",
         [randn(2, 8), randint(256, 3, 4).to(torch.uint8), randn(3, 2).abs() * 0.1, randint(16, 3, 2).to(torch.uint8),
          randn(3), randn(2, 3)],
         {"bits": 4, "group_size": 4, "post_ops": [{"kind": "add", "operand": 5}]},
         lambda x, q, s, z, b, r: F.linear(x, (torch.stack([q & 15, q >> 4], -1).reshape(3, 8).float()
                                               - z.float().repeat_interleave(4, 1)) * s.repeat_interleave(4, 1), b) + r,
         symbolic={0: {0: "batch"}, 5: {0: "batch"}}),
    Case("woq_linear-bf16-input-int4", "woq_linear",
         [randn(2, 4, dtype=torch.bfloat16), randint(256, 6, 2).to(torch.uint8), randn(6, 1).abs() * 0.1, None, None],
         {"bits": 4, "group_size": 4},
         lambda x, q, s, z, b: F.linear(x.float(), (torch.stack([q & 15, q >> 4], -1).reshape(6, 4).float() - 8) * s)
         .bfloat16(), **BF16),
    Case("prologue_woq_linear-rms-norm-residual-add", "prologue_woq_linear",
         [randn(2, 8), randint(256, 3, 4).to(torch.uint8), randn(3, 2).abs() * 0.1, None, randn(3), randn(8).abs(),
          randn(2, 3)],
         {"bits": 4, "group_size": 4, "prologue": "rms_norm", "eps": 1e-6, "post_ops": [{"kind": "add", "operand": 6}]},
         lambda x, q, s, z, b, w, r: F.linear(F.rms_norm(x, (8,), w, 1e-6),
                                              (torch.stack([q & 15, q >> 4], -1).reshape(3, 8).float() - 8)
                                              * s.repeat_interleave(4, 1), b) + r,
         symbolic={0: {0: "batch"}, 6: {0: "batch"}}),
    Case("prologue_woq_linear-silu-mul-int8", "prologue_woq_linear",
         [randn(2, 3, 16), randint(255, 5, 8).sub(127).to(torch.int8), randn(5, 1).abs() * 0.01, None, None, None],
         {"bits": 8, "group_size": 8, "prologue": "silu_mul"},
         lambda x, q, s, z, b, w: F.linear(F.silu(x[..., :8]) * x[..., 8:], q.float() * s),
         symbolic={0: {0: "batch", 1: "seq"}}),
    Case("woq_linear_rope_kv_write-rms-norm-bias", "woq_linear_rope_kv_write",
         [randn(1, 2, 8), randint(256, 48, 4).to(torch.uint8), randn(48, 2).abs() * 0.1, None, randn(48),
          randn(8).abs(), randn(1, 1, 2, 8), randn(1, 1, 2, 8), randn(1, 1, 7, 8), randn(1, 1, 7, 8), torch.tensor(2)],
         {"bits": 4, "group_size": 4, "prologue": "rms_norm", "eps": 1e-6},
         lambda x, q, s, z, b, w, c, sn, ck, cv, p: _rope_kv_write(
             *_merged(F.linear(F.rms_norm(x, (8,), w, 1e-6),
                               (torch.stack([q & 15, q >> 4], -1).reshape(48, 8).float() - 8) * s.repeat_interleave(4, 1),
                               b), 32, 40), c, sn, ck, cv, 2),
         symbolic={0: {0: "batch", 1: "seq"}, 6: {2: "seq"}, 7: {2: "seq"}, 8: {0: "batch", 2: "capacity"},
                   9: {0: "batch", 2: "capacity"}}),
    Case("woq_linear_rope_kv_write-plain-int8", "woq_linear_rope_kv_write",
         [randn(1, 1, 8), randint(255, 48, 8).sub(127).to(torch.int8), randn(48, 1).abs() * 0.01, None, None, None,
          randn(1, 1, 1, 8), randn(1, 1, 1, 8), randn(1, 1, 4, 8), randn(1, 1, 4, 8), torch.tensor(3)],
         {"bits": 8, "group_size": 8},
         lambda x, q, s, z, b, w, c, sn, ck, cv, p: _rope_kv_write(*_merged(F.linear(x, q.float() * s), 32, 40), c, sn,
                                                                    ck, cv, 3)),
    Case("sdpa_woq_linear-gqa-additive-mask-residual-add", "sdpa_woq_linear",
         [randn(1, 4, 1, 8), randn(1, 2, 5, 8), randn(1, 2, 5, 8), randn(1, 1, 1, 5), randint(256, 3, 16).to(torch.uint8),
          randn(3, 2).abs() * 0.1, None, randn(3), randn(1, 1, 3)],
         {"bits": 4, "group_size": 16, "attention": {"enable_gqa": True}, "post_ops": [{"kind": "add", "operand": 8}]},
         lambda q, k, v, m, c, s, z, b, r: F.linear(
             F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True).transpose(1, 2).reshape(1, 1, 32),
             (torch.stack([c & 15, c >> 4], -1).reshape(3, 32).float() - 8) * s.repeat_interleave(16, 1), b) + r,
         symbolic={0: {0: "batch"}, 1: {0: "batch"}, 2: {0: "batch"}, 8: {0: "batch"}}),
    # ---- aten fallback ---------------------------------------------------------------------------
    Case("aten-cumsum", "aten", [randn(2, 5)], {"target": "aten.cumsum.default", "args": [{"$in": 0}, 1]},
         lambda x: torch.cumsum(x, 1)),
    Case("aten-where-three-inputs", "aten", [randn(2, 3) > 0, randn(2, 3), randn(2, 3)],
         {"target": "aten.where.self", "args": [{"$in": 0}, {"$in": 1}, {"$in": 2}]}, torch.where),
    Case("aten-clamp-with-inf-bound", "aten", [randn(3, 4)],
         {"target": "aten.clamp.default", "args": [{"$in": 0}, {"$float": "-inf"}, 0.5]}, lambda x: x.clamp(max=0.5)),
    Case("aten-full-symbolic-size-dtype-layout-device", "aten", [],
         {"target": "aten.full.default", "args": [[{"$sym": "batch*2"}, 3], 1.5],
          "kwargs": {"dtype": {"$dtype": "float32"}, "layout": {"$layout": "strided"}, "device": {"$device": "cpu"}}},
         lambda: torch.full((6, 3), 1.5), dims={"batch": 3}),
    Case("aten-clone-to-channels-last", "aten", [randn(2, 3, 4, 5)],
         {"target": "aten.clone.default", "args": [{"$in": 0}], "kwargs": {"memory_format": {"$memory_format": "channels_last"}}},
         lambda x: x.clone(memory_format=torch.channels_last)),
]


def _run_reference(case: Case):
    op = get_op(case.op)
    return op.reference(case.inputs, op.parse_attrs(case.attrs), case.dims)


def _as_list(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _ids(cases):
    return [c.id for c in cases]


def test_every_registered_op_has_a_case():
    covered = {c.op for c in CASES}
    missing = sorted(set(OPSET) - covered)
    assert not missing, f"ops without a reference test case in {__file__}: {missing}"


def test_case_ids_are_unique():
    assert len(_ids(CASES)) == len(set(_ids(CASES)))


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_reference_matches_eager_torch(case: Case):
    got = _as_list(_run_reference(case))
    want = _as_list(case.eager(*case.inputs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w, atol=case.atol, rtol=case.rtol)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_compiled_kernel_matches_reference(case: Case):
    op = get_op(case.op)
    attrs = op.parse_attrs(case.attrs)
    compiled = _as_list(op.compile(attrs)(case.inputs, case.dims))
    for c, r in zip(compiled, _as_list(_run_reference(case)), strict=True):
        torch.testing.assert_close(c, r, atol=0, rtol=0)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_attrs_survive_a_json_round_trip(case: Case):
    """Attrs are stored as JSON in the artifact: parsing them back gives the same values and types."""
    op = get_op(case.op)
    attrs = op.parse_attrs(case.attrs)
    again = op.Attrs.model_validate_json(attrs.model_dump_json())
    assert again == attrs
    for key, value in attrs.model_dump().items():
        assert type(again.model_dump()[key]) is type(value), key


def _mentions_symbolic_size(case: Case) -> bool:
    return '"$sym"' in json.dumps(case.attrs)


def _concrete_attrs(case: Case) -> dict:
    """The attrs for concrete input shapes: a reshape target's dim names at the case's sizes (a target naming
    dims its input does not have changes the element count, which the shape rule refuses)."""
    if case.op != "reshape":
        return case.attrs
    return {**case.attrs, "shape": [resolve(d, case.dims) if isinstance(d, str) else d for d in case.attrs["shape"]]}


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_infer_matches_real_output_on_concrete_shapes(case: Case):
    """Concrete input shapes; dims named in attrs (reshape targets) are resolved with the case's dims."""
    op = get_op(case.op)
    specs = [None if t is None else TensorSpec.of(t) for t in case.inputs]
    attrs = op.parse_attrs(_concrete_attrs(case))
    if _mentions_symbolic_size(case):  # the aten fallback's rule runs the op on meta tensors: static only
        with pytest.raises(NotImplementedError, match="static"):
            op.infer(specs, attrs)
        return
    inferred = op.infer(specs, attrs)
    real = _as_list(_run_reference(case))
    assert len(inferred) == len(real)
    for spec, tensor in zip(inferred, real):
        resolved = spec.with_(shape=resolve_shape(spec.shape, case.dims))
        assert resolved == TensorSpec.of(tensor), f"inferred {spec.describe()}, real {TensorSpec.of(tensor).describe()}"


SYMBOLIC_CASES = [c for c in CASES if c.symbolic]


def _symbolic_specs(case: Case) -> tuple[list[Optional[TensorSpec]], dict[str, int]]:
    """Input specs with the case's named axes, and the sizes those names have in the real inputs."""
    bound = dict(case.dims)
    specs: list[Optional[TensorSpec]] = []
    for i, t in enumerate(case.inputs):
        if t is None:
            specs.append(None)
            continue
        shape: list = list(t.shape)
        for axis, name in case.symbolic.get(i, {}).items():
            assert bound.setdefault(name, t.shape[axis]) == t.shape[axis], f"case names {name} with two sizes"
            shape[axis] = name
        specs.append(TensorSpec.of(t, shape))
    return specs, bound


@pytest.mark.parametrize("case", [c for c in SYMBOLIC_CASES if c.op != "aten"],
                         ids=_ids(c for c in SYMBOLIC_CASES if c.op != "aten"))
def test_infer_on_symbolic_shapes_resolves_to_real_output(case: Case):
    op = get_op(case.op)
    specs, bound = _symbolic_specs(case)
    inferred = op.infer(specs, op.parse_attrs(case.attrs))
    real = _as_list(_run_reference(case))
    assert any(isinstance(d, str) for spec in inferred for d in spec.shape), "output lost every symbolic dim"
    for spec, tensor in zip(inferred, real, strict=True):
        assert spec.dtype == TensorSpec.of(tensor).dtype
        assert resolve_shape(spec.shape, bound) == list(tensor.shape), spec.shape


def test_the_covered_ops_all_have_a_symbolic_case():
    """Every op except the aten fallback (static shapes only) has its shape rule checked symbolically."""
    missing = sorted(set(OPSET) - {"aten"} - {c.op for c in SYMBOLIC_CASES})
    assert not missing


# ---- specific symbolic shape rules ---------------------------------------------------------------------------------


def _spec(shape, dtype="float32"):
    return TensorSpec(dtype=dtype, shape=shape)


@pytest.mark.parametrize("shape", [(1, 4, 16, 16), (2, 16, 32, 32), (3, 5, 11, 9)])
def test_max_pool2d_reference_on_uint8_channels_last(shape):
    """torch 2.13 refuses some uint8 channels-last max pools; the reference pools them in the
    contiguous layout and hands back channels-last, equal to pooling the values as floats."""
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 256, shape, dtype=torch.uint8, generator=g).contiguous(memory_format=torch.channels_last)
    op = get_op("max_pool2d")
    attrs = op.parse_attrs({"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]})
    got = op.reference([x], attrs, {})
    assert got.dtype == torch.uint8 and got.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(got, F.max_pool2d(x.float(), 3, 2, 1).to(torch.uint8))


def test_conv2d_keeps_batch_name_on_imagenet_shape():
    attrs = get_op("conv2d").parse_attrs({"stride": [2, 2], "padding": [3, 3]})
    out, = get_op("conv2d").infer([_spec(["batch", 3, 224, 224]), _spec([8, 3, 7, 7]), None], attrs)
    assert out.shape == ["batch", 8, 112, 112]
    assert out.dtype == "float32"


@pytest.mark.parametrize("size", [5, 6, 7, 8, 31])
def test_conv2d_symbolic_height_expression_matches_torch(size: int):
    attrs = get_op("conv2d").parse_attrs({"stride": [2, 2], "padding": [1, 1]})
    out, = get_op("conv2d").infer([_spec(["batch", 3, "h", "w"]), _spec([4, 3, 3, 3]), None], attrs)
    assert out.shape[:2] == ["batch", 4]
    assert "h" in out.shape[2] and "w" in out.shape[3]
    real = F.conv2d(torch.zeros(1, 3, size, size + 1), torch.zeros(4, 3, 3, 3), stride=2, padding=1)
    assert resolve(out.shape[2], {"h": size}) == real.shape[2]
    assert resolve(out.shape[3], {"w": size + 1}) == real.shape[3]


def test_linear_on_batch_seq_keeps_names():
    out, = get_op("linear").infer([_spec(["batch", "seq", 64]), _spec([32, 64]), _spec([32])],
                                  get_op("linear").parse_attrs({}))
    assert out.shape == ["batch", "seq", 32]


def test_reshape_minus_one_over_symbolic_input_gives_product_expression():
    out, = get_op("reshape").infer([_spec(["batch", "seq", 64])], get_op("reshape").parse_attrs({"shape": [-1, 64]}))
    assert same(out.shape[0], "batch*seq")
    assert out.shape[1] == 64


def test_flatten_symbolic_gives_product_expression():
    out, = get_op("flatten").infer([_spec(["batch", 4, "h", "w"])], get_op("flatten").parse_attrs({"start_dim": 1}))
    assert out.shape[0] == "batch"
    assert same(out.shape[1], "4*h*w")


def test_matmul_attention_scores_shape():
    out, = get_op("matmul").infer([_spec(["batch", 2, "seq", 8]), _spec(["batch", 2, 8, "seq"])],
                                  get_op("matmul").parse_attrs({}))
    assert out.shape == ["batch", 2, "seq", "seq"]


def test_binary_broadcast_of_incompatible_static_shapes_is_refused():
    with pytest.raises(ValueError, match="do not broadcast"):
        get_op("add").infer([_spec([2, 3]), _spec([4, 3])], get_op("add").parse_attrs({}))


def test_aten_fallback_shape_rule_needs_static_shapes():
    attrs = AtenOp.parse_attrs({"target": "aten.cumsum.default", "args": [{"$in": 0}, 1]})
    assert AtenOp.infer([_spec([2, 5])], attrs) == [_spec([2, 5])]
    with pytest.raises(NotImplementedError, match="static"):
        AtenOp.infer([_spec(["batch", 5])], attrs)


def test_binary_int_scalar_attr_stays_int_after_json():
    attrs = get_op("add").parse_attrs({"rhs_scalar": 2})
    again = get_op("add").Attrs.model_validate_json(attrs.model_dump_json())
    assert isinstance(again.rhs_scalar, int) and not isinstance(again.rhs_scalar, bool)
    x = torch.tensor([1, 2], dtype=torch.int32)
    assert get_op("add").reference([x], again, {}).dtype == torch.int32


# ---- aten fallback: what may and may not be named ---------------------------------------------------------------


@pytest.mark.parametrize("target, reason", [
    ("aten.add_.Tensor", "mutates"),
    ("aten.copy_.default", "mutates"),
    ("aten.rand.default", "random"),
    ("aten.bernoulli.default", "random"),
    ("aten.linear.default", "not a core ATen op"),
    ("aten.no_such_op.default", "does not exist"),
    ("prims.add.default", "not an ATen op name"),
    ("os.system", "not an ATen op name"),
])
def test_refusal_reason_refuses_unsafe_targets(target: str, reason: str):
    why = refusal_reason(target)
    assert why is not None and reason in why


@pytest.mark.parametrize("target", ["aten.cumsum.default", "aten.where.self", "aten.scalar_tensor.default"])
def test_refusal_reason_allows_pure_core_ops(target: str):
    assert refusal_reason(target) is None


@pytest.mark.parametrize("target, reason", [
    ("aten.add_.Tensor", "mutates"),
    ("aten.rand.default", "random"),
    ("aten.new_zeros.default", "not a core ATen op"),
])
def test_aten_compile_refuses_a_target_an_artifact_names(target: str, reason: str):
    attrs = AtenOp.parse_attrs({"target": target, "args": [{"$in": 0}, {"$in": 0}]})
    with pytest.raises(ValueError, match=reason) as info:
        AtenOp.compile(attrs)
    assert target in str(info.value)


@pytest.mark.parametrize("op_name, x, w, attrs", [
    ("conv2d", torch.randn(1, 4, 6, 6), torch.randn(3, 4, 3, 3), {"stride": [1, 1], "padding": [1, 1]}),
    ("linear", torch.randn(2, 5, 4), torch.randn(3, 4), {}),
])
def test_bf16_layer_with_float32_bias_runs_its_reference(op_name, x, w, attrs):
    """infer accepts a float32 bias on a bf16 conv/linear (kernels take either); the reference must run it
    too, not raise torch's dtype error (found by the fuzzer: a re-hashed artifact with the bias cast to F32)."""
    op = get_op(op_name)
    x, w, bias = x.bfloat16(), w.bfloat16(), torch.randn(3)
    parsed = op.parse_attrs(attrs)
    op.infer([_spec(list(x.shape), "bfloat16"), _spec(list(w.shape), "bfloat16"), _spec([3], "float32")], parsed)
    got = op.reference([x, w, bias], parsed, {})
    want = op.reference([x, w, bias.bfloat16()], parsed, {})
    assert got.dtype == torch.bfloat16 and torch.equal(got, want)
