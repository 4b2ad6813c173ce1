"""Pipelines: the ordered passes for each (target device, --dtype), and the runner that records them."""
from __future__ import annotations

import time
from importlib import import_module
from pathlib import Path
from typing import Callable, Iterable, Optional

from ..errors import UserInputError
from ..ir import Program
from ..manifest import PassRecord
from .base import PASSES, PassOptions

# Register every pass module in this package.
for _module in sorted(p.stem for p in Path(__file__).parent.glob("*.py")):
    if _module not in {"__init__", "base", "pipeline", "rewrite"}:
        import_module(f"{__package__}.{_module}")

_FP32 = [
    "remove_identity",
    "dead_code",
    "constant_fold",
    "common_subexpressions",
    "simplify_padding_mask",
    "fold_batchnorm",
    "matmul_to_linear",
    "fuse_rms_norm",
    "fuse_rope",
    "fuse_gelu",
    "fuse_attention",
    "fuse_grouped_attention",
    "fuse_add_layer_norm",
    "fuse_post_ops",
    "channels_last",
    "dead_code",
]
# prepack runs last so it sees the final dtypes and layouts.
# int8: calibration and planning (ipexconvert.quant) run between the float passes and "quantize";
# to_bf16 is dropped where the CPU has no native bf16 (ops without int8 kernels then run float32).
# merge_linears (Q/K/V as one GEMM) runs after dtypes and quantization are final; fp32 linears
# run MKL through F.linear, where merging is not measured, so fp32 leaves them alone.
# merge_shortcut_conv (ResNet's projection shortcut inside the block's last 1x1 conv) pays for
# int8 convs at batch 16; float convs measured too little gain to merge (see the pass).
PIPELINES: dict[tuple[str, str], list[str]] = {
    ("cpu", "fp32"): [*_FP32, "share_attention_mask", "cache_append", "fuse_rope_kv_append", "prepack"],
    ("cpu", "bf16"): [*_FP32, "to_bf16", "cache_in_compute_dtype", "fuse_layout_change", "merge_linears", "share_attention_mask", "cache_append", "fuse_rope_kv_append", "prepack"],
    ("cpu", "int8"): [*_FP32, "calibrate", "to_bf16", "quantize", "int8_residual", "quantize_before_pool", "fold_requantize", "fold_norm_quantize",
             "fold_attention_quantize", "merge_shortcut_conv", "fuse_layout_change",
             "merge_linears", "share_attention_mask",
             "dead_code", "cache_append", "fuse_rope_kv_append", "prepack"],
}
# Weight-only quantization (--dtype int4, and int8 with int8_scheme "weight-only"): the fp32 passes with
# merge_linears moved before fuse_post_ops (so Q/K/V and a SwiGLU's gate/up, whose up projection would
# otherwise take the gate as a mul operand, each become one GEMM over the weights read once), then
# weight_only_quantize. Activations stay float32 and nothing is calibrated.
# fuse_swiglu then makes the gate's silu and mul, which read two slices of the merged gate/up output, one pass.
_WEIGHT_ONLY = [p for n in _FP32 for p in (["merge_linears", n, "fuse_swiglu"] if n == "fuse_post_ops" else [n])] + [
    "weight_only_quantize", "share_attention_mask", "cache_append", "fuse_rope_kv_append", "prepack"]
PIPELINES[("cpu", "int4")] = _WEIGHT_ONLY
# The weight-only choice of each (device, dtype) that has one: int4 is always weight-only.
WEIGHT_ONLY_PIPELINES: dict[tuple[str, str], list[str]] = {("cpu", "int4"): _WEIGHT_ONLY, ("cpu", "int8"): _WEIGHT_ONLY}
WEIGHT_ONLY_PASS = "weight_only_quantize"
# Weight-only with bf16 activations (weight_only.activations "bf16"): the float parts to bf16 after the weights are
# quantized (from their float32 values), and the KV cache in bf16, as the bf16 pipeline does.
WEIGHT_ONLY_BF16_PASSES = ("to_bf16", "cache_in_compute_dtype")
# A decoder's KV cache in bf16 or int8 (decoder.kv_cache): after the passes that make the appending nodes.
KV_CACHE_PASSES = {"bf16": "kv_cache_bf16", "int8": "kv_cache_int8"}

# Stages: steps of a pipeline that are not passes. At "calibrate" the int8 conversion (ipexconvert/quant)
# calibrates, plans and guards accuracy; the passes after it run once per candidate plan.
CALIBRATE = "calibrate"
STAGES: dict[str, str] = {CALIBRATE: "int8 calibration, quantization plan and accuracy guard (ipexconvert/quant)"}
# Passes that must see the calibrated plan: a --passes list for int8 without "calibrate" gets it before the first.
QUANTIZATION_STAGE = ("to_bf16", "quantize")


def pipeline_for(dtype: str, only: Optional[Iterable[str]] = None, skip: Iterable[str] = (),
                 device: str = "cpu", weight_only: bool = False, bf16_activations: bool = False,
                 kv_cache: Optional[str] = None) -> list[str]:
    """The passes for `dtype` (`only` replaces the list, `skip` leaves some out); `weight_only` picks the
    weight-only pipeline of int8 (int4 is always weight-only), `bf16_activations` its bf16 variant; `kv_cache`
    ("bf16", "int8") adds kv_cache_bf16 / kv_cache_int8 before prepack."""
    if (device, dtype) not in PIPELINES:
        dtypes = [d for dev, d in PIPELINES if dev == device]
        raise UserInputError(f"dtype {dtype!r} is not supported for {device}", f"use one of: {', '.join(dtypes)}")
    weight_only = weight_only or dtype == "int4"
    if weight_only and (device, dtype) not in WEIGHT_ONLY_PIPELINES:
        raise UserInputError(f"weight-only quantization applies to --dtype int4 and int8, not {dtype}",
                             "use --dtype int4, or int8 with weight-only quantization")
    table = WEIGHT_ONLY_PIPELINES if weight_only else PIPELINES
    names = list(only) if only is not None else list(table[device, dtype])
    if weight_only and bf16_activations and only is None:
        at = names.index(WEIGHT_ONLY_PASS) + 1
        names[at:at] = WEIGHT_ONLY_BF16_PASSES
    if kv_cache is not None and KV_CACHE_PASSES[kv_cache] not in names:
        names.insert(names.index("prepack") if "prepack" in names else len(names), KV_CACHE_PASSES[kv_cache])
    skip = set(skip)
    unknown = [n for n in [*names, *skip] if n not in PASSES and n not in STAGES]
    if unknown:
        raise UserInputError(f"unknown pass(es): {', '.join(unknown)}", f"known passes: {', '.join(sorted(PASSES))}")
    if dtype == "bf16" and "to_bf16" not in names and only is not None:
        names.append("to_bf16")  # bf16 output is what --dtype bf16 promises
        if "prepack" in names:  # keep prepack last
            names.remove("prepack")
            names.append("prepack")
    names = [n for n in names if n not in skip]
    if weight_only:
        if WEIGHT_ONLY_PASS not in names:
            raise UserInputError(f"weight-only {dtype} needs the {WEIGHT_ONLY_PASS} pass", "do not skip it")
        if CALIBRATE in names:
            raise UserInputError(f"the {CALIBRATE} stage does not apply to weight-only {dtype}", "leave it out of --passes")
        return names
    if WEIGHT_ONLY_PASS in names:
        raise UserInputError(f"the {WEIGHT_ONLY_PASS} pass only applies to --dtype int4 and weight-only int8",
                             "leave it out of --passes, or convert with --dtype int4")
    if dtype == "int8" and "quantize" not in names:
        raise UserInputError("--dtype int8 needs the quantize pass", "do not skip it, or use --dtype bf16")
    if dtype == "int8" and CALIBRATE not in names:
        names.insert(min(names.index(n) for n in QUANTIZATION_STAGE if n in names), CALIBRATE)
    if dtype != "int8" and CALIBRATE in names:
        raise UserInputError(f"the {CALIBRATE} stage only applies to --dtype int8", f"leave it out of --passes")
    return names


def run_pipeline(program: Program, names: list[str], options: PassOptions,
                 on_pass: Optional[Callable[[str], None]] = None) -> list[PassRecord]:
    records = []
    for name in names:
        if name in STAGES:  # run by its owner (quant/convert.py), not here
            continue
        if on_pass:
            on_pass(name)
        start = time.perf_counter()
        changes = PASSES[name].run(program, options)
        records.append(PassRecord(name=name, changes={k: v for k, v in changes.items()},
                                  seconds=round(time.perf_counter() - start, 4)))
    return records
