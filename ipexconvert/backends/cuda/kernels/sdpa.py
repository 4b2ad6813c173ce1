"""sdpa on the GPU. Factories in preference order:

triton: a decode step's few query rows (at most MAX_ROWS rows of a key/value head's query heads) in one Triton
kernel (_triton_jit.attention_rows): the keys split among programs, online softmax in float32, the mask read
as it is (bool or additive, broadcast), the fully-masked-row rule and the heads-last output layout in the same
pass; an int8 KV cache (--kv-cache int8) read as its rows' codes and scales. torch's path takes three kernels
and more for the same (attention, its reduction, the fill). Other shapes (a prompt), quantizing and causal
nodes take the torch path below. sdpa_woq_linear runs the same kernel with its splits left uncombined
(rows_launcher's partials) for the output projection to combine.

torch: torch's attention (flash / memory-efficient / cuDNN, torch picks per shape), with the
fully-masked-row rule applied without asking the GPU whether any row is fully masked (a captured graph
cannot read back): the fill always runs, writing the heads-last layout the next reshape wants (one Triton
pass, with the codes when the node quantizes for an int8 layer; torch's where without Triton). The mask's cast
to the activations' dtype and which rows it removes are found once per mask tensor and run (run_scope.py):
every layer of an encoder reads the same mask, so the other layers reuse the first one's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from ....ir.ops._kv_int8 import SCALE_BYTES
from ....ir.ops.sdpa import attention, fully_masked_rows, quantize_output
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from .. import run_scope
from . import _triton, _triton_int8
from ._triton import triton_missing
from .kv_write import scales_aligned

# (the last mask seen, the activations' dtype, the run it was seen in (run_scope.py), then what _prepared
# returns). Holding the mask keeps its identity from being reused by another tensor, so `is` is an exact
# test within a run; one entry, since a plan reads one mask in all its layers.
_last_mask: tuple = (None, None, 0, None)


def _prepared(mask: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(the mask in the activations' dtype, its fully masked rows, a zero of that dtype on the GPU)."""
    global _last_mask
    seen, seen_dtype, seen_run, prepared = _last_mask
    if seen is not mask or seen_dtype != dtype or seen_run != run_scope.current():
        cast = mask if mask.dtype in (torch.bool, dtype) else mask.to(dtype)
        prepared = (cast, fully_masked_rows(mask), torch.zeros((), dtype=dtype, device=mask.device))
        _last_mask = (mask, dtype, run_scope.current(), prepared)
    return prepared


MAX_ROWS = 64  # query rows a program takes (a key/value head's query heads times the rows of the step)
BLOCK_S = 64  # keys a step of a program reads
PROGRAMS = 64  # about this many programs a call: the keys are split among them, then combined by the last
# at most this many splits: a decode step is latency-bound, so a step or two a program and one combining read (32
# rather than 8: TinyLlama's attention at 1920 keys 8.76 -> 7.58 us bf16, 14.2 -> 10.8 us over int8 rows, 544 keys
# within 0.1 us bf16; benchmarks/results/session45-gpu-attention-sweep-h200.log)
MAX_SPLITS = 32
WARPS, STAGES = 4, 3  # Triton's defaults (benchmarks/gpu_attention_sweep.py tries others)
# Launch attention_rows with programmatic dependent launch where woq_rows is (_triton.pdl_enabled): it waits for the
# q/k/v projection before reading anything, and the o projection after it loads its first weights meanwhile.
# Read at load (benchmarks/gpu_decode.py's "+noattentionpdl" turns it off).
ATTENTION_PDL = True
# With it, a program asks for its keys' k and v rows to be brought into L2 before its wait (_triton_jit.l2_prefetch),
# where the rows are contiguous and aligned. Read at load.
# On: TinyLlama int4 decode on an H100 0.914 against 0.922 ms a token (session 59, two machines) and 0.898 against
# 0.912 with chained greedy steps (session 62, benchmarks/results/session62-gpu-decode-chain-h100.md), the same tokens.
# (Session 58 measured it only together with woq_linear's prefetch on an H200: 0.916 against 0.899, the GEMVs'
# prefetch costing 0.04 on its own on the H100; this one alone is not measured on an H200 yet.)
L2_PREFETCH = True


@dataclass(frozen=True)
class SplitPartials:
    """What attention_rows leaves with PARTIALS for the output projection to combine (woq_rows' PROLOGUE 3): each
    split's values, maxima and sums in parts (stats rows each), splits of them (padded to a power of two), the
    query heads a key/value head serves (group), the rows a group's partials keep (real) and the value dim."""
    parts: torch.Tensor
    stats: int
    splits: int
    padded: int
    group: int
    real: int
    dv: int


def rows_launcher(attrs):
    """launch(q, k, v, mask, partials) for attention_rows: the output (heads-last memory), or with partials a
    SplitPartials and no combine; None where the kernel does not take these inputs (then torch's path)."""
    import triton  # (the caller's runs_at has said it is here)

    tickets: dict[int, torch.Tensor] = {}  # per number of head groups; the last program of a group resets its own
    pdl: dict[torch.device, bool] = {}  # programmatic dependent launch (_triton.pdl_enabled), per GPU
    use_pdl, use_prefetch = ATTENTION_PDL, L2_PREFETCH  # (read at load)

    def launch(q, k, v, mask, partials: bool = False):
        if q.dim() != 4 or q.shape[1] % k.shape[1] or (not attrs.enable_gqa and q.shape[1] != k.shape[1]):
            return None
        rows_cache = k.dtype == torch.int8  # an int8 cache's rows: codes and a float32 scale each
        if rows_cache and not (v.dtype == torch.int8 and scales_aligned(k) and scales_aligned(v)):
            return None
        b, heads, rows, d = q.shape
        kv_heads, keys, dv = k.shape[1], k.shape[2], v.shape[-1] - SCALE_BYTES * rows_cache
        group = heads // kv_heads
        real = triton.next_power_of_2(group * rows)  # the rows a split's partials keep
        m = max(16, real)  # the rows a program computes: padded for tl.dot
        if (m > MAX_ROWS or keys == 0 or b * kv_heads == 0 or d < 16 or dv < 16 or d & (d - 1) or dv & (dv - 1)
                or k.shape[-1] != d + SCALE_BYTES * rows_cache
                or q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1):
            return None
        groups = b * kv_heads
        splits = max(1, min(MAX_SPLITS, triton.cdiv(keys, BLOCK_S), round(PROGRAMS / groups)))
        s_split = triton.cdiv(triton.cdiv(keys, splits), BLOCK_S) * BLOCK_S
        splits = triton.cdiv(keys, s_split)
        padded = triton.next_power_of_2(splits)
        if groups not in tickets:
            tickets[groups] = torch.zeros(groups, dtype=torch.int32, device=q.device)
        work = torch.empty(groups * padded * real * (dv + 2) if splits > 1 or partials else 1, dtype=torch.float32,
                           device=q.device)
        out = torch.empty((b, rows, heads, dv), dtype=q.dtype, device=q.device).transpose(1, 2)
        kind, mask_strides = 0, (0, 0, 0, 0)
        if mask is not None:
            kind = 1 if mask.dtype == torch.bool else 2
            mask_strides = mask.expand(b, heads, rows, keys).stride()
        scale = attrs.scale if attrs.scale is not None else d ** -0.5
        if q.device not in pdl:
            pdl[q.device] = use_pdl and _triton.pdl_enabled(q.device)
        # l2_prefetch's ranges: a head's rows of k (and of v) one after the other, 16-byte aligned
        prefetch = (pdl[q.device] and use_prefetch and not rows_cache and k.stride(2) == d and v.stride(2) == dv
                    and all(t.data_ptr() % 16 == 0 and all(st * t.element_size() % 16 == 0 for st in t.stride()[:3])
                            for t in (k, v)))
        _triton.jit().attention_rows[(groups, splits)](
            q, k, v, q if mask is None else mask, out, work, tickets[groups],
            q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2), *mask_strides, out.stride(0), out.stride(1), out.stride(2),
            kv_heads, rows, keys, s_split, splits, scale,
            GROUP=group, M=m, D=d, DV=dv, BLOCK_S=BLOCK_S, MASK=kind, SPLITS=padded,
            HALF=q.dtype in (torch.bfloat16, torch.float16) and (rows_cache or (k.dtype == q.dtype == v.dtype)),
            ROWS=int(rows_cache), R=real, PARTIALS=partials, GDC=pdl[q.device], launch_pdl=pdl[q.device],
            PREFETCH=prefetch,
            num_warps=WARPS, num_stages=STAGES)
        return SplitPartials(work, groups * padded * real, splits, padded, group, real, dv) if partials else out

    return launch


@register_kernel("cuda", "sdpa", runs_at=triton_missing)
def triton_sdpa(ctx: NodeContext) -> Optional[Kernel]:
    attrs = ctx.attrs
    if attrs.quantize is not None or attrs.is_causal:
        return None
    fallback = torch_path(attrs, with_triton=True)
    launch = rows_launcher(attrs)

    def run(inputs: list, dims: dict[str, int]):
        out = launch(*inputs[:4])
        return fallback(inputs, dims) if out is None else out

    return Kernel(run, "triton:sdpa_rows")


@register_kernel("cuda", "sdpa")
def torch_cuda_sdpa(ctx: NodeContext) -> Optional[Kernel]:
    return Kernel(torch_path(ctx.attrs, with_triton=triton_missing(ctx.isa) is None), "torch_cuda:sdpa")


def torch_path(attrs, with_triton: bool):
    """The torch path's run; with_triton (Triton is here): the fill, the heads-last copy and a quantizing node's
    codes in one Triton pass (_triton_int8.run_heads_last) instead of torch's where and quantize."""
    quantize = None if attrs.quantize is None else (attrs.quantize.scale, attrs.quantize.zero_point,
                                                     attrs.quantize.dtype)

    def finish_rows(y: torch.Tensor, removed, inputs: list) -> torch.Tensor:
        multiplier = inputs[4] if len(inputs) > 4 and quantize is not None else None
        return _triton_int8.run_heads_last(y, removed, quantize, None if multiplier is None else multiplier.float())

    def run(inputs: list, dims: dict[str, int]):
        q, k, v, mask = inputs[:4]
        if mask is None:
            y = attention(inputs, attrs)
            if with_triton and quantize is not None and y.dim() == 4:
                return finish_rows(y, None, inputs)
            return quantize_output(y, inputs, attrs)
        cast, removed, zero = _prepared(mask, q.dtype)
        y = attention([q, k, v, cast], attrs)
        if y.dim() != 4:
            return quantize_output(y.masked_fill_(removed, 0), inputs, attrs)
        if with_triton:
            return finish_rows(y, removed, inputs)
        # The fill writes [batch, q_len, heads, head_dim] memory (viewed as y's shape): the layout the
        # heads are merged in next, so that reshape is a view instead of another copy.
        b, h, length, e = y.shape
        out = torch.empty((b, length, h, e), dtype=y.dtype, device=y.device).transpose(1, 2)
        torch.where(removed, zero, y, out=out)
        return quantize_output(out, inputs, attrs)
    return run
