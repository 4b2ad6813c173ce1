"""Native attention for sdpa nodes (docs/native.md): bfloat16 on AMX tile products, or AVX512-BF16
(vdpbf16ps) products on CPUs without AMX; float32 on FMA products, AVX2 or AVX-512 (the build for the
selected level of each).

torch's CPU flash attention, measured at BERT-base and MiniLM shapes, is slower than the native
kernels (benchmarks/results/native-attention.md); they also read q/k/v straight from the packed
QKV projection's slices (strided views) and write their output into a [batch, seq, heads,
head_dim] buffer, so the transpose + reshape after it are free views.

Rows a mask removes entirely come out as 0 (ir/ops/sdpa.py): the kernels store them so (a check
per call in Python cost ~57 us a layer at BERT-base b1). Covered: bfloat16 q/k/v with head_dim a
multiple of 32, or float32 with head_dim a multiple of 16, of rank 4 with one head count, no
causal flag, an additive float32/bfloat16 mask or none.
Everything else (bool masks, other dtypes, a CPU below the kernel's level) runs the op's
reference, i.e. torch's attention. A quantized sdpa (fold_attention_quantize) gets the
int8/uint8 codes straight from the kernel's output rows.
"""
from __future__ import annotations

import functools
import math
from functools import partial
from typing import Optional

import torch

from .. import native_lib
from ..compute_precision import bf16_compute_dtype
from ....ir import dtypes
from ....ir.opdef import get_op
from ....ir.ops._quant import QTORCH
from ....ir.ops._kv_int8 import from_cache
from ....ir.ops.kv_append import NARROWER_CACHES
from ....runtime import kernels
from ....runtime.bound_plan import RecordedStep, buffer
from ....runtime.kernels import Kernel, NodeContext
from . import _native, _runs_at

_MASK_DTYPES = ("float32", "bfloat16")

# q/k/v dtype -> (native kernel, the multiple head_dim must be)
_KERNELS = {"bfloat16": ("attention", 32), "float32": ("attention_f32", 16)}


@kernels.register_kernel("cpu", "sdpa", runs_at=_runs_at.native_kernel("attention", "attention_f32"))
def native_sdpa(ctx: NodeContext):
    """Native attention: bfloat16 on AMX tiles or AVX512-BF16 (head_dim a multiple of 32), float32 with AVX2 or
    AVX-512 FMA (multiple of 16); additive or no mask, not causal; reads q/k/v slices of a packed QKV in place, writes
    [B, S, H, D], optionally as int8/uint8 codes."""
    a = ctx.attrs
    q, k, v, mask = (list(ctx.input_specs) + [None] * 4)[:4]
    if ctx.device != "cpu" or not native_lib.available() or q is None or q.dtype not in _KERNELS:
        return None
    kernel, head_multiple = _KERNELS[q.dtype]
    if native_lib.kernel_level(kernel, ctx.isa) == "none":
        return None
    if a.is_causal or a.enable_gqa or any(s is None or s.dtype != q.dtype or s.rank != 4 for s in (q, k, v)):
        return None
    head_dim = q.shape[-1]
    if (not isinstance(head_dim, int) or head_dim % head_multiple or k.shape[-1] != head_dim
            or v.shape[-1] != head_dim):
        return None
    if mask is not None and (mask.dtype not in _MASK_DTYPES or mask.rank > 4):
        return None
    if any(c is not None for c in ctx.constants[:3]):
        return None
    has_multiplier = len(ctx.input_specs) > 4 and ctx.input_specs[4] is not None
    if has_multiplier and ctx.constants[4] is None:
        return None
    reference = get_op(ctx.op).compile(a)
    scale = a.scale if a.scale is not None else 1.0 / math.sqrt(head_dim)
    lib, isa = native_lib.raw, ctx.isa
    multiplier = ctx.constants[4].float().contiguous() if has_multiplier else None
    out_dtype, q_args = dtypes.to_torch(q.dtype), {}
    if a.quantize is not None:
        out_dtype = QTORCH[a.quantize.dtype]
        q_args = {"q_scale": a.quantize.scale, "q_zero_point": a.quantize.zero_point, "q_multipliers": multiplier}

    def taken(inputs: list) -> Optional[tuple]:
        """(q, k, v, mask as 4-D) where the kernel takes them (as many kv heads as q's, contiguous last dims, a
        mask over the keys), else None."""
        q, k, v, mask = inputs[:4]
        if q.shape[1] != k.shape[1] or q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
            return None
        if mask is not None:
            if mask.dim() < 4:
                mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
            if mask.shape[-1] != k.shape[2] or (k.shape[2] > 1 and mask.stride(-1) != 1):
                return None
        return q, k, v, mask

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        args = taken(inputs)
        if args is None:
            return reference([*inputs[:4], multiplier], dims)
        q, k, v, mask = args
        batch, heads, q_len, _ = q.shape
        out = torch.empty(batch, q_len, heads, head_dim, dtype=out_dtype).permute(0, 2, 1, 3)
        lib.attention(q, k, v, mask, out, scale, isa, torch.get_num_threads(), **q_args)
        return out

    def bind(inputs: list, dims: dict[str, int]):
        args = taken(inputs)
        if args is None:
            return None
        q, k, v, mask = args
        batch, heads, q_len, _ = q.shape
        out = buffer((batch, q_len, heads, head_dim), out_dtype).permute(0, 2, 1, 3)
        return functools.partial(lib.attention, q, k, v, mask, out, scale, isa, torch.get_num_threads(), **q_args), [out]

    return Kernel(run, _native.kernel_name("sdpa", kernel, ctx.isa), frozenset({4}) if has_multiplier else frozenset(),
                  bind=bind)


_DECODE_ROWS = 4  # query rows up to which decode_attention runs; longer prompts run torch's attention


@kernels.register_kernel("cpu", "sdpa", runs_at=_runs_at.native)
def native_decode_sdpa(ctx: NodeContext):
    """A decoder's attention: grouped-query (enable_gqa), or any over a cache narrower than q (one key/value head
    per query head then). Our decode_attention for up to 4 query rows (one row per key/value read, float32 softmax;
    every ISA level); longer prompts (prefill) run attention_f32 with the kv heads shared in float32 where this CPU
    has it (AVX2 and up; head_dim a multiple of 16), else torch's attention; float32/bfloat16 (k and v may be a
    bfloat16 cache or int8 rows beside float q: read as they are by decode_attention, widened once for a prompt),
    additive or no mask, not causal, not quantized."""
    a = ctx.attrs
    q, k, v, mask = (list(ctx.input_specs) + [None] * 4)[:4]
    if ctx.device != "cpu" or not native_lib.available() or a.is_causal or a.quantize is not None:
        return None
    if not a.enable_gqa and (k is None or q is None or k.dtype == q.dtype):
        return None  # (plain attention with one dtype: native_sdpa's, or the reference)
    if q is None or q.dtype not in _native.DTYPES or any(s is None or s.rank != 4 for s in (k, v)) or q.rank != 4:
        return None
    if k.dtype != v.dtype or not (k.dtype == q.dtype or (q.dtype, k.dtype) in NARROWER_CACHES):
        return None  # (k and v: q's dtype, or a bfloat16 cache beside float32 q)
    narrower_cache = k.dtype != q.dtype  # widened once for a prompt's rows; decode_attention reads it as it is
    if (mask is not None and mask.dtype not in _MASK_DTYPES) or len(ctx.input_specs) > 4 or any(c is not None for c in ctx.constants):
        return None
    reference = get_op(ctx.op).compile(a)
    lib, isa = native_lib.raw, ctx.isa
    # Prompts longer than a decode step: attention_f32 where it runs here and the head size is whole vectors;
    # bfloat16 too below avx512_bf16 (a decoder keeps bf16 there), its q/k/v cast to float32 first, as torch's
    # bf16 attention there emulates bf16 (234 against ~66 ms for a 512-token Qwen2-0.5B prompt's layers).
    widen_prompt = q.dtype == "bfloat16" and bf16_compute_dtype(isa) != "bfloat16"
    prefill_f32 = ((q.dtype == "float32" or widen_prompt) and native_lib.kernel_level("attention_f32", isa) != "none"
                   and isinstance(q.shape[-1], int) and q.shape[-1] % 16 == 0)

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        q, k, v, mask = inputs[:4]
        batch, heads, q_len, head_dim = q.shape
        if k.shape[1] == 0 or heads % k.shape[1] or k.shape[2] == 0 or not (a.enable_gqa or heads == k.shape[1]):
            return reference(inputs, dims)
        long = q_len > _DECODE_ROWS
        if long and widen_prompt and prefill_f32:
            q, k, v = q.float(), from_cache(k, torch.float32), from_cache(v, torch.float32)
            mask = None if mask is None else mask.float()
        elif long and narrower_cache and prefill_f32:  # (else the reference widens them itself)
            k, v = from_cache(k, torch.float32), from_cache(v, torch.float32)
        if long and not (prefill_f32 and q.stride(-1) == 1 and k.stride(-1) == 1
                         and v.stride(-1) == 1 and (mask is None or mask.stride(-1) == 1)):
            return reference(inputs, dims)
        if mask is not None and mask.dim() < 4:
            mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
        scale = a.scale if a.scale is not None else 1.0 / math.sqrt(head_dim)
        out = torch.empty(batch, q_len, heads, head_dim, dtype=q.dtype).permute(0, 2, 1, 3)  # heads-last: the merge is a view
        if not long:
            lib.decode_attention(q, k, v, out, mask, scale, isa, torch.get_num_threads())
            return out
        lib.attention(q, k, v, mask, out, scale, isa, torch.get_num_threads())
        if out.dtype != inputs[0].dtype:  # a widened bf16 prompt, rounded once (the heads-last strides stay)
            out = out.to(inputs[0].dtype)
        return out

    def bind_varying(inputs: list, dims: dict[str, int], varying: frozenset[int]):
        """A decode step's attention over a growing cache: k, v and the mask change between calls, q is read
        from this tensor, the output written into one made here."""
        q, k, v, mask = inputs[:4]
        batch, heads, q_len, head_dim = q.shape
        if 0 in varying or q_len > _DECODE_ROWS or k.shape[1] == 0 or heads % k.shape[1] \
                or not (a.enable_gqa or heads == k.shape[1]) or (mask is not None and mask.dim() > 4):
            return None
        lead = (1,) * (4 - mask.dim()) if mask is not None else ()  # a mask of fewer dims broadcasts from the right
        scale = a.scale if a.scale is not None else 1.0 / math.sqrt(head_dim)
        out = torch.empty(batch, q_len, heads, head_dim, dtype=q.dtype).permute(0, 2, 1, 3)
        threads = torch.get_num_threads()

        def bound(inputs: list, dims: dict[str, int]) -> torch.Tensor:
            k, v, mask = inputs[1:4]
            if k.shape[2] == 0:
                return out.copy_(run(inputs, dims))
            if lead:
                mask = mask.reshape(lead + tuple(mask.shape))
            lib.decode_attention(q, k, v, out, mask, scale, isa, threads)
            return out

        def record(inputs: list, results, length_at, buffer_for) -> Optional[RecordedStep]:
            """Attention over the first length_at + q_len positions of the caches' buffers (and of the mask's,
            which the plan refills from the mask each call), read when it runs."""
            keys, values = buffer_for(1, 2), buffer_for(2, 2)
            if keys is None or values is None or keys.shape[2] != values.shape[2]:
                return None
            capacity = keys.shape[2]
            mask = inputs[3]
            if mask is not None:
                mask = buffer_for(3, mask.dim() - 1, capacity, lambda length: length + q_len)
                if mask is None:
                    return None
                mask = mask.reshape(lead + tuple(mask.shape)) if lead else mask
            return RecordedStep(call=partial(lib.decode_attention, q, keys, values, out, mask, scale, isa, threads,
                                             length_at),
                                max_length=capacity - q_len)

        bound.record = record
        return bound

    return Kernel(run, _native.kernel_name("sdpa", "decode_attention", ctx.isa), fresh_output=True,
                  bind_varying=bind_varying)
