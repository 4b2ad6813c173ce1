#!/usr/bin/env python
"""Mutation fuzzer of the ONNX frontend: an .onnx file is untrusted input to `ipexconvert optimize`, which must
convert it or refuse it with an ipexconvert error (exit 2), and never leave an output file behind when it refuses.

    python fuzz/fuzz_onnx.py --seconds 60 [--seed N] [--max-cases N] [--out fuzz/onnx-findings]

Each case takes a small valid model (an MLP written with onnx.helper, the tiny-cnn and tiny-bert examples as
torch.onnx exports them), applies 1-3 mutations from onnx_mutators.MUTATORS (one case in twenty: a few flipped
bytes of the file instead), and converts it to fp32, bf16 or int8 (synthetic calibration) in a forked child with
harness.py's time and memory caps and audit hook. Findings: exceptions that are not ipexconvert errors, crashes,
hangs, out-of-memory, code execution, and an output file left by a failed conversion; each saved once per kind and
place under --out with the mutations that made it. Exit status: 0 no findings, 1 findings.
"""
from __future__ import annotations

import os
import sys

os.environ["OMP_NUM_THREADS"] = "1"  # forked children must not inherit an OpenMP team (harness.py); before torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import onnx  # noqa: E402
import torch  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import harness  # noqa: E402
import ipexconvert  # noqa: E402
# What a conversion imports lazily, imported before the children fork: each child would import it again (and an
# editable install's import hook would rebuild the extension there, a subprocess the audit hook reports).
import ipexconvert.backends.cpu.kernels  # noqa: E402,F401
import ipexconvert.frontend.onnx.convert  # noqa: E402,F401
from ipexconvert.backends.cpu import native_lib, onednn_direct  # noqa: E402,F401
from ipexconvert.examples.onnx_export import export_example  # noqa: E402
from onnx_mutators import MUTATORS  # noqa: E402

try:
    import onnxruntime  # noqa: F401  (the conversion's oracle where installed)
except ImportError:
    pass

DTYPES = ["fp32", "fp32", "fp32", "bf16", "int8"]  # by case index


def stage_convert(ctx) -> None:
    """ipexconvert.optimize of the case's .onnx file; a refusal must leave no output file."""
    target = ctx.path.with_suffix(".ipxc")
    dtype = DTYPES[ctx.input_seed % len(DTYPES)]
    try:
        calibration = {"calib_synthetic": 2} if dtype == "int8" else {}
        ipexconvert.optimize(ctx.path, output=target, dtype=dtype, **calibration)
    except BaseException:
        if target.exists():
            raise RuntimeError(f"a refused conversion left {target.name} behind")
        raise


harness.STAGES["convert"] = stage_convert


def _mlp() -> onnx.ModelProto:
    """Gemm -> Relu -> a reshape computed from Shape (Constant nodes for its indices), opset 17."""
    rng = torch.Generator().manual_seed(0)
    nodes = [
        helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(torch.tensor([0]).numpy())),
        helper.make_node("Constant", [], ["minus_one"], value=numpy_helper.from_array(torch.tensor([-1]).numpy())),
        helper.make_node("Gemm", ["x", "W", "B"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["y"]),
        helper.make_node("Shape", ["y"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
        helper.make_node("Concat", ["b", "minus_one"], ["shape"], axis=0),
        helper.make_node("Reshape", ["y", "shape"], ["out"]),
    ]
    weights = [numpy_helper.from_array(torch.randn(16, 8, generator=rng).numpy(), "W"),
               numpy_helper.from_array(torch.randn(16, generator=rng).numpy(), "B")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 16])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what ONNX Runtimes of the last years read
    return model


def seed_models(folder: Path) -> dict[str, bytes]:
    """The valid models cases start from, serialized: the MLP and two built-in examples as torch.onnx writes them."""
    seeds = {"mlp": _mlp().SerializeToString()}
    for name in ("tiny-cnn", "tiny-bert"):
        seeds[name] = export_example(name, folder / f"seed-{name}.onnx", batch=2).read_bytes()
    return seeds


def make_case(seeds: dict[str, bytes], rng: random.Random) -> tuple[str, bytes, list[str]]:
    """(the seed's name, the case's file bytes, what was done to it)."""
    name = rng.choice(sorted(seeds))
    model = onnx.ModelProto.FromString(seeds[name])
    done = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(sorted(MUTATORS))
        try:
            what = MUTATORS[kind](model, rng)
        except Exception as e:  # the mutator could not read what earlier mutations left (a fuzzer-side limit)
            what = f"not applied ({type(e).__name__})"
        if what is not None:
            done.append(f"{kind}: {what}")
    data = bytearray(model.SerializeToString())
    if rng.random() < 0.05:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        done.append("byte flips")
    return name, bytes(data), done


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-cases", type=int, default=None, help="stop after this many cases (a run of exact length)")
    p.add_argument("--out", type=Path, default=Path("fuzz/onnx-findings"), help="where findings are saved")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds a case may take before it is a hang")
    p.add_argument("--mem-mb", type=int, default=4096, help="address space a case may add before it counts as OOM")
    p.add_argument("--summary-json", type=Path, default=None, help="also write the summary here")
    args = p.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="ipxfuzz-onnx-"))
    seeds = seed_models(work)
    limits = harness.Limits(timeout=args.timeout, mem_bytes=args.mem_mb << 20)
    findings: dict[str, dict] = {}
    outcomes: dict[str, int] = {}
    start, cases = time.monotonic(), 0
    while time.monotonic() - start < args.seconds and (args.max_cases is None or cases < args.max_cases):
        seed_name, data, done = make_case(seeds, rng)
        path = work / f"case-{cases}.onnx"
        path.write_bytes(data)
        result = harness.execute(path, {}, cases, limits, stages=["convert"])
        outcomes[result["outcome"]] = outcomes.get(result["outcome"], 0) + 1
        for f in result["findings"]:
            key = json.dumps(f["key"])
            if key in findings:
                findings[key]["count"] += 1
                continue
            args.out.mkdir(parents=True, exist_ok=True)
            saved = args.out / f"finding-{args.seed}-{cases}.onnx"
            saved.write_bytes(data)
            findings[key] = {**f, "count": 1, "file": str(saved), "seed_model": seed_name, "mutations": done,
                             "dtype": DTYPES[cases % len(DTYPES)]}
            print(f"finding {f['key']}: {f.get('message', '')[:200]}\n    {done}\n    saved as {saved}", flush=True)
        path.unlink(missing_ok=True)
        path.with_suffix(".ipxc").unlink(missing_ok=True)
        cases += 1
        if cases % 50 == 0:
            print(f"[{time.monotonic() - start:5.0f} s] {cases} cases, {outcomes}", flush=True)
    summary = {"cases": cases, "outcomes": outcomes, "findings": list(findings.values())}
    print(f"{cases} cases, {outcomes}, {len(findings)} unique findings")
    if args.summary_json is not None:
        args.summary_json.write_text(json.dumps(summary, indent=1, default=str))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
