"""The kernel-equivalence harness: each native kernel next to its op's reference implementation.

A case builds inputs for (rows, cols, dtype), runs the native kernel at a capped ISA level and
the reference (`ipexconvert.ir.get_op(name).reference`, computing in fp32 like the kernels),
and returns (native outputs, reference outputs).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

import native_ops as native
from ipexconvert.ir import get_op

COLS = (1, 7, 15, 16, 17, 63, 768, 1000)
# Normalised error: max |native - reference| / max |reference|.
THRESHOLDS = {torch.float32: 1e-5, torch.bfloat16: 1e-2}


def reference(op: str, inputs: list, **attrs):
    definition = get_op(op)
    return definition.reference(inputs, definition.parse_attrs(attrs), {})


def normalised_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.double(), want.double()
    scale = want.abs().max().item() or 1.0
    return (got - want).abs().max().item() / scale


@dataclass(frozen=True)
class Case:
    name: str  # test id
    kernel: str  # native kernel name
    run: Callable[[int, int, torch.dtype, str, int], tuple[list[torch.Tensor], list[torch.Tensor]]]


def _params(cols: int):
    return torch.randn(cols), torch.randn(cols)


def layer_norm(rows, cols, dtype, level, threads):
    x = (torch.randn(rows, cols) * 3 + 1).to(dtype)
    w, b = _params(cols)
    got = native.layer_norm(x, w, b, 1e-5, max_isa=level, threads=threads)
    return [got], [reference("layer_norm", [x, w, b], normalized_shape=[cols], eps=1e-5)]


def layer_norm_no_affine(rows, cols, dtype, level, threads):
    x = torch.randn(rows, cols).to(dtype)
    got = native.layer_norm(x, None, None, 1e-12, max_isa=level, threads=threads)
    return [got], [reference("layer_norm", [x, None, None], normalized_shape=[cols], eps=1e-12)]


def add_layer_norm(rows, cols, dtype, level, threads):
    x, r = torch.randn(rows, cols).to(dtype), torch.randn(rows, cols).to(dtype)
    w, b = _params(cols)
    y, total = native.layer_norm(x, w, b, 1e-5, residual=r, return_sum=True, max_isa=level, threads=threads)
    want_y, want_total = reference("add_layer_norm", [x, r, w, b], normalized_shape=[cols], eps=1e-5, return_sum=True)
    return [y, total], [want_y, want_total]


def rms_norm(rows, cols, dtype, level, threads):
    x = torch.randn(rows, cols).to(dtype)
    w, _ = _params(cols)
    got = native.rms_norm(x, w, 1e-6, max_isa=level, threads=threads)
    return [got], [reference("rms_norm", [x, w], normalized_shape=[cols], eps=1e-6)]


def rms_norm_residual(rows, cols, dtype, level, threads):
    # eps=None: torch's default for float32 values; no IR op fuses the add, so the reference
    # is the add (in dtype, as a model would do it) then rms_norm.
    x, r = torch.randn(rows, cols).to(dtype), torch.randn(rows, cols).to(dtype)
    w, _ = _params(cols)
    y, total = native.rms_norm(x, w, None, residual=r, return_sum=True, max_isa=level, threads=threads)
    want_total = reference("add", [x, r])
    return [y, total], [reference("rms_norm", [want_total, w], normalized_shape=[cols], eps=None), want_total]


def softmax(rows, cols, dtype, level, threads):
    x = (torch.randn(rows, cols) * 4).to(dtype)
    got = native.softmax(x, -1, max_isa=level, threads=threads)
    return [got], [reference("softmax", [x], dim=-1)]


def softmax_scale_mask(rows, cols, dtype, level, threads):
    # Attention-shaped: scores [2, heads, q, cols] with a padding mask [2, 1, 1, cols] (0 / -inf).
    heads, q = 3, max(1, rows // 6)
    x = (torch.randn(2, heads, q, cols) * 4).to(dtype)
    mask = torch.zeros(2, 1, 1, cols)
    mask[1, ..., cols // 2 + 1:] = float("-inf")  # batch 1 pads its second half (keeps >= 1 key)
    got = native.softmax(x, -1, scale=0.125, mask=mask.to(dtype), max_isa=level, threads=threads)
    want = reference("softmax", [x.float() * 0.125 + mask], dim=-1).to(dtype)
    return [got], [want]


def gelu(rows, cols, dtype, level, threads):
    x = (torch.randn(rows, cols) * 3).to(dtype)
    return [native.gelu(x, max_isa=level, threads=threads)], [reference("gelu", [x], approximate="none")]


def gelu_tanh(rows, cols, dtype, level, threads):
    x = (torch.randn(rows, cols) * 3).to(dtype)
    return [native.gelu(x, "tanh", max_isa=level, threads=threads)], [reference("gelu", [x], approximate="tanh")]


def silu(rows, cols, dtype, level, threads):
    x = (torch.randn(rows, cols) * 3).to(dtype)
    return [native.silu(x, max_isa=level, threads=threads)], [reference("silu", [x])]


def silu_mul(rows, cols, dtype, level, threads):
    # No IR op yet: the reference is silu's reference times b, in fp32, rounded once.
    a, b = (torch.randn(rows, cols) * 3).to(dtype), torch.randn(rows, cols).to(dtype)
    want = (reference("silu", [a.float()]) * b.float()).to(dtype)
    return [native.silu_mul(a, b, max_isa=level, threads=threads)], [want]


CASES = [
    Case("layer_norm", "layer_norm", layer_norm),
    Case("layer_norm_no_affine", "layer_norm", layer_norm_no_affine),
    Case("add_layer_norm", "layer_norm", add_layer_norm),
    Case("rms_norm", "rms_norm", rms_norm),
    Case("rms_norm_residual", "rms_norm", rms_norm_residual),
    Case("softmax", "softmax", softmax),
    Case("softmax_scale_mask", "softmax", softmax_scale_mask),
    Case("gelu", "gelu", gelu),
    Case("gelu_tanh", "gelu", gelu_tanh),
    Case("silu", "silu", silu),
    Case("silu_mul", "silu_mul", silu_mul),
]
