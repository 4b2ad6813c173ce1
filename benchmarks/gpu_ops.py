"""Which torch operators one call of an artifact's plan runs on the GPU, step by step (a diagnostic).

Runs the plan eagerly once under torch.profiler (CPU side, shapes recorded) and prints, per executor step,
the ATen operators it called with their input shapes: where a copy (`aten::copy_`, `aten::clone`,
`aten::contiguous`) or a cast hides inside a step, and how many kernels a layer launches.

    python benchmarks/gpu_ops.py example:bert-base --dtype bf16 [--batch 1] [--node-filter layer.0]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

import ipexconvert
from ipexconvert.examples import get_example


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", help="example:NAME")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--steps", type=int, default=40, help="print the first N main steps")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.ipxc"
        ipexconvert.optimize(args.source, dtype=args.dtype, output=path, calib_synthetic=args.dtype == "int8")
        model = ipexconvert.load_artifact(path, device="cuda")
        example = get_example(args.source.removeprefix("example:"))
        inputs = {k: v.cuda() for k, v in example.example_inputs(args.batch).items() if k in model.signature.input_names}
        model.run_dict(inputs)
        executor = model.executor
        steps = [s for s in executor.steps if not s.dims_only][: args.steps]
        originals = {id(s): s.kernel for s in steps}
        for s in steps:  # each step inside a named profiler range
            def wrapped(ins, dims, fn=s.kernel, name=f"STEP {s.node} [{s.kernel_name}]"):
                with record_function(name):
                    return fn(ins, dims)
            s.kernel = wrapped
        tensors = [inputs[n] for n in model.signature.input_names]
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            executor.run(tensors, model.signature.check(tensors))
        for s in steps:
            s.kernel = originals[id(s)]
        current = None
        for event in sorted(prof.events(), key=lambda e: e.time_range.start):
            if event.name.startswith("STEP "):
                current = event
                print(event.name)
            elif current is not None and event.time_range.start <= current.time_range.end \
                    and event.name.startswith("aten::") and event.name not in ("aten::empty", "aten::empty_strided"):
                print(f"    {event.name} {event.input_shapes}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
