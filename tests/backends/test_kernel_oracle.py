"""Every registered kernel factory, CPU and GPU, against its op's reference implementation (the oracle).

Like ggml's test-backend-ops: for each op with registered factories, a few small representative
nodes (dtypes, layouts, constant inputs, post-ops, output quantization) are built as the executor
builds them, each factory is called directly, and the kernel it returns runs next to the op's
reference (`get_op(op).compile(attrs)`, what runs when every factory declines) on the same
inputs, at every ISA level this machine has (from generic up to the selected one: a factory given a
lower level runs that level's kernel build, as on a smaller CPU). A factory that cannot run at a level
(its `runs_at`) or declines a case is skipped with the reason; separate tests make sure each op is
taken by some factory where one must take it, and that every factory that can run here takes at least
one case, so a kernel that silently stops accepting anything, or a new kernel without a case it takes,
fails here. A newly registered op without cases fails `test_every_registered_op_has_cases`.

The GPU (cuda) factories run the same cases with their inputs and constants on the GPU, against the
reference on the CPU; without a GPU (CI) they skip with the reason.
"""
from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from typing import Callable, Optional

import pytest
import torch

import ipexconvert.backends.cuda.kernels  # noqa: F401  (registers the GPU factories; needs no GPU)
import ipexconvert.runtime.executor  # noqa: F401  (registers every kernel factory)
from ipexconvert.backends.cuda import unavailable_reason as gpu_unavailable_reason
from ipexconvert.backends.cpu import native_lib as native
from ipexconvert.backends.cpu import onednn_direct as dnnl
from ipexconvert.backends import get_backend
from ipexconvert.ir import dtypes
from ipexconvert.ir.opdef import get_op
from ipexconvert.ir.ops._kv_int8 import dequantize_rows, quantize_rows
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.backends.cpu.isa import ISA_LEVELS, selected_isa
from ipexconvert.backends.cpu.kernels._torch_onednn import enabled as onednn_kernels_enabled
from ipexconvert.runtime.kernels import KERNELS, Kernel, NodeContext, why_not_here

ISA = selected_isa()
LEVELS = ISA_LEVELS[:ISA_LEVELS.index(ISA) + 1]  # every level this machine runs (the supported ones are a prefix)


# ---- inputs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class In:
    """One node input: how to make it, and whether the node holds it as a constant."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    # normal: randn * scale | codes: uniform uint8/int8 | weight: int8 in -127..127 | nibbles: 0..15
    # positive: (0.5..1.5) * scale | halfway: multiples of scale / 2 (half of them exactly between two codes)
    # padding_mask: additive, 0 or -inf (the last batch row masks its second half of keys)
    # keep_mask: bool, True keeps a key (~70 %; the first query row of batch 0 keeps none)
    fill: str = "normal"
    scale: float = 1.0
    # contiguous | channels_last | channels_last_strided (a ::2 spatial subsample of a channels-last
    # tensor of twice the size, as merge_shortcut_conv's shortcut reads it) | last_dim_half (the second
    # half of a tensor with twice the last dim, as merge_linears' slices of a gate/up GEMM read it)
    layout: str = "contiguous"
    const: bool = False


def const(shape, dtype="float32", fill="normal", scale=1.0) -> In:
    return In(tuple(shape), dtype, fill, scale, const=True)


def make_tensor(spec: In, g: torch.Generator) -> torch.Tensor:
    shape = spec.shape
    if spec.layout == "channels_last_strided":
        shape = (*shape[:2], *(2 * s for s in shape[2:]))
    elif spec.layout == "last_dim_half":
        shape = (*shape[:-1], 2 * shape[-1])
    dtype = dtypes.to_torch(spec.dtype)
    if spec.fill == "normal":
        t = (torch.randn(shape, generator=g) * spec.scale).to(dtype)
    elif spec.fill == "codes":
        info = torch.iinfo(dtype)
        t = torch.randint(info.min, info.max + 1, shape, generator=g, dtype=dtype)
    elif spec.fill == "weight":
        t = torch.randint(-127, 128, shape, generator=g, dtype=torch.int8)
    elif spec.fill == "ones":  # (the unit scales of the GPU's bf16 layers: backends/cuda/float_projections.py)
        t = torch.ones(shape, dtype=dtype)
    elif spec.fill == "positive":
        t = ((torch.rand(shape, generator=g) + 0.5) * spec.scale).to(dtype)
    elif spec.fill == "halfway":
        t = (torch.randint(-400, 401, shape, generator=g) * (spec.scale / 2)).to(dtype)
    elif spec.fill == "nibbles":  # 4-bit zero points
        t = torch.randint(0, 16, shape, generator=g, dtype=dtype)
    elif spec.fill == "ids":  # ids into a table whose row count is the case's first input's first dim
        t = torch.randint(0, 30, shape, generator=g, dtype=dtype)
    elif spec.fill == "position":  # a 0-d write position into a cache (kv_write): the case's caches hold >= 5 more
        t = torch.randint(0, 3, (), generator=g, dtype=dtype)
    elif spec.fill == "keep_mask":  # bool, True keeps a key: ~70 % kept, the first query row of batch 0 keeps none
        t = torch.rand(shape, generator=g) > 0.3
        t[0, ..., 0, :] = False
    elif spec.fill == "int8_rows":  # an int8 KV cache (ir/ops/_kv_int8.py): rows of shape[-1] - 4 codes and a scale
        t = quantize_rows(torch.randn((*shape[:-1], shape[-1] - 4), generator=g) * spec.scale)
    elif spec.fill == "padding_mask":
        t = torch.zeros(shape)
        t[-1, ..., shape[-1] // 2 + 1:] = float("-inf")
        t = t.to(dtype)
    else:
        raise AssertionError(f"unknown fill {spec.fill!r}")
    if spec.layout == "channels_last":
        t = t.contiguous(memory_format=torch.channels_last)
    elif spec.layout == "channels_last_strided":
        t = t.contiguous(memory_format=torch.channels_last)[:, :, ::2, ::2]
    elif spec.layout == "last_dim_half":
        t = t[..., shape[-1] // 2:]
    return t


# ---- the cases -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    attrs: dict
    inputs: tuple[Optional[In], ...]
    # exact: the kernel must give the reference's bits (copies, selections, and the quantize formula,
    # which ir/ops/_quant.py states the native kernels follow bit for bit).
    # gemm: sums of many products, whose order differs between libraries: a looser float32 budget.
    # int8_rows: float outputs as elementwise, int8 KV cache rows (ir/ops/_kv_int8.py) within one code of each row's
    # scale (their float source may differ in its last bits: FMA contraction).
    budget: str = "elementwise"


# Float budgets, measured as max |kernel - reference| <= atol + rtol * max |reference|:
# float32 results differ only by the order of fp32 operations (and polynomial erf/exp); bfloat16
# results carry 8 bits of mantissa, and the kernel and the reference may round intermediates differently.
FLOAT_BUDGETS = {  # (dtype, budget) -> (rtol, atol)
    ("float32", "elementwise"): (1e-4, 1e-5),
    ("float32", "gemm"): (5e-4, 1e-5),
    ("bfloat16", "elementwise"): (2e-2, 1e-2),
    ("bfloat16", "gemm"): (2e-2, 1e-2),
}
# Integer codes: the promised quantization is clamp(round_half_even(x * (1 / scale)) + zero_point)
# (torch.round, ir/ops/_quant.py quantize()). A kernel that requantizes its own float result (a GEMM's
# accumulator, a norm before its rounding to the activation dtype) may land on the other side of a
# half-way point than the reference's float result: one code apart at most. The quantize op itself
# quantizes the same float input as the reference and must match exactly (budget "exact").
CODE_TOLERANCE = 1

X_SCALE, X_ZP = 0.03, 131  # an int8 layer's input quantization (uint8 codes around 131)

CASES: dict[str, dict[str, Case]] = {
    "adaptive_avg_pool2d": {
        "f32-global-channels-last": Case({"output_size": [1, 1]}, (In((2, 16, 5, 7), layout="channels_last"),)),
        "bf16-global-nchw": Case({"output_size": [1, 1]}, (In((2, 8, 4, 4), "bfloat16"),)),
    },
    "add_layer_norm": {
        "f32-affine": Case({"normalized_shape": [24]},
                           (In((2, 5, 24)), In((2, 5, 24)), const([24]), const([24]))),
        "bf16-return-sum": Case({"normalized_shape": [40], "eps": 1e-6, "return_sum": True},
                                (In((3, 40), "bfloat16"), In((3, 40), "bfloat16"), const([40], "bfloat16"),
                                 const([40], "bfloat16"))),
        "f32-quantized-smoothquant": Case(
            {"normalized_shape": [32], "return_sum": True, "quantize": {"scale": 0.05, "zero_point": 128}},
            (In((2, 3, 32)), In((2, 3, 32)), const([32]), None, const([32], fill="positive", scale=20.0))),
    },
    "aten": {
        "cat-u8-channels-last-strided": Case(
            {"target": "aten.cat.default", "args": [[{"$in": 0}, {"$in": 1}], 1]},
            (In((2, 3, 4, 5), "uint8", "codes", layout="channels_last"),
             In((2, 6, 4, 5), "uint8", "codes", layout="channels_last_strided")), budget="exact"),
        "cat-bf16-dim-minus-3": Case(
            {"target": "aten.cat.default", "args": [[{"$in": 0}, {"$in": 1}], -3]},
            (In((1, 5, 3, 3), "bfloat16", layout="channels_last"),
             In((1, 2, 3, 3), "bfloat16", layout="channels_last")),
            budget="exact"),
    },
    "conv2d": {
        "f32-bias-residual-add-relu-channels-last": Case(
            {"padding": [1, 1], "post_ops": [{"kind": "add", "operand": 3}, {"kind": "relu"}]},
            (In((2, 8, 6, 7), layout="channels_last"), const([8, 8, 3, 3], scale=0.2), const([8]),
             In((2, 8, 6, 7), layout="channels_last")), budget="gemm"),
        "f32-grouped-gelu-nchw": Case(
            {"stride": [2, 1], "groups": 2, "post_ops": [{"kind": "gelu"}]},
            (In((1, 8, 7, 6)), const([6, 4, 3, 3], scale=0.3), None), budget="gemm"),
        "bf16-bias-relu-stride2": Case(
            {"stride": [2, 2], "padding": [1, 1], "post_ops": [{"kind": "relu"}]},
            (In((2, 8, 9, 9), "bfloat16", layout="channels_last"), const([12, 8, 3, 3], "bfloat16", scale=0.2),
             const([12], "bfloat16")), budget="gemm"),
    },
    "embedding": {
        "f32-ids": Case({}, (const([50, 12]), In((2, 7), "int64", "ids")), budget="exact"),
        "bf16-int32-ids": Case({}, (const([30, 8], "bfloat16"), In((3, 4), "int32", "ids")), budget="exact"),
    },
    "kv_append": {  # the first call of a kernel: no buffer yet (the in-place path: tests/backends/cpu/test_kv_append.py)
        "f32-prefill": Case({}, (In((1, 2, 0, 16)), In((1, 2, 7, 16))), budget="exact"),
        "bf16-decode-step": Case({}, (In((2, 2, 9, 8), "bfloat16"), In((2, 2, 1, 8), "bfloat16")), budget="exact"),
        "bf16-cache-f32-step": Case({}, (In((1, 2, 9, 8), "bfloat16"), In((1, 2, 1, 8))), budget="exact"),  # --kv-cache bf16
        "int8-cache-f32-step": Case({}, (In((1, 2, 9, 12), "int8", "int8_rows"), In((1, 2, 1, 8))), budget="exact"),
        "int8-cache-bf16-prefill": Case({}, (In((1, 2, 0, 20), "int8", "int8_rows"), In((1, 2, 5, 16), "bfloat16")),
                                        budget="exact"),  # --kv-cache int8
    },
    "kv_write": {  # (a static cache: the GPU writes in place)
        "f32-prefill": Case({}, (In((1, 2, 9, 16)), In((1, 2, 5, 16)), In((), "int64", "position")), budget="exact"),
        "bf16-decode-step": Case({}, (In((2, 2, 8, 8), "bfloat16"), In((2, 2, 1, 8), "bfloat16"),
                                      In((), "int64", "position")), budget="exact"),
        "int8-cache-f32-step": Case({}, (In((1, 2, 8, 12), "int8", "int8_rows"), In((1, 2, 1, 8)),
                                         In((), "int64", "position")), budget="exact"),  # --kv-cache int8
    },
    "rope_kv_write": {
        "f32-merged-prefill": Case({}, (In((1, 4, 96)), In((1, 1, 4, 16)), In((1, 1, 4, 16)), In((1, 1, 8, 16)),
                                        In((1, 1, 8, 16)), In((), "int64", "position"))),  # FMA contraction: not bit-exact
        "bf16-three-projections-decode": Case({}, (In((2, 1, 128), "bfloat16"), In((2, 1, 64), "bfloat16"),
                                                   In((2, 1, 64), "bfloat16"), In((1, 1, 1, 64)), In((1, 1, 1, 64)),
                                                   In((2, 1, 9, 64), "bfloat16"), In((2, 1, 9, 64), "bfloat16"),
                                                   In((), "int64", "position"))),
        "f32-merged-bf16-cache-decode": Case({}, (In((1, 1, 96)), In((1, 1, 1, 16)), In((1, 1, 1, 16)),
                                                  In((1, 1, 8, 16), "bfloat16"), In((1, 1, 8, 16), "bfloat16"),
                                                  In((), "int64", "position"))),  # --kv-cache bf16
        "f32-merged-int8-cache-decode": Case({}, (In((1, 1, 96)), In((1, 1, 1, 16)), In((1, 1, 1, 16)),
                                                  In((1, 1, 8, 20), "int8", "int8_rows"),
                                                  In((1, 1, 8, 20), "int8", "int8_rows"),
                                                  In((), "int64", "position")), budget="int8_rows"),  # --kv-cache int8
        "bf16-three-projections-int8-cache-decode": Case({}, (
            In((2, 1, 128), "bfloat16"), In((2, 1, 64), "bfloat16"), In((2, 1, 64), "bfloat16"), In((1, 1, 1, 64)),
            In((1, 1, 1, 64)), In((2, 1, 9, 68), "int8", "int8_rows"), In((2, 1, 9, 68), "int8", "int8_rows"),
            In((), "int64", "position")), budget="int8_rows"),  # k rounded to bf16, then quantized
    },
    "rope": {  # (strided x: tests/native/test_native_rope.py)
        "f32": Case({}, (In((1, 4, 6, 16)), In((1, 1, 6, 16)), In((1, 1, 6, 16)))),  # FMA contraction: not bit-exact
        "bf16-f32-table": Case({}, (In((2, 3, 5, 64), "bfloat16"), In((2, 1, 5, 64)), In((2, 1, 5, 64)))),
    },
    "rope_kv_append": {  # the first call of a kernel: new caches (growing in place: tests/backends/cpu/test_rope_kv_append.py)
        "f32-merged-prefill": Case({}, (In((1, 6, 96)), In((1, 1, 6, 16)), In((1, 1, 6, 16)), In((1, 1, 0, 16)),
                                        In((1, 1, 0, 16)))),  # FMA contraction: not bit-exact
        "bf16-three-projections-decode": Case({}, (In((2, 1, 128), "bfloat16"), In((2, 1, 64), "bfloat16"),
                                                   In((2, 1, 64), "bfloat16"), In((1, 1, 1, 64)), In((1, 1, 1, 64)),
                                                   In((2, 1, 9, 64), "bfloat16"), In((2, 1, 9, 64), "bfloat16"))),
        "f32-merged-bf16-cache-decode": Case({}, (In((1, 1, 128)), In((1, 1, 1, 16)), In((1, 1, 1, 16)),
                                                  In((1, 2, 9, 16), "bfloat16"), In((1, 2, 9, 16), "bfloat16"))),
        "f32-merged-int8-cache-decode": Case({}, (In((1, 1, 128)), In((1, 1, 1, 16)), In((1, 1, 1, 16)),
                                                  In((1, 2, 9, 20), "int8", "int8_rows"),
                                                  In((1, 2, 9, 20), "int8", "int8_rows")), budget="int8_rows"),
        "bf16-three-projections-int8-cache-prefill": Case({}, (
            In((1, 5, 128), "bfloat16"), In((1, 5, 64), "bfloat16"), In((1, 5, 64), "bfloat16"), In((1, 1, 5, 64)),
            In((1, 1, 5, 64)), In((1, 1, 0, 68), "int8", "int8_rows"), In((1, 1, 0, 68), "int8", "int8_rows")),
            budget="int8_rows"),  # --kv-cache int8
    },
    "gelu": {
        "f32-erf": Case({}, (In((4, 33), scale=3.0),)),
        "bf16-tanh": Case({"approximate": "tanh"}, (In((2, 3, 65), "bfloat16", scale=3.0),)),
    },
    "layer_norm": {
        "f32-affine": Case({"normalized_shape": [48]}, (In((4, 48)), const([48]), const([48]))),
        "bf16-runtime-weight-no-bias": Case({"normalized_shape": [32], "eps": 1e-6},
                                            (In((2, 3, 32), "bfloat16"), In((32,), "bfloat16"), None)),
    },
    "linear": {
        "f32-bias-gelu-3d": Case({"post_ops": [{"kind": "gelu"}]},
                                 (In((2, 3, 24)), const([16, 24], scale=0.2), const([16])), budget="gemm"),
        "f32-residual-add-2d": Case({"post_ops": [{"kind": "add", "operand": 3}]},
                                    (In((5, 24)), const([16, 24], scale=0.2), None, In((5, 16))), budget="gemm"),
        "bf16-bias-relu-add": Case(
            {"post_ops": [{"kind": "relu"}, {"kind": "add", "operand": 3}]},
            (In((2, 3, 32), "bfloat16"), const([24, 32], "bfloat16", scale=0.2), const([24], "bfloat16"),
             In((2, 3, 24), "bfloat16")), budget="gemm"),
        "bf16-decode-residual-add-3d": Case({"post_ops": [{"kind": "add", "operand": 3}]},
                                            (In((1, 1, 64), "bfloat16"), const([48, 64], "bfloat16", scale=0.2), None,
                                             In((1, 1, 48), "bfloat16")), budget="gemm"),
        "bf16-decode-rows-bias-gelu": Case(  # few rows: the native bf16_gemv where bf16 widens (k, n off its steps)
            {"post_ops": [{"kind": "gelu"}]},
            (In((3, 1, 40), "bfloat16"), const([21, 40], "bfloat16", scale=0.2), const([21], "bfloat16")),
            budget="gemm"),
        "bf16-tile-rows-bias-gelu": Case(  # AMX tiles (bf16_amx_gemm): two 32-channel panels, a row pair and a tail
            {"post_ops": [{"kind": "gelu"}]},
            (In((2, 23, 96), "bfloat16"), const([64, 96], "bfloat16", scale=0.2), const([64], "bfloat16")),
            budget="gemm"),
        "bf16-prompt-rows-bias": Case(  # bf16_gemm below avx512_bf16: partial row tiles, a channel past 32, k tail
            {}, (In((1, 37, 72), "bfloat16"), const([33, 72], "bfloat16", scale=0.2), const([33], "bfloat16")),
            budget="gemm"),
    },
    "max_pool2d": {
        "f32-channels-last-3x3-stride2-pad1": Case(
            {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]},
            (In((2, 8, 9, 9), layout="channels_last"),), budget="exact"),
        "u8-channels-last-2x2": Case({"kernel_size": [2, 2], "stride": [2, 2]},
                                     (In((1, 4, 8, 8), "uint8", "codes", layout="channels_last"),), budget="exact"),
        "u8-channels-last-3x3-stride2-pad1-70ch": Case(  # ResNet's stem pool; channels past a block, padding
            {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]},
            (In((2, 70, 11, 11), "uint8", "codes", layout="channels_last"),), budget="exact"),
        "i8-channels-last-dilated-pad": Case(  # int8 codes: padding must lose to -128
            {"kernel_size": [3, 2], "stride": [1, 2], "padding": [1, 1], "dilation": [2, 1]},
            (In((1, 24, 7, 6), "int8", "codes", layout="channels_last"),), budget="exact"),
        "bf16-channels-last-dilated": Case(
            {"kernel_size": [3, 3], "stride": [1, 1], "padding": [1, 1], "dilation": [2, 1]},
            (In((1, 16, 7, 6), "bfloat16", layout="channels_last"),), budget="exact"),
    },
    "qconv2d": {
        "u8-to-u8-bias-relu-stride2": Case(
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "stride": [2, 2], "padding": [1, 1],
             "output_dtype": "uint8", "output_scale": 0.1, "output_zero_point": 5, "post_ops": [{"kind": "relu"}]},
            (In((2, 8, 9, 9), "uint8", "codes", layout="channels_last"), const([12, 8, 3, 3], "int8", "weight"),
             const([12], fill="positive", scale=0.006), const([12]))),
        "u8-accum-to-u8-bias-add-relu": Case(  # a ResNet block: the residual kept in uint8
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "padding": [1, 1], "output_dtype": "uint8",
             "output_scale": 0.1, "output_zero_point": 3, "accum_scale": 0.08, "accum_zero_point": 7,
             "post_ops": [{"kind": "add", "operand": 4}, {"kind": "relu"}]},
            (In((1, 8, 6, 6), "uint8", "codes", layout="channels_last"), const([8, 8, 3, 3], "int8", "weight"),
             const([8], fill="positive", scale=0.006), const([8]),
             In((1, 8, 6, 6), "uint8", "codes", layout="channels_last"))),
        "u8-3x3-c64-stride2-pad1-relu": Case(  # the GPU's implicit GEMM: 64 channels, padding, stride, 2 row blocks
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "stride": [2, 2], "padding": [1, 1], "output_dtype": "uint8",
             "output_scale": 0.2, "output_zero_point": 5, "post_ops": [{"kind": "relu"}]},
            (In((2, 64, 15, 15), "uint8", "codes", layout="channels_last"), const([96, 64, 3, 3], "int8", "weight"),
             const([96], fill="positive", scale=0.006), const([96]))),
        "u8-1x1-c96-accum-add-relu-to-bf16": Case(  # k in 32-wide steps; the residual's codes dequantized inside
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "output_dtype": "bfloat16", "accum_scale": 0.08,
             "accum_zero_point": 7, "post_ops": [{"kind": "add", "operand": 4}, {"kind": "relu"}]},
            (In((1, 96, 9, 10), "uint8", "codes", layout="channels_last"), const([40, 96, 1, 1], "int8", "weight"),
             const([40], fill="positive", scale=0.006), const([40]),
             In((1, 40, 9, 10), "uint8", "codes", layout="channels_last")), budget="gemm"),
        "u8-1x1-c32-many-rows-accum-add-relu": Case(  # the GPU's 1x1 as a GEMM with TMA loads (>= 264 tiles of 128 rows)
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "output_dtype": "uint8", "output_scale": 0.1,
             "output_zero_point": 3, "accum_scale": 0.08, "accum_zero_point": 7,
             "post_ops": [{"kind": "add", "operand": 4}, {"kind": "relu"}]},
            (In((1, 32, 184, 184), "uint8", "codes", layout="channels_last"), const([40, 32, 1, 1], "int8", "weight"),
             const([40], fill="positive", scale=0.006), const([40]),
             In((1, 40, 184, 184), "uint8", "codes", layout="channels_last"))),
        "u8-stem-7x7-c3-stride2-pad3-relu": Case(  # an image's 3 channels: the GPU's k steps gather across taps
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "stride": [2, 2], "padding": [3, 3], "output_dtype": "uint8",
             "output_scale": 0.2, "output_zero_point": 0, "post_ops": [{"kind": "relu"}]},
            (In((2, 3, 17, 17), "uint8", "codes", layout="channels_last"), const([40, 3, 7, 7], "int8", "weight"),
             const([40], fill="positive", scale=0.006), const([40]))),
        "u8-stem-7x7-c3-stride2-many-rows": Case(  # the GPU's im2col rows read with TMA (>= 264 tiles of 128 rows)
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "stride": [2, 2], "padding": [3, 3], "output_dtype": "uint8",
             "output_scale": 0.2, "output_zero_point": 0, "post_ops": [{"kind": "relu"}]},
            (In((1, 3, 368, 368), "uint8", "codes", layout="channels_last"), const([40, 3, 7, 7], "int8", "weight"),
             const([40], fill="positive", scale=0.006), const([40]))),
        "u8-to-f32-residual-add-nchw": Case(
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "post_ops": [{"kind": "add", "operand": 4}]},
            (In((2, 8, 5, 5), "uint8", "codes"), const([8, 8, 1, 1], "int8", "weight"),
             const([8], fill="positive", scale=0.006), None, In((2, 8, 5, 5), scale=3.0)), budget="gemm"),
    },
    "qlinear": {
        "u8-to-bf16-bias-gelu": Case(
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "output_dtype": "bfloat16", "post_ops": [{"kind": "gelu"}]},
            (In((2, 3, 40), "uint8", "codes"), const([24, 40], "int8", "weight"),
             const([24], fill="positive", scale=0.006), const([24])), budget="gemm"),
        "u8-to-f32-residual-add-relu": Case(
            {"x_scale": X_SCALE, "x_zero_point": X_ZP,
             "post_ops": [{"kind": "add", "operand": 4}, {"kind": "relu"}]},
            (In((5, 40), "uint8", "codes"), const([24, 40], "int8", "weight"),
             const([24], fill="positive", scale=0.006), None, In((5, 24), scale=3.0)), budget="gemm"),
        "u8-to-u8-gelu-smoothquant-mul": Case(  # fold_requantize's form: the next layer's multiplier fused
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "output_dtype": "uint8", "output_scale": 1.0,
             "output_zero_point": 4, "post_ops": [{"kind": "gelu"}, {"kind": "mul", "operand": 4}]},
            (In((2, 3, 40), "uint8", "codes"), const([24, 40], "int8", "weight"),
             const([24], fill="positive", scale=0.006), const([24]), const([24], fill="positive", scale=10.0))),
        "u8-to-u8-bias-gelu": Case(  # an FFN's first layer: the GELU and the requantize in one epilogue
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "output_dtype": "uint8", "output_scale": 0.02,
             "output_zero_point": 10, "post_ops": [{"kind": "gelu"}]},
            (In((2, 3, 40), "uint8", "codes"), const([40, 40], "int8", "weight"),
             const([40], fill="positive", scale=0.006), const([40]))),
        "u8-to-f32-gelu-tanh": Case(
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "post_ops": [{"kind": "gelu_tanh"}]},
            (In((2, 3, 40), "uint8", "codes"), const([24, 40], "int8", "weight"),
             const([24], fill="positive", scale=0.006), const([24])), budget="gemm"),
        "u8-to-u8-rows-past-a-tile-k-tail": Case(  # GPU int8 GEMM: 150 rows (3 row blocks), 136 columns, K 200
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "output_dtype": "uint8", "output_scale": 0.05,
             "output_zero_point": 120, "post_ops": [{"kind": "relu"}]},
            (In((3, 50, 200), "uint8", "codes"), const([136, 200], "int8", "weight"),
             const([136], fill="positive", scale=0.006), const([136]))),
        "i8-to-bf16-k-blocks": Case(  # int8 codes read as they are, K 384 in three 128-wide steps
            {"x_scale": X_SCALE, "x_zero_point": 0, "output_dtype": "bfloat16"},
            (In((70, 384), "int8", "codes"), const([64, 384], "int8", "weight"),
             const([64], fill="positive", scale=0.006), None), budget="gemm"),
        # GPU int8 GEMM past 512 rows: operand tiles by the tensor memory accelerator on Hopper (rows 16-byte
        # aligned); the row, column and K tails read as zeros there
        "u8-to-u8-many-rows-k-tail": Case(
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "output_dtype": "uint8", "output_scale": 0.05,
             "output_zero_point": 120, "post_ops": [{"kind": "gelu"}]},
            (In((4, 150, 208), "uint8", "codes"), const([136, 208], "int8", "weight"),
             const([136], fill="positive", scale=0.006), const([136]))),
        "i8-to-bf16-many-rows": Case(
            {"x_scale": X_SCALE, "x_zero_point": 0, "output_dtype": "bfloat16"},
            (In((520, 384), "int8", "codes"), const([64, 384], "int8", "weight"),
             const([64], fill="positive", scale=0.006), None), budget="gemm"),
        # AMX tiles (int8_amx_gemm): n and k multiples of 32 and 64; 135 rows = 4 pairs of 16-row tiles and a
        # zero-padded partial pair, k in 3 steps of 64; the next layer's factors fused
        "u8-to-u8-amx-tiles-gelu-smoothquant-mul": Case(
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "output_dtype": "uint8", "output_scale": 1.0,
             "output_zero_point": 4, "post_ops": [{"kind": "gelu"}, {"kind": "mul", "operand": 4}]},
            (In((3, 45, 192), "uint8", "codes"), const([96, 192], "int8", "weight"),
             const([96], fill="positive", scale=0.006), const([96]), const([96], fill="positive", scale=10.0))),
        "u8-to-bf16-amx-tiles-residual-add-relu": Case(  # 17 rows: two A tiles, the second of one row
            {"x_scale": X_SCALE, "x_zero_point": X_ZP, "output_dtype": "bfloat16",
             "post_ops": [{"kind": "add", "operand": 4}, {"kind": "relu"}]},
            (In((17, 640), "uint8", "codes"), const([64, 640], "int8", "weight"),
             const([64], fill="positive", scale=0.006), const([64]), In((17, 64), scale=3.0)), budget="gemm"),
    },
    "quantize": {
        "f32-to-u8-halfway-values": Case({"scale": 0.0625, "zero_point": 128},  # 1/16: x / scale is exact
                                         (In((3, 5, 17), fill="halfway", scale=0.0625),), budget="exact"),
        "f32-nchw-image-to-u8-channels-last-halfway": Case(  # an image's 3 channels, ties rounded to even
            {"scale": 0.0625, "zero_point": 128, "memory_format": "channels_last"},
            (In((2, 3, 7, 9), fill="halfway", scale=0.0625),), budget="exact"),
        "bf16-nchw-to-i8-channels-last": Case(
            {"scale": 0.02, "zero_point": -3, "dtype": "int8", "memory_format": "channels_last"},
            (In((2, 3, 5, 6), "bfloat16"),), budget="exact"),
        "f32-smoothquant-multiplier-to-i8": Case(
            {"scale": 0.05, "dtype": "int8"}, (In((4, 24)), const([24], fill="positive", scale=30.0)), budget="exact"),
    },
    "rms_norm": {
        "f32-weight": Case({"normalized_shape": [40], "eps": 1e-6}, (In((3, 40)), const([40]))),
        "bf16-no-weight-default-eps": Case({"normalized_shape": [64]}, (In((2, 3, 64), "bfloat16"), None)),
    },
    "sdpa": {
        "f32-padding-mask": Case({}, (In((2, 2, 5, 16)), In((2, 2, 7, 16)), In((2, 2, 7, 16)),
                                      In((2, 1, 1, 7), fill="padding_mask")), budget="gemm"),
        "bf16-no-mask-scaled": Case({"scale": 0.1}, (In((1, 2, 6, 32), "bfloat16"), In((1, 2, 6, 32), "bfloat16"),
                                                     In((1, 2, 6, 32), "bfloat16"), None), budget="gemm"),
        "f32-quantized-smoothquant": Case(
            {"quantize": {"scale": 0.02, "zero_point": 128}},
            (In((1, 2, 4, 16)), In((1, 2, 4, 16)), In((1, 2, 4, 16)), None,
             const([32], fill="positive", scale=50.0))),
        "f32-gqa-decode-padding-mask": Case(  # a decoder step: one query row, 2 query heads per kv head
            {"enable_gqa": True}, (In((2, 4, 1, 16)), In((2, 2, 9, 16)), In((2, 2, 9, 16)),
                                   In((2, 1, 1, 9), fill="padding_mask")), budget="gemm"),
        "bf16-gqa-decode-two-rows": Case({"enable_gqa": True, "scale": 0.2}, (
            In((1, 6, 2, 32), "bfloat16"), In((1, 2, 11, 32), "bfloat16"), In((1, 2, 11, 32), "bfloat16"), None),
            budget="gemm"),
        "f32-gqa-prefill": Case({"enable_gqa": True}, (In((1, 4, 6, 16)), In((1, 2, 6, 16)), In((1, 2, 6, 16)), None),
                                budget="gemm"),
        "f32-gqa-decode-bf16-cache": Case(  # --kv-cache bf16: float32 q beside a bf16 cache
            {"enable_gqa": True}, (In((1, 14, 1, 64)), In((1, 2, 40, 64), "bfloat16"), In((1, 2, 40, 64), "bfloat16"),
                                   In((1, 1, 1, 40), fill="padding_mask")), budget="gemm"),
        "f32-gqa-decode-int8-cache": Case(  # --kv-cache int8: float32 q beside int8 rows (codes and a scale)
            {"enable_gqa": True}, (In((1, 14, 1, 64)), In((1, 2, 40, 68), "int8", "int8_rows"),
                                   In((1, 2, 40, 68), "int8", "int8_rows"), In((1, 1, 1, 40), fill="padding_mask")),
            budget="gemm"),
        "bf16-gqa-decode-two-rows-int8-cache": Case({"enable_gqa": True}, (
            In((1, 6, 2, 32), "bfloat16"), In((1, 2, 11, 36), "int8", "int8_rows"), In((1, 2, 11, 36), "int8", "int8_rows"),
            None), budget="gemm"),
        "f32-gqa-prefill-int8-cache": Case(
            {"enable_gqa": True}, (In((1, 4, 6, 16)), In((1, 2, 6, 20), "int8", "int8_rows"),
                                   In((1, 2, 6, 20), "int8", "int8_rows"), None), budget="gemm"),
        "f32-mha-decode-int8-cache": Case(  # one kv head per query head: decode_attention too
            {}, (In((1, 3, 1, 32)), In((1, 3, 7, 36), "int8", "int8_rows"), In((1, 3, 7, 36), "int8", "int8_rows"),
                 None), budget="gemm"),
        "f32-gqa-prefill-bf16-cache": Case(
            {"enable_gqa": True}, (In((1, 4, 6, 16)), In((1, 2, 6, 16), "bfloat16"), In((1, 2, 6, 16), "bfloat16"),
                                   None), budget="gemm"),
        "bf16-gqa-prefill-padding-mask": Case(  # below avx512_bf16: q/k/v widened for attention_f32
            {"enable_gqa": True}, (In((2, 4, 7, 16), "bfloat16"), In((2, 2, 7, 16), "bfloat16"),
                                   In((2, 2, 7, 16), "bfloat16"), In((2, 1, 1, 7), "bfloat16", fill="padding_mask")),
            budget="gemm"),
        "bf16-gqa-decode-keys-split": Case(  # 8 query heads a kv head, 200 keys: split among GPU programs
            {"enable_gqa": True}, (In((1, 16, 1, 64), "bfloat16"), In((1, 2, 200, 64), "bfloat16"),
                                   In((1, 2, 200, 64), "bfloat16"), In((1, 1, 1, 200), "bfloat16", fill="padding_mask")),
            budget="gemm"),
        "bf16-gqa-decode-keys-split-int8-cache": Case(  # the same over int8 rows (--kv-cache int8): codes and scales
            {"enable_gqa": True}, (In((1, 16, 1, 64), "bfloat16"), In((1, 2, 200, 68), "int8", "int8_rows"),
                                   In((1, 2, 200, 68), "int8", "int8_rows"),
                                   In((1, 1, 1, 200), "bfloat16", fill="padding_mask")), budget="gemm"),
        "f32-decode-bool-mask-fully-masked-row": Case(  # 2 rows a step, one of them keeping no key: 0
            {}, (In((2, 2, 2, 32)), In((2, 2, 150, 32)), In((2, 2, 150, 32)), In((2, 1, 2, 150), "bool", fill="keep_mask")),
            budget="gemm"),
        "f32-bool-mask-fully-masked-row-quantized": Case(  # a removed row's codes: those of 0
            {"quantize": {"scale": 0.02, "zero_point": 128}},
            (In((2, 2, 2, 32)), In((2, 2, 9, 32)), In((2, 2, 9, 32)), In((2, 1, 2, 9), "bool", fill="keep_mask"),
             const([64], fill="positive", scale=50.0))),
        "f32-padding-mask-quantized-smoothquant": Case(  # the GPU kernel's masked path writes codes heads-last
            {"quantize": {"scale": 0.02, "zero_point": 128}},
            (In((2, 2, 5, 16)), In((2, 2, 7, 16)), In((2, 2, 7, 16)), In((2, 1, 1, 7), fill="padding_mask"),
             const([32], fill="positive", scale=50.0))),
    },
    "silu": {
        "f32": Case({}, (In((5, 37), scale=3.0),)),
        "bf16": Case({}, (In((3, 70), "bfloat16", scale=3.0),)),
    },
    "silu_mul": {
        "f32-decode-row": Case({}, (In((1, 1, 40), scale=3.0), In((1, 1, 40)))),
        "f32-gate-up-slices": Case({}, (In((2, 5, 37), scale=3.0, layout="last_dim_half"), In((2, 5, 37), layout="last_dim_half"))),
        "bf16-rows": Case({}, (In((3, 70), "bfloat16", scale=3.0), In((3, 70), "bfloat16"))),
        "f32-halves-of-one-input": Case({}, (In((2, 5, 74), scale=3.0),)),
        "bf16-halves-decode-row": Case({}, (In((1, 1, 96), "bfloat16", scale=3.0),)),
    },
    "softmax": {
        "f32-last-dim": Case({"dim": -1}, (In((3, 4, 19), scale=3.0),)),
        "bf16-dim-1-of-2": Case({"dim": 1}, (In((2, 33), "bfloat16", scale=3.0),)),
    },
    "to_memory_format": {
        "f32-nchw-to-channels-last": Case({"memory_format": "channels_last"}, (In((2, 3, 8, 9)),), budget="exact"),
        "f32-to-bf16-channels-last": Case({"memory_format": "channels_last", "dtype": "bfloat16"},
                                          (In((1, 3, 7, 5)),), budget="exact"),
        "bf16-to-f32-channels-last": Case({"memory_format": "channels_last", "dtype": "float32"},
                                          (In((2, 5, 4, 3), "bfloat16"),), budget="exact"),
    },
    "prologue_woq_linear": {  # x, codes, scales, zero points, bias, norm weight (made at load on the GPU)
        "bf16-int4-g128-rms-norm-residual-add": Case(  # a decode row, k split among programs on the GPU
            {"bits": 4, "group_size": 128, "prologue": "rms_norm", "eps": 1e-6,
             "post_ops": [{"kind": "add", "operand": 6}]},
            (In((1, 1, 1024), "bfloat16", scale=3.0), const([72, 512], "uint8", "codes"),
             const([72, 8], fill="positive", scale=0.02), None, None, const([1024], "bfloat16", "positive"),
             In((1, 1, 72), "bfloat16")), budget="gemm"),
        "f32-int4-asymmetric-g32-rms-norm-no-weight-2-rows": Case(
            {"bits": 4, "group_size": 32, "prologue": "rms_norm"},
            (In((2, 64)), const([40, 32], "uint8", "codes"), const([40, 2], fill="positive", scale=0.05),
             const([40, 2], "uint8", "nibbles"), const([40]), None), budget="gemm"),
        "bf16-int4-g128-silu-mul-decode": Case(  # x = [gate | up] of a merged projection
            {"bits": 4, "group_size": 128, "prologue": "silu_mul"},
            (In((1, 1, 512), "bfloat16", scale=3.0), const([48, 128], "uint8", "codes"),
             const([48, 2], fill="positive", scale=0.02), None, None, None), budget="gemm"),
        "f32-int8-g128-silu-mul-3-rows-gelu": Case(
            {"bits": 8, "group_size": 128, "prologue": "silu_mul", "post_ops": [{"kind": "gelu"}]},
            (In((3, 2048), scale=3.0), const([40, 1024], "int8", "weight"), const([40, 8], fill="positive", scale=0.01),
             None, None, None), budget="gemm"),
        "bf16-int4-g128-rms-norm-int8-activations-residual-add": Case(  # a decode row on the GPU's dp4a kernel
            {"bits": 4, "group_size": 128, "prologue": "rms_norm", "eps": 1e-6, "activations": "int8",
             "post_ops": [{"kind": "add", "operand": 6}]},
            (In((1, 1, 1024), "bfloat16", scale=3.0), const([72, 512], "uint8", "codes"),
             const([72, 8], fill="positive", scale=0.02), None, None, const([1024], "bfloat16", "positive"),
             In((1, 1, 72), "bfloat16")), budget="gemm"),
        "f32-int4-asymmetric-g64-silu-mul-int8-activations-2-rows": Case(
            {"bits": 4, "group_size": 64, "prologue": "silu_mul", "activations": "int8"},
            (In((2, 512), scale=3.0), const([40, 128], "uint8", "codes"), const([40, 4], fill="positive", scale=0.02),
             const([40, 4], "uint8", "nibbles"), None, None), budget="gemm"),
        "f32-int8-g128-rms-norm-int8-activations": Case(
            {"bits": 8, "group_size": 128, "prologue": "rms_norm", "activations": "int8"},
            (In((1, 512)), const([24, 512], "int8", "weight"), const([24, 4], fill="positive", scale=0.01), None,
             const([24]), const([512], fill="positive")), budget="gemm"),
        "bf16-weights-rms-norm-decode": Case(  # bits 16 (bf16 weights), a decode row
            {"bits": 16, "group_size": 1024, "prologue": "rms_norm", "eps": 1e-6},
            (In((1, 1, 1024), "bfloat16", scale=3.0), const([72, 1024], "bfloat16", scale=0.05),
             const([72, 1], fill="positive"), None, None, const([1024], "bfloat16", "positive")), budget="gemm"),
        "bf16-weights-silu-mul-decode-residual-add": Case(
            {"bits": 16, "group_size": 256, "prologue": "silu_mul", "post_ops": [{"kind": "add", "operand": 6}]},
            (In((1, 1, 512), "bfloat16", scale=3.0), const([48, 256], "bfloat16", scale=0.05),
             const([48, 1], fill="positive"), None, None, None, In((1, 1, 48), "bfloat16")), budget="gemm"),
        "bf16-weights-unit-scales-rms-norm-prompt-rows": Case(  # bits 16 as made at load, 5 rows: cuBLAS
            {"bits": 16, "group_size": 256, "prologue": "rms_norm", "eps": 1e-6},
            (In((5, 256), "bfloat16", scale=3.0), const([40, 256], "bfloat16", scale=0.05), const([40, 1], fill="ones"),
             None, const([40]), const([256], "bfloat16", "positive")), budget="gemm"),
        "bf16-weights-unit-scales-silu-mul-prompt-rows": Case(
            {"bits": 16, "group_size": 128, "prologue": "silu_mul"},
            (In((7, 256), "bfloat16", scale=3.0), const([40, 128], "bfloat16", scale=0.05), const([40, 1], fill="ones"),
             None, None, None), budget="gemm"),
        "f32-int4-rms-norm-prompt-rows": Case(  # 6 rows: the reference path on the GPU
            {"bits": 4, "group_size": 64, "prologue": "rms_norm", "eps": 1e-5},
            (In((6, 128)), const([24, 64], "uint8", "codes"), const([24, 2], fill="positive", scale=0.05), None, None,
             const([128], fill="positive")), budget="gemm"),
    },
    "woq_linear_rope_kv_write": {  # a merged q/k/v projection and its rope_kv_write (made at load on the GPU)
        "bf16-int4-g128-rms-norm-bias-decode": Case(  # 4 query heads, 2 key/value heads of 64: 512 columns
            {"bits": 4, "group_size": 128, "prologue": "rms_norm", "eps": 1e-6},
            (In((1, 1, 512), "bfloat16", scale=3.0), const([512, 256], "uint8", "codes"),
             const([512, 4], fill="positive", scale=0.02), None, const([512]), const([512], "bfloat16", "positive"),
             In((1, 1, 1, 64)), In((1, 1, 1, 64)), In((1, 2, 9, 64), "bfloat16"), In((1, 2, 9, 64), "bfloat16"),
             In((), "int64", "position")), budget="gemm"),
        "bf16-weights-rms-norm-bias-decode": Case(  # bits 16 (bf16 weights): 4 query heads, 2 kv heads of 64
            {"bits": 16, "group_size": 512, "prologue": "rms_norm", "eps": 1e-6},
            (In((1, 1, 512), "bfloat16", scale=3.0), const([512, 512], "bfloat16", scale=0.05),
             const([512, 1], fill="positive"), None, const([512]), const([512], "bfloat16", "positive"),
             In((1, 1, 1, 64)), In((1, 1, 1, 64)), In((1, 2, 9, 64), "bfloat16"), In((1, 2, 9, 64), "bfloat16"),
             In((), "int64", "position")), budget="gemm"),
        "bf16-weights-unit-scales-rms-norm-prompt": Case(  # bits 16 as made at load, 6 rows: cuBLAS, then rope
            {"bits": 16, "group_size": 256, "prologue": "rms_norm", "eps": 1e-6},
            (In((1, 6, 256), "bfloat16"), const([512, 256], "bfloat16", scale=0.05), const([512, 1], fill="ones"),
             None, None, const([256], "bfloat16", "positive"), In((1, 1, 6, 64)), In((1, 1, 6, 64)),
             In((1, 2, 12, 64), "bfloat16"), In((1, 2, 12, 64), "bfloat16"), In((), "int64", "position")),
            budget="gemm"),
        "f32-int4-asymmetric-g32-plain-2-rows": Case(
            {"bits": 4, "group_size": 32},
            (In((2, 1, 128)), const([384, 64], "uint8", "codes"), const([384, 4], fill="positive", scale=0.05),
             const([384, 4], "uint8", "nibbles"), None, None, In((1, 1, 1, 64)), In((1, 1, 1, 64)),
             In((2, 2, 9, 64)), In((2, 2, 9, 64)), In((), "int64", "position")), budget="gemm"),
        "f32-int4-g128-rms-norm-prompt": Case(  # 6 rows: the projection, then rope_kv_write's kernel
            {"bits": 4, "group_size": 128, "prologue": "rms_norm", "eps": 1e-6},
            (In((1, 6, 256)), const([512, 128], "uint8", "codes"), const([512, 2], fill="positive", scale=0.02),
             None, None, const([256], fill="positive"), In((1, 1, 6, 64)), In((1, 1, 6, 64)), In((1, 2, 12, 64)),
             In((1, 2, 12, 64)), In((), "int64", "position")), budget="gemm"),
    },
    "sdpa_woq_linear": {  # an attention and the output projection reading its heads merged (made at load on the GPU)
        "bf16-int4-g128-gqa-decode-padding-mask-residual-add": Case(  # 8 query heads of 64, 2 kv heads, 9 key splits
            {"bits": 4, "group_size": 128, "attention": {"enable_gqa": True}, "post_ops": [{"kind": "add", "operand": 8}]},
            (In((1, 8, 1, 64), "bfloat16"), In((1, 2, 544, 64), "bfloat16"), In((1, 2, 544, 64), "bfloat16"),
             In((1, 1, 1, 544), fill="padding_mask"), const([96, 256], "uint8", "codes"),
             const([96, 4], fill="positive", scale=0.02), None, None, In((1, 1, 96), "bfloat16")), budget="gemm"),
        "bf16-weights-gqa-decode-padding-mask": Case(  # bits 16 (bf16 weights): 8 query heads of 64, 2 kv heads
            {"bits": 16, "group_size": 512, "attention": {"enable_gqa": True}},
            (In((1, 8, 1, 64), "bfloat16"), In((1, 2, 544, 64), "bfloat16"), In((1, 2, 544, 64), "bfloat16"),
             In((1, 1, 1, 544), fill="padding_mask"), const([96, 512], "bfloat16", scale=0.05),
             const([96, 1], fill="positive"), None, None), budget="gemm"),
        "f32-int8-gqa-decode-one-split-keep-mask": Case(  # 40 keys: one split; the keep mask removes a row's keys
            {"bits": 8, "group_size": 128, "attention": {"enable_gqa": True, "scale": 0.2}},
            (In((1, 4, 1, 64)), In((1, 2, 40, 64)), In((1, 2, 40, 64)), In((1, 1, 1, 40), "bool", "keep_mask"),
             const([40, 256], "int8", "weight"), const([40, 2], fill="positive", scale=0.01), None, const([40])),
            budget="gemm"),
        "f32-int4-gqa-decode-int8-cache": Case(  # --kv-cache int8: the attention over int8 rows
            {"bits": 4, "group_size": 64, "attention": {"enable_gqa": True}},
            (In((1, 4, 1, 64)), In((1, 2, 300, 68), "int8", "int8_rows"), In((1, 2, 300, 68), "int8", "int8_rows"),
             None, const([32, 128], "uint8", "codes"), const([32, 4], fill="positive", scale=0.02),
             const([32, 4], "uint8", "nibbles"), None), budget="gemm"),
        "f32-int4-gqa-prompt-rows": Case(  # 5 query rows: sdpa's and woq_linear's kernels in turn
            {"bits": 4, "group_size": 128, "attention": {"enable_gqa": True}},
            (In((1, 4, 5, 32)), In((1, 2, 5, 32)), In((1, 2, 5, 32)), None, const([24, 64], "uint8", "codes"),
             const([24, 1], fill="positive", scale=0.05), None, None), budget="gemm"),
    },
    "woq_linear": {  # x, codes, scales, zero points, bias (weight-only int8 / int4)
        "f32-int4-asymmetric-g32-bias-silu": Case(
            {"bits": 4, "group_size": 32, "post_ops": [{"kind": "silu"}]},
            (In((3, 5, 64)), const([40, 32], "uint8", "codes"), const([40, 2], fill="positive", scale=0.05),
             const([40, 2], "uint8", "nibbles"), const([40])), budget="gemm"),
        "f32-int8-per-channel-residual-add": Case(  # 6 rows: the prefill path
            {"bits": 8, "group_size": 64, "post_ops": [{"kind": "add", "operand": 5}]},
            (In((6, 64)), const([24, 64], "int8", "weight"), const([24, 1], fill="positive", scale=0.01), None, None,
             In((6, 24))), budget="gemm"),
        "f32-int4-int8-activations-decode": Case(  # 2 rows: the integer decode path
            {"bits": 4, "group_size": 32, "activations": "int8"},
            (In((2, 64)), const([40, 32], "uint8", "codes"), const([40, 2], fill="positive", scale=0.05),
             const([40, 2], "uint8", "nibbles"), const([40])), budget="gemm"),
        "f32-int4-int8-activations-prefill": Case(  # 7 rows: the float path on the rounded rows
            {"bits": 4, "group_size": 32, "activations": "int8"},
            (In((7, 64)), const([24, 32], "uint8", "codes"), const([24, 2], fill="positive", scale=0.05), None, None),
            budget="gemm"),
        "f32-int8-int8-activations-decode": Case(  # 1 row: woq_gemm_w8a8 (path 4)
            {"bits": 8, "group_size": 64, "activations": "int8"},
            (In((1, 1, 128)), const([40, 128], "int8", "weight"), const([40, 2], fill="positive", scale=0.01), None,
             const([40])), budget="gemm"),
        "f32-int8-int8-activations-prefill-gelu": Case(  # 9 rows: path 4 too, a post-op after it
            {"bits": 8, "group_size": 32, "activations": "int8", "post_ops": [{"kind": "gelu"}]},
            (In((9, 64)), const([24, 64], "int8", "weight"), const([24, 2], fill="positive", scale=0.01), None, None),
            budget="gemm"),
        "bf16-int8-per-channel-k96-gate-product": Case(  # 3 rows; a group of 96 (runs of 32)
            {"bits": 8, "group_size": 96, "post_ops": [{"kind": "mul", "operand": 5}]},
            (In((3, 96), "bfloat16"), const([24, 96], "int8", "weight"), const([24, 1], fill="positive", scale=0.01),
             None, None, In((3, 24), "bfloat16")), budget="gemm"),
        "bf16-int4-symmetric-decode": Case(
            {"bits": 4, "group_size": 32},
            (In((1, 2, 32), "bfloat16"), const([20, 16], "uint8", "codes"), const([20, 1], fill="positive", scale=0.05),
             None, const([20])), budget="gemm"),
        "bf16-int4-g128-1536-inputs-residual-add": Case(  # 1 row, k split among programs on the GPU
            {"bits": 4, "group_size": 128, "post_ops": [{"kind": "add", "operand": 5}]},
            (In((1, 1, 1536), "bfloat16"), const([72, 768], "uint8", "codes"),
             const([72, 12], fill="positive", scale=0.02), None, None, In((1, 1, 72), "bfloat16")), budget="gemm"),
        "bf16-int4-g128-8192-inputs-64-splits": Case(  # 1 row; on the GPU more splits than one partials load takes
            {"bits": 4, "group_size": 128},
            (In((1, 1, 8192), "bfloat16"), const([16, 4096], "uint8", "codes"),
             const([16, 64], fill="positive", scale=0.02), None, None), budget="gemm"),
        "bf16-int4-g128-asymmetric-4-rows-bias": Case(  # 4 rows (the most one GPU kernel call takes), zero points
            {"bits": 4, "group_size": 128},
            (In((4, 256), "bfloat16"), const([72, 128], "uint8", "codes"), const([72, 2], fill="positive", scale=0.02),
             const([72, 2], "uint8", "nibbles"), const([72])), budget="gemm"),
        "bf16-int8-g128-decode-split-silu": Case(  # 1 row, int8 codes, k split among programs on the GPU
            {"bits": 8, "group_size": 128, "post_ops": [{"kind": "silu"}]},
            (In((1, 1, 2048), "bfloat16"), const([40, 2048], "int8", "weight"),
             const([40, 16], fill="positive", scale=0.01), None, None), budget="gemm"),
        "bf16-int4-g128-2048-inputs-int8-activations-residual-add": Case(  # 1 row, split k, dp4a on the GPU
            {"bits": 4, "group_size": 128, "activations": "int8", "post_ops": [{"kind": "add", "operand": 5}]},
            (In((1, 1, 2048), "bfloat16", scale=3.0), const([72, 1024], "uint8", "codes"),
             const([72, 16], fill="positive", scale=0.02), None, None, In((1, 1, 72), "bfloat16")), budget="gemm"),
        "bf16-weights-decode-split-residual-add": Case(  # bits 16 (the GPU's bf16 layers, made at load): 1 row
            {"bits": 16, "group_size": 2048, "post_ops": [{"kind": "add", "operand": 5}]},
            (In((1, 1, 2048), "bfloat16"), const([72, 2048], "bfloat16", scale=0.05),
             const([72, 1], fill="positive", scale=1.0), None, const([72]), In((1, 1, 72), "bfloat16")),
            budget="gemm"),
        "bf16-weights-3-rows-k96-silu": Case(  # bits 16, 3 rows, k of 96 (runs of 32)
            {"bits": 16, "group_size": 96, "post_ops": [{"kind": "silu"}]},
            (In((3, 96), "bfloat16"), const([40, 96], "bfloat16", scale=0.1), const([40, 1], fill="positive"),
             None, None), budget="gemm"),
        "bf16-weights-prompt-rows": Case(  # bits 16, 6 rows: the GEMM in bf16 (the reference path)
            {"bits": 16, "group_size": 128},
            (In((6, 128), "bfloat16"), const([24, 128], "bfloat16", scale=0.1), const([24, 1], fill="positive"),
             None, const([24])), budget="gemm"),
        "bf16-weights-unit-scales-prompt-rows-residual-add": Case(  # bits 16 as made at load, 6 rows: cuBLAS addmm
            {"bits": 16, "group_size": 128, "post_ops": [{"kind": "add", "operand": 5}]},
            (In((6, 128), "bfloat16"), const([24, 128], "bfloat16", scale=0.1), const([24, 1], fill="ones"),
             None, None, In((6, 24), "bfloat16")), budget="gemm"),
        "bf16-weights-unit-scales-prompt-rows-silu": Case(  # a gate's SiLU after cuBLAS (as the linear layer ran)
            {"bits": 16, "group_size": 128, "post_ops": [{"kind": "silu"}]},
            (In((6, 128), "bfloat16"), const([24, 128], "bfloat16", scale=0.1), const([24, 1], fill="ones"),
             None, None), budget="gemm"),
        "bf16-weights-unit-scales-prompt-rows-bias-mul": Case(  # SwiGLU's up projection times the gate
            {"bits": 16, "group_size": 128, "post_ops": [{"kind": "mul", "operand": 5}]},
            (In((6, 128), "bfloat16"), const([24, 128], "bfloat16", scale=0.1), const([24, 1], fill="ones"),
             None, const([24]), In((6, 24), "bfloat16")), budget="gemm"),
        "f32-int8-1024-inputs-int8-activations-silu": Case(  # 2 rows, split k, int8 rounding per row
            {"bits": 8, "group_size": 256, "activations": "int8", "post_ops": [{"kind": "silu"}]},
            (In((2, 1024)), const([40, 1024], "int8", "weight"), const([40, 4], fill="positive", scale=0.01), None,
             const([40])), budget="gemm"),
    },
}

# Cases that show a kernel bug: (op, case, factory id) -> reason; run as strict xfails.
KNOWN_BUGS: dict[tuple[str, str, str], str] = {}


# ---- building and running one node -----------------------------------------------------------------


def factory_id(factory: Callable) -> str:
    return f"{factory.__module__}.{factory.__name__}"


def seed_of(op: str, case: str) -> int:
    return zlib.crc32(f"{op}/{case}".encode())


def make_inputs(op: str, case_name: str) -> list[Optional[torch.Tensor]]:
    """The case's inputs; each call makes new tensors with the same values (and strides)."""
    g = torch.Generator().manual_seed(seed_of(op, case_name))
    return [None if spec is None else make_tensor(spec, g) for spec in CASES[op][case_name].inputs]


def node_context(op: str, case_name: str, level: str = ISA, device: str = "cpu") -> NodeContext:
    """The NodeContext the executor builds for this node at ISA `level` (its constants are tensors of their own,
    placed on the device as its backend places them)."""
    case = CASES[op][case_name]
    opdef = get_op(op)
    attrs = opdef.parse_attrs(case.attrs)
    tensors = make_inputs(op, case_name)
    specs = tuple(None if t is None else TensorSpec.of(t) for t in tensors)
    if device != "cpu":
        get_backend(device).prepare_process()  # e.g. no TF32 for float32 on the GPU, as at load
    place = (lambda t, spec: t) if device == "cpu" else get_backend(device).place_constant
    return NodeContext(op=op, attrs=attrs,
                       constants=tuple(place(t, TensorSpec.of(t)) if spec is not None and spec.const else None
                                       for t, spec in zip(tensors, case.inputs)),
                       input_specs=specs, output_specs=tuple(opdef.infer(specs, attrs)), device=device, isa=level)


def as_list(result) -> list[torch.Tensor]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def assert_matches(got: torch.Tensor, want: torch.Tensor, budget: str, what: str) -> None:
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, the reference's {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {list(got.shape)}, the reference's {list(want.shape)}"
    if budget == "int8_rows":  # KV cache rows quantized from a float result (rope: FMA contraction): one code apart
        if want.dtype != torch.int8:
            return assert_matches(got, want, "elementwise", what)
        g, w = dequantize_rows(got), dequantize_rows(want)
        step = w.abs().amax(-1, keepdim=True) / 127
        worst = ((g - w).abs() / step.clamp_min(1e-30)).max().item() if w.numel() else 0.0
        assert worst <= 1.001, f"{what}: values up to {worst:.3g} codes apart (allowed 1)"
        return
    if not want.is_floating_point():
        worst = (got.int() - want.int()).abs().max().item() if want.numel() else 0
        limit = 0 if budget == "exact" else CODE_TOLERANCE
        assert worst <= limit, f"{what}: codes up to {worst} apart (allowed {limit})"
        return
    if budget == "exact":
        worst = (got.double() - want.double()).abs().max().item()
        assert torch.equal(got, want), f"{what}: not bit-identical (max difference {worst:.3g})"
        return
    rtol, atol = FLOAT_BUDGETS[(dtypes.to_name(want.dtype), budget)]
    err = (got.double() - want.double()).abs().max().item()
    scale = want.double().abs().max().item()
    assert err <= atol + rtol * scale, (f"{what}: max error {err:.3g} against max |reference| {scale:.3g} "
                                        f"(allowed {atol:g} + {rtol:g} * max)")


def run_kernel(fn, kernel: Kernel, op: str, case_name: str, device: str = "cpu") -> tuple[list, list]:
    """Call fn as the executor does (consumed constants passed as None) on fresh inputs on the device:
    (outputs, inputs), both back on the CPU."""
    inputs = [None if i in kernel.consumed_inputs or t is None else t.to(device)
              for i, t in enumerate(make_inputs(op, case_name))]
    with torch.inference_mode():
        outputs = as_list(fn(inputs, {}))
    return [t.cpu() for t in outputs], [None if t is None else t.cpu() for t in inputs]


def check_kernel(kernel: Kernel, op: str, case_name: str, device: str = "cpu") -> None:
    case = CASES[op][case_name]
    reference = get_op(op).compile(get_op(op).parse_attrs(case.attrs))
    with torch.inference_mode():
        want = as_list(reference(make_inputs(op, case_name), {}))
    got, passed = run_kernel(kernel.fn, kernel, op, case_name, device)
    assert len(got) == len(want), f"{kernel.name}: {len(got)} outputs, the reference's {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert_matches(g, w, case.budget, f"{kernel.name} output {i}")
    # Only the in-place variant (Kernel.in_place) may overwrite an input, and a kernel that writes into some by
    # design (Kernel.writes_inputs: a static cache) those; the plain fn leaves the others alone.
    for i, (after, before) in enumerate(zip(passed, make_inputs(op, case_name))):
        if after is not None and i not in kernel.writes_inputs:
            assert torch.equal(after, before), f"{kernel.name} changed its input {i}"
    if kernel.in_place is not None:
        got, _ = run_kernel(kernel.in_place[1], kernel, op, case_name, device)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_matches(g, w, case.budget, f"{kernel.name} (in place on input {kernel.in_place[0]}) output {i}")
    check_bound_forms(kernel, op, case_name, device)


def check_bound_forms(kernel: Kernel, op: str, case_name: str, device: str = "cpu") -> None:
    """Kernel.bind and Kernel.bind_varying (runtime/bound_plan.py): made on one set of inputs, then called after
    their contents changed in place (shapes never change), the results follow the new contents, as the reference
    computes them from the same tensors."""
    case = CASES[op][case_name]
    reference = get_op(op).compile(get_op(op).parse_attrs(case.attrs))
    for form in ("bind", "bind_varying"):
        make = getattr(kernel, form)
        if make is None:
            continue
        original = make_inputs(op, case_name)
        inputs = [None if i in kernel.consumed_inputs or t is None else t.to(device) for i, t in enumerate(original)]
        with torch.inference_mode():
            if form == "bind":
                bound = make(inputs, {})
                if bound is None:
                    continue
                call, outputs = bound
            else:
                fn = make(inputs, {}, frozenset())
                if fn is None:
                    continue
            for t in inputs:
                if t is not None and t.is_floating_point():
                    t.mul_(0.75)  # new contents, same tensors (-inf mask entries stay -inf)
            if form == "bind":
                call()
                got = list(outputs)
            else:
                got = as_list(fn(inputs, {}))
            full = [o if t is None else t for t, o in zip(inputs, original)]  # the constants the kernel holds
            want = as_list(reference([None if t is None else t.cpu() for t in full], {}))
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_matches(g.cpu(), w, case.budget, f"{kernel.name} ({form}, inputs changed after binding) output {i}")


# ---- the tests ---------------------------------------------------------------------------------------


NO_GPU = gpu_unavailable_reason()


def _levels(device: str) -> list[str]:
    """The levels a device's factories are tried at: every CPU level this machine has; the GPU's own."""
    if device == "cpu":
        return LEVELS
    return ["gpu"] if NO_GPU is not None else [get_backend(device).level()]


def _skip_without_device(device: str) -> None:
    if device != "cpu" and NO_GPU is not None:
        pytest.skip(f"GPU kernels need a CUDA GPU: {NO_GPU}")


def _oracle_params():
    params = []
    for (device, op), factories in sorted(KERNELS.items()):
        if op not in CASES:
            continue  # test_every_registered_op_has_cases says so
        for case_name in CASES[op]:
            for factory in factories:
                for level in _levels(device):
                    key = (op, case_name, factory_id(factory))
                    marks = [pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[key])] if key in KNOWN_BUGS else []
                    params.append(pytest.param(device, op, case_name, factory, level, id="/".join((*key, level)),
                                               marks=marks))
    return params


def _cap_note() -> str:
    cap = os.environ.get("IPEXCONVERT_MAX_ISA")
    return f" (IPEXCONVERT_MAX_ISA={cap})" if cap else ""


@pytest.mark.parametrize("device, op, case_name, factory, level", _oracle_params())
def test_kernel_matches_reference(device: str, op: str, case_name: str, factory: Callable, level: str) -> None:
    _skip_without_device(device)
    why_not = why_not_here(factory, level)
    if why_not is not None:
        pytest.skip(f"{factory_id(factory)} cannot run at {level}: {why_not}")
    kernel = factory(node_context(op, case_name, level, device))
    if kernel is None:
        pytest.skip(f"{factory_id(factory)} declines {op}/{case_name} at {level}" + _cap_note())
    check_kernel(kernel, op, case_name, device)


def _factories():
    return [pytest.param(device, op, f, id=factory_id(f)) for (device, op), fs in sorted(KERNELS.items()) for f in fs
            if op in CASES]


@pytest.mark.parametrize("device, op, factory", _factories())
def test_every_factory_that_can_run_here_takes_a_case(device: str, op: str, factory: Callable) -> None:
    """A new kernel needs a case it takes (else the oracle above only ever skips it): at the highest level
    this machine has where the factory can run, some case of its op must be accepted."""
    _skip_without_device(device)
    levels = _levels(device)
    level = next((lv for lv in reversed(levels) if why_not_here(factory, lv) is None), None)
    if level is None:
        pytest.skip(f"{factory_id(factory)} cannot run on this machine: {why_not_here(factory, levels[-1])}" + _cap_note())
    taken = [case for case in CASES[op] if factory(node_context(op, case, level, device)) is not None]
    assert taken, (f"{factory_id(factory)} can run at {level} but declines every {op} case: add a case it takes "
                   f"to CASES in {__file__}")


def test_every_registered_op_has_cases() -> None:
    missing = sorted(f"{d}/{op}" for d, op in KERNELS if op not in CASES)
    assert not missing, (f"kernels registered for {missing} have no oracle cases: add them to CASES "
                         f"in {__file__}")
    stale = sorted(set(CASES) - {op for _, op in KERNELS})
    assert not stale, f"CASES has cases for {stale}, which no kernel is registered for: remove them"


def _level_at_least(level: str) -> bool:
    return ISA_LEVELS.index(ISA) >= ISA_LEVELS.index(level)


def _onednn_ready() -> bool:
    """torch's oneDNN operators may run (IPEXCONVERT_ONEDNN not off)."""
    return onednn_kernels_enabled() and torch.backends.mkldnn.is_available()


# op -> (the lowest ISA level from which some factory must take at least one of its cases, what else
# that needs). Most kernels have builds for every level from avx2 up; the exceptions are by design:
#   sdpa: bfloat16 attention needs avx512_bf16, but the float32 cases run from avx2 (attention_f32);
#   qlinear/qconv2d: oneDNN's int8 only from avx512_vnni (below, u8*s8 products saturate), and the
#     native int8 GEMM only between avx2 and avx512_vnni: together they cover every level >= avx2;
#   conv2d/linear: bf16 needs avx512_bf16, but the float32 cases run from avx2 (oneDNN or MKL);
#   max_pool2d: only the direct oneDNN layer (ipexconvert._dnnl), when that is built.
ACCEPTANCE_FLOOR: dict[str, tuple[str, Callable[[], bool]]] = {
    **{op: ("avx2", native.available) for op in (
        "adaptive_avg_pool2d", "add_layer_norm", "aten", "gelu", "layer_norm", "quantize", "rms_norm", "silu",
        "silu_mul", "softmax", "to_memory_format")},
    "sdpa": ("avx2", native.available),
    "kv_append": ("generic", lambda: True),  # plain torch copies into its own buffer
    "rope": ("avx2", native.available),
    "rope_kv_append": ("generic", lambda: True),  # plain torch writes into its own caches
    "conv2d": ("avx2", _onednn_ready),
    "linear": ("avx2", _onednn_ready),
    "qconv2d": ("avx2", lambda: native.available() and _onednn_ready()),
    "qlinear": ("avx2", lambda: native.available() and _onednn_ready()),
    "max_pool2d": ("avx2", lambda: _onednn_ready() and dnnl.available() and dnnl.enabled()),
    "woq_linear": ("avx2", native.available),
}


@pytest.mark.parametrize("op", sorted(op for d, op in KERNELS if d == "cpu"))
def test_some_factory_takes_each_op(op: str) -> None:
    """Declines are skips above; here at least one case of each op must be taken by a non-reference
    kernel wherever one is guaranteed, so a factory that stops accepting everything fails."""
    assert op in ACCEPTANCE_FLOOR, f"add {op} to ACCEPTANCE_FLOOR (from which ISA level a kernel must take it)"
    floor, ready = ACCEPTANCE_FLOOR[op]
    if not native.available():
        pytest.skip(f"ipexconvert._native is not built ({native.unavailable_reason()})")
    if not _level_at_least(floor) or not ready():
        pytest.skip(f"no {op} kernel is guaranteed at ISA {ISA} with these libraries and settings")
    taken = [(case_name, factory_id(f)) for case_name in CASES[op] for f in KERNELS[("cpu", op)]
             if f(node_context(op, case_name)) is not None]
    assert taken, f"every factory for {op} declined every case at ISA {ISA}"
