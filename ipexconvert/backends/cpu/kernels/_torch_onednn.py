"""What the oneDNN kernels share: when they may run, and how post-ops split between oneDNN and torch."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from .... import environment
from ....ir.postops import PostOp, apply_post_ops
from ....ir.spec import TensorSpec
from .. import native_lib
from ..isa import ISA_LEVELS, cpu_vendor
from ....runtime.kernels import KernelFn, NodeContext

FLOAT_DTYPES = ("float32", "bfloat16")

# Our unary post-op -> (oneDNN attr, algorithm), the names Inductor's mkldnn fusion passes.
ONEDNN_UNARY: dict[str, tuple[str, str]] = {
    "relu": ("relu", ""),
    "gelu": ("gelu", "none"),
    "gelu_tanh": ("gelu", "tanh"),
    "silu": ("swish", ""),
    "sigmoid": ("sigmoid", ""),
    "tanh": ("tanh", ""),
}


# Levels where a linear's GELU runs after oneDNN's matmul, as our native GELU in place (with_tail), instead of as
# oneDNN's fused erf post-op, which cost more than the two together there (benchmarks/gelu_post_op.py; AMD Zen 1,
# AVX2, 2 threads, float32: the linear + native GELU took 0.91-0.94 of the fused call's time at the MiniLM b32 and
# BERT-base b1/b8 FFN shapes: benchmarks/results/session60-gelu-post-op.md). On the AMX host the bf16 call with the
# fused GELU was faster at 128 rows (BERT-base b1: native after it 1.19 x) and slower at 1024-4096 rows (0.77-0.83 x):
# amx keeps it fused for the b1 case (benchmarks/results/session62-gpuhost-amx-gelu-post-op.md).
GELU_UNFUSED_AT = frozenset({"avx2"})
NATIVE_TAIL = {"gelu": False, "gelu_tanh": True}  # post-op kind -> the native gelu kernel's tanh flag


def unfused_unary(isa: str) -> frozenset[str]:
    """The unary post-op kinds a float linear leaves to its tail at this level (GELU_UNFUSED_AT)."""
    return frozenset(NATIVE_TAIL) if onednn_level(isa) in GELU_UNFUSED_AT else frozenset()


def _switched_on(value: str) -> bool:
    return value.strip().lower() not in ("0", "false", "off", "no")


def enabled() -> bool:
    """IPEXCONVERT_ONEDNN=0 sends every node to the next factory (for debugging and timing)."""
    return not environment.switched_off("IPEXCONVERT_ONEDNN")


def mkl_runs_float32_linear() -> bool:
    """Which library runs float32 linear: MKL's packed sgemm on Intel CPUs, where it measured as fast
    as or faster than oneDNN (oneDNN has ~35 us more fixed cost per call), and oneDNN on other
    vendors' CPUs, where MKL takes slower code paths (AMD Zen 4, BERT-base shapes, 2 threads:
    oneDNN 0.69-0.84 of MKL's time). IPEXCONVERT_MKL_FP32=1/0 overrides (benchmarks/ab.py --env)."""
    override = environment.get("IPEXCONVERT_MKL_FP32")
    return _switched_on(override.strip()) if override else cpu_vendor() == "GenuineIntel"


def onednn_level(isa: str) -> str:
    """`isa`, or the level oneDNN was capped to in this process where that is lower. oneDNN takes a cap once: torch's
    from ONEDNN_MAX_CPU_ISA as `import ipexconvert` wrote it (isa_caps), the direct layers' when they are first used.
    IPEXCONVERT_MAX_ISA lifted after that lifts our kernels but not oneDNN's, and a bf16 layer handed to oneDNN then
    finds no kernel ("could not create a primitive descriptor" for a bf16 matmul at avx2), an int8 one saturates.
    (A cap the user wrote into ONEDNN_MAX_CPU_ISA is theirs to keep consistent: it is not read here.)"""
    from .. import isa_caps, onednn_direct
    caps = [onednn_direct.applied_level(), isa_caps.capped_level("ONEDNN_MAX_CPU_ISA")]
    return ISA_LEVELS[min([ISA_LEVELS.index(isa)] + [ISA_LEVELS.index(c) for c in caps if c is not None])]


def isa_allows(isa: str, dtype: str) -> bool:
    """The ISA cap (IPEXCONVERT_MAX_ISA) also caps these kernels, as oneDNN took it (onednn_level).

    "generic" means the user wants no native code. bf16 needs native bf16 instructions:
    without them oneDNN emulates bf16, slower than the reference gains.
    """
    level = ISA_LEVELS.index(onednn_level(isa))
    if level < ISA_LEVELS.index("avx2"):
        return False
    return dtype != "bfloat16" or level >= ISA_LEVELS.index("avx512_bf16")


def int8_allowed(isa: str) -> bool:
    """oneDNN int8 needs VNNI here: without it u8*s8 products go through a 16-bit saturating
    multiply-add (vpmaddubsw) that can overflow, so below avx512_vnni the reference runs."""
    return ISA_LEVELS.index(onednn_level(isa)) >= ISA_LEVELS.index("avx512_vnni")


def int8_weight_params(ctx: NodeContext) -> Optional[tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]]:
    """(int8 weight, float32 scales, float32 bias or None) of a qlinear/qconv2d node, when all are constants."""
    weight, scales = ctx.constants[1], ctx.constants[2]
    has_bias = ctx.input_specs[3] is not None
    bias = ctx.constants[3] if has_bias else None
    if weight is None or scales is None or (has_bias and bias is None) or weight.dtype != torch.int8:
        return None
    return weight, scales.float().contiguous(), None if bias is None else bias.float().contiguous()


def int8_output(attrs) -> Optional[torch.dtype]:
    """output_dtype argument of the oneDNN int8 ops: None means uint8 (requantized)."""
    return {"uint8": None, "float32": torch.float32, "bfloat16": torch.bfloat16}.get(attrs.output_dtype, "unsupported")


def qlinear_setup(ctx: NodeContext):
    """((int8 weight, scales, bias), torch output dtype or None for uint8) or None when oneDNN cannot run this node."""
    if ctx.device != "cpu" or not enabled() or not int8_allowed(ctx.isa):
        return None
    params = int8_weight_params(ctx)
    out_dtype = int8_output(ctx.attrs)
    if params is None or out_dtype == "unsupported" or ctx.input_specs[0].dtype != "uint8":
        return None
    return params, out_dtype


def node_dtype(ctx: NodeContext) -> Optional[str]:
    """The compute dtype if activation, weight and output agree on float32 or bfloat16, else None."""
    x, w = ctx.input_specs[0], ctx.input_specs[1]
    if x is None or w is None:
        return None
    dtype = x.dtype
    if dtype not in FLOAT_DTYPES or w.dtype != dtype or ctx.output_specs[0].dtype != dtype:
        return None
    bias = ctx.input_specs[2] if len(ctx.input_specs) > 2 else None
    if bias is not None and bias.dtype not in (dtype, "float32"):  # oneDNN takes an fp32 bias with bf16 data
        return None
    return dtype


def constant_weight_and_bias(ctx: NodeContext) -> Optional[tuple[torch.Tensor, Optional[torch.Tensor]]]:
    """(weight, bias) when both are constants (a missing bias counts), else None: only constants are packed."""
    weight = ctx.constants[1]
    has_bias = len(ctx.input_specs) > 2 and ctx.input_specs[2] is not None
    bias = ctx.constants[2] if has_bias else None
    if weight is None or (has_bias and bias is None):
        return None
    return weight, bias


def consumed(ctx: NodeContext) -> frozenset[int]:
    """The constant inputs the kernel holds itself: the weight and, when there is one, the bias."""
    has_bias = len(ctx.input_specs) > 2 and ctx.input_specs[2] is not None
    return frozenset({1, 2} if has_bias else {1})


@dataclass(frozen=True)
class FusionPlan:
    """How a node's post_ops run: the first one or two inside the oneDNN call, the rest in torch after it.

    Post-ops run in order, so oneDNN can only take a prefix: one unary (plain op), or one
    binary optionally followed by one unary (the .binary op).
    """

    unary: Optional[tuple[str, str]] = None  # (attr, algorithm) fused by the plain op
    binary: Optional[PostOp] = None  # fused by the .binary op; its operand is read from the node inputs
    binary_unary: Optional[tuple[str, str]] = None  # unary fused after the binary
    tail: tuple[PostOp, ...] = field(default_factory=tuple)  # applied in torch, in order


def plan_post_ops(post_ops: list[PostOp], binary_ok: Callable[[PostOp], bool],
                  unary_after_add: frozenset[str], unfused: frozenset[str] = frozenset()) -> FusionPlan:
    """Fuse the longest prefix oneDNN supports; the remainder becomes the torch tail.

    unary_after_add: the unary kinds the .binary op fuses after an add (Inductor fuses
    add+relu only, and that is what the probe checks). unfused: unary kinds left to the tail
    where they run faster after the call (unfused_unary).
    """
    if not post_ops:
        return FusionPlan()
    first, rest = post_ops[0], post_ops[1:]
    if first.operand is None:
        if first.kind in ONEDNN_UNARY and first.kind not in unfused:
            return FusionPlan(unary=ONEDNN_UNARY[first.kind], tail=tuple(rest))
        return FusionPlan(tail=tuple(post_ops))
    if not binary_ok(first):
        return FusionPlan(tail=tuple(post_ops))
    if first.kind == "add" and rest and rest[0].operand is None and rest[0].kind in unary_after_add:
        return FusionPlan(binary=first, binary_unary=ONEDNN_UNARY[rest[0].kind], tail=tuple(rest[1:]))
    return FusionPlan(binary=first, tail=tuple(rest))


def with_tail(fn: KernelFn, tail: tuple[PostOp, ...], isa: Optional[str] = None) -> KernelFn:
    """fn followed by the post-ops oneDNN could not take (the reference's own post-op code). Given the level, a
    leading GELU runs as our native kernel in place on fn's fresh float32/bf16 output (torch's GELU allocates and
    took 1.5x its time: benchmarks/gelu_post_op.py)."""
    if not tail:
        return fn
    post_ops = list(tail)
    first = post_ops[0]
    if isa not in (None, "generic") and first.operand is None and first.kind in NATIVE_TAIL and native_lib.available():
        lib, tanh, rest = native_lib.raw, NATIVE_TAIL[first.kind], post_ops[1:]

        def run_native_first(inputs: list, dims: dict[str, int]) -> torch.Tensor:
            y = fn(inputs, dims)
            if y.dtype not in (torch.float32, torch.bfloat16) or not y.is_contiguous():
                return _as(apply_post_ops(y, post_ops, inputs), y.dtype)
            lib.gelu(y, tanh, y, isa, torch.get_num_threads())  # elementwise: in place reads each value once
            return _as(apply_post_ops(y, rest, inputs), y.dtype) if rest else y

        return run_native_first

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        y = fn(inputs, dims)
        return _as(apply_post_ops(y, post_ops, inputs), y.dtype)

    return run


def _as(out: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The tail's result in the dtype fn wrote (the node's): a float32 operand promoted a bf16 result."""
    return out if out.dtype == dtype else out.to(dtype)


def representative_conv_input(x: TensorSpec) -> Optional[list[int]]:
    """Input size for choosing a packed conv weight's layout (float and int8); it depends on channels
    and spatial size, not batch.

    A dynamic batch is packed for batch 1 (the layout stays valid for any batch; oneDNN
    converts if it would prefer another). Dynamic spatial sizes: let oneDNN pick.
    """
    shape = list(x.shape)
    if not all(isinstance(d, int) for d in shape[1:]):
        return None
    return [shape[0] if isinstance(shape[0], int) else 1, *shape[1:]]
