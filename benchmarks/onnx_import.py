"""ONNX import targets: a built-in example exported with torch.onnx.export, converted from the .onnx
file and from PyTorch, compared with ONNX Runtime and timed side by side.

    python benchmarks/onnx_import.py [--cases resnet50-b1 bert-base-b1 minilm-b8] [--dtypes fp32 bf16]
                                     [--rounds 15] [--calls 5] [--threads 2] [--name NAME]

Per case and dtype: the artifact converted from the .onnx file (`onnx`), the one converted from the
PyTorch example (`torch`), and ONNX Runtime on the .onnx file (`ort`, fp32 only), timed in
interleaved rounds (each round calls every system `--calls` times, in reversed order every other
round; the median per-call time over rounds is reported). Accuracy: cosine of every output of the ONNX-sourced artifact against ONNX
Runtime on the same inputs. Writes benchmarks/results/NAME.json and NAME.md.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

import ipexconvert
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.examples import get_example
from ipexconvert.examples.onnx_export import export_example
from timing import settle

CASES = {"resnet50-b1": ("resnet50", 1), "bert-base-b1": ("bert-base", 1), "minilm-b8": ("minilm", 8),
         "tiny-bert-b1": ("tiny-bert", 1)}


def cosine(a, b) -> float:
    """Of two tensors or arrays, flattened, in float64."""
    a, b = torch.as_tensor(a).double().flatten(), torch.as_tensor(b).double().flatten()
    return float(torch.dot(a, b) / (a.norm() * b.norm()).clamp_min(1e-300))


def cpu_model() -> str:
    return next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                 if ln.startswith("model name")), platform.machine())


def ort_options(threads: int):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    return options


def interleaved(systems: dict, rounds: int, calls: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {k: [] for k in systems}
    for r in range(rounds):
        order = list(systems.items())
        for name, fn in (order if r % 2 == 0 else order[::-1]):  # no system always first
            settle(fn)  # the previous system's threads idle, this one warm (timing.py)
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - start) * 1000 / calls)
    return {k: statistics.median(v) for k, v in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["resnet50-b1", "bert-base-b1", "minilm-b8"], choices=list(CASES))
    parser.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--name", default=time.strftime("onnx-import-%Y%m%d-%H%M"))
    args = parser.parse_args()
    import onnxruntime as ort

    torch.set_num_threads(args.threads)
    options = ort_options(args.threads)
    results = {"command": " ".join(["python", *sys.argv]), "cpu": cpu_model(),
               "isa": selected_isa(),
               "torch": torch.__version__, "onnxruntime": ort.__version__, "cases": {}}
    work = Path(tempfile.mkdtemp(prefix="onnx-import-"))
    for case in args.cases:
        name, batch = CASES[case]
        example = get_example(name)
        onnx_path = export_example(name, work / f"{name}.onnx", batch=batch)
        inputs = example.example_inputs(batch)
        session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        feeds = {k: v.numpy() for k, v in inputs.items()}
        want = [torch.from_numpy(o) for o in session.run(None, feeds)]
        for dtype in args.dtypes:
            row: dict = {}
            artifacts = {}
            for source, model in (("onnx", str(onnx_path)), ("torch", f"example:{name}")):
                out = work / f"{name}.{source}.{dtype}.ipxc"
                start = time.perf_counter()
                ipexconvert.optimize(model, output=out, dtype=dtype)
                row[f"convert_s_{source}"] = round(time.perf_counter() - start, 1)
                artifacts[source] = ipexconvert.load_artifact(out, threads=args.threads)
            got = artifacts["onnx"](**inputs)
            got = list(got) if isinstance(got, (tuple, list)) else [got]
            row["cosine_vs_ort"] = [round(cosine(g, w), 7) for g, w in zip(got, want)]
            systems = {"onnx": lambda: artifacts["onnx"](**inputs), "torch": lambda: artifacts["torch"](**inputs)}
            if dtype == "fp32":
                systems["ort"] = lambda: session.run(None, feeds)
            with torch.no_grad():
                for fn in systems.values():
                    fn()
                row["median_ms"] = {k: round(v, 3) for k, v in interleaved(systems, args.rounds, args.calls).items()}
            row["onnx_over_torch"] = round(row["median_ms"]["onnx"] / row["median_ms"]["torch"], 3)
            results["cases"][f"{case} {dtype}"] = row
            print(case, dtype, json.dumps(row), flush=True)
    out_dir = Path(__file__).parent / "results"
    (out_dir / f"{args.name}.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [f"# ONNX import: {args.name}", "", f"Command: `{results['command']}`", "",
             f"CPU: {results['cpu']} (kernels at {results['isa']}), torch {results['torch']}, onnxruntime {results['onnxruntime']}, "
             f"{args.threads} threads; medians of {args.rounds} interleaved rounds of {args.calls} calls.", "",
             "| case | dtype | from .onnx ms | from PyTorch ms | ratio | ORT ms | cosine vs ORT (each output) |",
             "|---|---|---:|---:|---:|---:|---|"]
    for key, row in results["cases"].items():
        case, dtype = key.split()
        ms = row["median_ms"]
        lines.append(f"| {case} | {dtype} | {ms['onnx']:.2f} | {ms['torch']:.2f} | {row['onnx_over_torch']:.3f} | "
                     f"{ms.get('ort', float('nan')):.2f} | {', '.join(f'{c:.6f}' for c in row['cosine_vs_ort'])} |")
    (out_dir / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
