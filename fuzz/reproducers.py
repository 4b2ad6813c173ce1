#!/usr/bin/env python
"""Minimal reproducers of what the fuzzer found, one hand-written edit of a seed artifact each.

    python fuzz/reproducers.py [NAME ...] [--seeds-dir fuzz/.seeds]

Every edit is re-hashed (an attacker who edits the file on purpose does that too), written, and run
through the fuzzer's harness (load, run, inspect in a forked child). A reproducer is fixed when its
outcome is no longer a finding (typically: refused with an ArtifactError at load). Exit status 1 while
any still reproduces. Run it after a fix to see which groups are done; delete entries once fixed for
good (a regression test in tests/security should then cover them).
"""
from __future__ import annotations

import os
import sys

os.environ["OMP_NUM_THREADS"] = "1"  # the harness forks (see fuzz_artifact.py)
os.environ["MKL_NUM_THREADS"] = "1"
os.environ.setdefault("IPEXCONVERT_MAX_TENSOR_BYTES", str(256 << 20))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import argparse  # noqa: E402
import math  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable  # noqa: E402

import torch  # noqa: E402

import harness  # noqa: E402
from parts import Parts, TensorRec  # noqa: E402

Edit = Callable[[Parts], None]


def node(parts: Parts, output: str) -> dict:
    """The node that writes this value."""
    return next(n for n in parts.graph["nodes"] if output in n["outputs"])


def first(parts: Parts, op: str, index: int = 0) -> dict:
    return [n for n in parts.graph["nodes"] if n["op"] == op][index]


def reshape_constant(name: str, shape: list[int]) -> Edit:
    """A constant and its graph spec given another shape (bytes cut or zero-padded): a consistent file."""
    def edit(parts: Parts) -> None:
        t = parts.tensors[name].as_torch().reshape(-1)
        n = math.prod(shape)
        t = t[:n] if n <= t.numel() else torch.cat([t, torch.zeros(n - t.numel(), dtype=t.dtype)])
        parts.tensors[name] = TensorRec.of(t.reshape(shape).contiguous())
        parts.graph["values"][name]["shape"] = shape
    return edit


def cast_constant(name: str, dtype: torch.dtype, graph_dtype: str) -> Edit:
    """A constant stored in another dtype, its graph spec made to match: a consistent file."""
    def edit(parts: Parts) -> None:
        parts.tensors[name] = TensorRec.of(parts.tensors[name].as_torch().to(dtype).contiguous())
        parts.graph["values"][name]["dtype"] = graph_dtype
    return edit


def set_attr(output: str, key: str, value) -> Edit:
    return lambda parts: node(parts, output)["attrs"].__setitem__(key, value)


def set_input(output: str, index: int, value) -> Edit:
    return lambda parts: node(parts, output)["inputs"].__setitem__(index, value)


def drop_input(output: str, index: int) -> Edit:
    return lambda parts: node(parts, output)["inputs"].pop(index)


def quantization(value) -> Edit:
    def edit(parts: Parts) -> None:
        parts.manifest["quantization"] = value
    return edit


def first_layer(key: str, value) -> Edit:
    def edit(parts: Parts) -> None:
        next(iter(parts.manifest["quantization"]["layers"].values()))[key] = value
    return edit


def to_embedding(output: str) -> Edit:
    def edit(parts: Parts) -> None:
        n = node(parts, output)
        n["op"], n["attrs"] = "embedding", {}
    return edit


def post_op(output: str, kind: str, operand: int) -> Edit:
    return lambda parts: node(parts, output)["attrs"]["post_ops"].append({"kind": kind, "operand": operand})


def passes_name(value: str) -> Edit:
    return lambda parts: parts.manifest["passes"][0].__setitem__("name", value)


# name -> (seed, what it shows, edit)
REPRODUCERS: dict[str, tuple[str, str, Edit]] = {
    # -- native memory safety ------------------------------------------------------------------------------------
    "mkl_linear_bias_len0": ("tiny-bert.fp32", "SIGSEGV in torch.ops.mkl._mkl_linear (torch_mkl_linear.py): bias [0] for 64 outputs",
                             reshape_constant("bert.encoder.layer.1.attention.output.dense.bias", [0])),
    "mkl_linear_bias_len1": ("tiny-bert.fp32", "runs 'ok': _mkl_linear reads 63 floats past a 1-element bias (silent over-read)",
                             reshape_constant("bert.encoder.layer.1.attention.output.dense.bias", [1])),
    "conv2d_huge_padding": ("tiny-cnn.bf16", "OOM: a 640 GB conv output allocated (no output budget for conv2d attrs)",
                            set_attr("relu_5", "padding", [100000, 100000])),
    # -- node arity / missing inputs: kernel factories and references index inputs that are not there -------------
    "conv2d_input_dropped": ("tiny-cnn.bf16", "IndexError at load in _dnnl_conv.check_conv_constants",
                             drop_input("relu_10", 2)),
    "qconv2d_input_dropped": ("tiny-cnn.int8", "IndexError at load in cpu_kernels/_common.int8_weight_params",
                              drop_input("relu_1", 3)),
    "avg_pool_input_none": ("tiny-cnn.bf16", "AttributeError at load in native_global_avg_pool",
                            set_input("adaptive_avg_pool2d", 0, None)),
    "embedding_indices_none": ("tiny-bert.fp32", "AttributeError at run in embedding.check_indices",
                               set_input("embedding", 1, None)),
    "linear_input_dropped": ("tiny-bert.fp32", "IndexError at run in linear reference", drop_input("linear_6", 1)),
    # -- attrs that validate but no kernel can build ---------------------------------------------------------------
    "conv2d_groups_2pow31": ("tiny-cnn.fp32", "RuntimeError from oneDNN at load (torch_onednn_conv2d)",
                             set_attr("relu_3", "groups", 2**31)),
    "qconv2d_groups_3": ("tiny-cnn.int8", "RuntimeError from oneDNN at load (torch_onednn_qconv2d)",
                         set_attr("relu_12", "groups", 3)),
    "reshape_shape_empty": ("tiny-cnn.fp32", "RuntimeError in reshape reference", set_attr("view", "shape", [])),
    "permute_perm_32768": ("tiny-bert.fp32", "IndexError in permute reference", set_attr("transpose", "perm", [0, 2, 1, 32768])),
    "to_dtype_unknown": ("tiny-bert.fp32", "ValueError from dtypes.to_torch at run (ToDtypeAttrs.dtype is any str)",
                         lambda parts: first(parts, "to_dtype")["attrs"].__setitem__("dtype", " ")),
    "qlinear_output_dtype_getattr": ("tiny-bert.int8", "TypeError: getattr(torch, output_dtype) with the artifact's string ('save')",
                                     set_attr("pooler_output_bf16_2", "output_dtype", "save")),
    "post_op_operand_is_weight": ("tiny-cnn.fp32", "TypeError: a binary post-op reads input 1 (the weight, consumed by the kernel)",
                                  post_op("relu", "mul", 1)),
    # -- shapes and dtypes never checked against the ops ------------------------------------------------------------
    "layer_norm_weight_len1": ("tiny-bert.fp32", "RuntimeError in layer_norm",
                               reshape_constant("bert.encoder.layer.0.attention.output.LayerNorm.weight", [1])),
    "linear_weight_is_activation": ("tiny-cnn.fp32", "RuntimeError in linear reference", set_input("logits", 1, "relu_12")),
    "sdpa_mask_1d": ("tiny-bert.fp32", "IndexError in sdpa reference",
                     set_input("scaled_dot_product_attention", 3, "bert.encoder.layer.0.output.LayerNorm.bias")),
    "embedding_weight_4d": ("tiny-cnn.fp32", "RuntimeError: a conv node turned embedding ('weight' must be 2-D)",
                            to_embedding("relu_4")),
    "quantize_multiplier_len0": ("tiny-bert.int8", "ValueError from the native quantize kernel (inv_scales length)",
                                 reshape_constant("linear_smooth_multiplier_4", [0])),
    "concat_int8_with_uint8": ("tiny-cnn.int8", "ValueError from the native concat kernel (qconv output int8, other uint8)",
                               set_attr("relu_5", "output_dtype", "int8")),
    # -- inspect on a hostile manifest --------------------------------------------------------------------------------
    "inspect_quant_layers_empty": ("tiny-cnn.fp32", "KeyError 'calibration' in inspection.quant_overview",
                                   quantization({"layers": {}})),
    "inspect_quant_layers_list": ("tiny-cnn.fp32", "AttributeError in inspection.quant_overview", quantization({"layers": []})),
    "inspect_quant_layer_empty": ("tiny-cnn.fp32", "KeyError 'quantized' in inspection.quant_overview",
                                  quantization({"layers": {"a": {}}})),
    "inspect_quant_layer_op_bool": ("tiny-cnn.int8", "TypeError in cli._print_quant_table", first_layer("op", False)),
    "inspect_quant_input_list": ("tiny-cnn.int8", "TypeError in inspection._span / QUANT_COLUMNS",
                                 first_layer("input", {"scale": [1], "zero_point": 0.5, "lo": "x", "hi": None,
                                                       "observer": 1})),
    "inspect_constant_dtype_unknown": ("tiny-bert.fp32", "ValueError from dtypes.to_torch in inspection.summarize (inspect --json)",
                                       lambda parts: parts.graph["values"]["bert.pooler.dense.bias"].__setitem__("dtype", "object")),
    "conv2d_bf16_float32_bias": ("tiny-cnn.bf16", "RuntimeError in conv2d's reference: float32 bias on a bf16 conv",
                                 cast_constant("layer1.0.conv1.bias_2", torch.float32, "float32")),
    "inspect_lone_surrogate": ("tiny-cnn.fp32", "UnicodeEncodeError printing a manifest string", passes_name("\ud800")),
}


# Edits whose damage is silent: running without an error is not a fix, only a refusal is.
MUST_BE_REFUSED = {"mkl_linear_bias_len1"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", help=f"some of: {', '.join(REPRODUCERS)}")
    p.add_argument("--seeds-dir", type=Path, default=Path(__file__).resolve().parent / ".seeds")
    args = p.parse_args()
    warnings.simplefilter("ignore")
    from seeds import ensure_seeds
    names = args.names or list(REPRODUCERS)
    seed_paths = ensure_seeds(args.seeds_dir, sorted({REPRODUCERS[n][0] for n in names}))
    seeds = {name: Parts.read(path.read_bytes()) for name, path in seed_paths.items()}
    still = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            seed, what, edit = REPRODUCERS[name]
            parts = seeds[seed].copy()
            edit(parts)
            path = Path(tmp) / f"{name}.ipxc"
            path.write_bytes(parts.build())
            result = harness.execute(path, seeds[seed].example_inputs(), 1, harness.Limits())
            found = [" / ".join(map(str, f["key"])) for f in result["findings"]]
            refused = [f"{r['stage']}: {r['message'][:100]}" for r in result["stages"] if r["outcome"] == "project_error"]
            silent = not found and not refused and name in MUST_BE_REFUSED
            status = "STILL FAILS" if found or silent else ("refused" if refused else "runs (no error)")
            still += bool(found) or silent
            print(f"{status:15} {name} ({seed}): {what}")
            for line in list(dict.fromkeys(found)) or refused[:1]:
                print(f"{'':15}   {line}")
    return 1 if still else 0


if __name__ == "__main__":
    sys.exit(main())
