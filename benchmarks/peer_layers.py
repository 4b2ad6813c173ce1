"""Where a case's time goes, ours against ONNX Runtime's, op kind by op kind and layer by layer, in one process.

    python benchmarks/peer_layers.py --case resnet50-b1 --dtype fp32 --rounds 20
    python benchmarks/peer_layers.py --case bert-base-b1 --dtype int8 --top 10

Our artifact (the runner's cached one, benchmarks/.cache) runs with a timer around each executor step
(timing.step_timers); ONNX Runtime runs the same eager model exported as run.py's peer does (int8: the same static
QDQ quantization and calibration batches) in a session with its own profiler on (`enable_profiling`, each node's
`kernel_time`). The two alternate (timing.settle before each: a pause, then one untimed call), --rounds rounds
after --warmup; medians per step and node over the timed calls. Printed: the walls, then per op kind
(convolutions, matrix products, the rest) both sums, then the layers of a kind paired in execution order (when both
ran as many) with the largest differences first.

Why ONNX Runtime and not OpenVINO: OpenVINO's per-node counters (PERF_COUNT) summed to more than its wall time
(ResNet-50 bf16 b16: 96.6 ms of counters in 78.2 ms calls, benchmarks/results/session70-amx-notes.md), so its layers
cannot be set beside ours one by one; ONNX Runtime's sum stays under its wall.
"""
from __future__ import annotations

import argparse
import bisect
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import run as runner  # noqa: E402  (imports ipexconvert before torch, as every timed script here)
import torch  # noqa: E402
from timing import settle, step_timers  # noqa: E402

import ipexconvert  # noqa: E402
from ipexconvert.examples import get_example  # noqa: E402

# op kind -> (what our kernel names contain, ONNX Runtime op types)
KINDS = {
    "convolution": (("conv2d",), ("Conv", "FusedConv", "QLinearConv", "ConvInteger", "NchwcConv")),
    "matrix product": (("linear", "matmul", "gemm"),
                       ("MatMul", "Gemm", "FusedMatMul", "MatMulInteger", "QLinearMatMul", "DynamicQuantizeMatMul",
                        "MatMulIntegerToFloat", "FusedGemm")),
}


def kind_of_ours(kernel_name: str) -> str:
    name = kernel_name.lower()
    return next((kind for kind, (ours, _) in KINDS.items() if any(part in name for part in ours)), "other")


def kind_of_peer(op_type: str) -> str:
    return next((kind for kind, (_, theirs) in KINDS.items() if op_type in theirs), "other")


def ort_session(case, dtype: str, eager_model, inputs: dict, calibration, threads: int, folder: Path):
    """An ONNX Runtime session of the case with its profiler on, built as run.py builds its peer."""
    from peers import onnxruntime_peer as peer

    import onnxruntime as ort

    path = folder / "model.onnx"
    peer.export(eager_model, inputs, path)
    if dtype == "int8":
        quantized = folder / "model.int8.onnx"
        transformer = get_example(case.model).task in runner.TRANSFORMER_TASKS
        peer.quantize(path, quantized, calibration, transformer=transformer)
        path = quantized
    options = peer.session_options(threads)
    options.enable_profiling = True
    options.profile_file_prefix = str(folder / "profile")
    session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    feed = {i.name: peer._to_numpy(inputs[i.name]) for i in session.get_inputs()}
    return session, feed


def peer_nodes(profile_path: str, first_run: int) -> list[tuple[str, str, float]]:
    """(node, op type, median ms) in execution order from an ONNX Runtime profile: the nodes of the timed runs only
    (from `first_run` on, every second one: each round runs the session twice, settle's untimed call first)."""
    events = json.loads(Path(profile_path).read_text())
    starts = sorted(e["ts"] for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")
    per_node: dict[str, tuple[str, list[float]]] = {}
    for event in events:
        if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
            continue
        run_index = bisect.bisect_right(starts, event["ts"]) - 1
        if run_index < first_run or (run_index - first_run) % 2 == 0:
            continue
        node = event["name"][: -len("_kernel_time")]
        per_node.setdefault(node, (event["args"].get("op_name", "?"), []))[1].append(event["dur"] / 1e3)
    return [(node, op, statistics.median(times)) for node, (op, times) in per_node.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", default="resnet50-b1", choices=sorted(runner.ALL_CASES))
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "int8"])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--top", type=int, default=15, help="layers listed per op kind")
    parser.add_argument("--calibration-batches", type=int, default=4)
    parser.add_argument("--cache-dir", type=Path, default=BENCH_DIR / ".cache")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    case = runner.ALL_CASES[args.case]
    example = get_example(case.model)
    eager_model = example.build().eval()
    inputs = example.example_inputs(case.batch)
    calibration = runner.calibration_batches(case, args.calibration_batches) if args.dtype == "int8" else None
    path, _ = runner.artifact_for(case.model, args.dtype, args.cache_dir, False, calibration)
    ours = ipexconvert.load_artifact(path)
    for _ in range(max(args.warmup, runner.CHOOSING_CALLS)):  # the layers' first calls may choose their kernels
        ours(**inputs)
    recording = [False]
    samples = step_timers(ours, recording)
    with tempfile.TemporaryDirectory(prefix="peer-layers-") as tmp:
        session, feed = ort_session(case, args.dtype, eager_model, inputs, calibration, args.threads, Path(tmp))
        walls: dict[str, list[float]] = {"ipexconvert": [], "onnxruntime": []}
        for call in range(args.warmup + args.rounds):
            for name, fn in (("ipexconvert", lambda: ours(**inputs)), ("onnxruntime", lambda: session.run(None, feed))):
                settle(fn)  # a pause, then one untimed call: each timed call starts warm
                recording[0] = call >= args.warmup
                start = time.perf_counter()
                fn()
                if recording[0]:
                    walls[name].append(time.perf_counter() - start)
                recording[0] = False
        theirs = peer_nodes(session.end_profiling(), 2 * args.warmup)
    mine = [(step.node, step.kernel_name, statistics.median(samples[step.node]) * 1e3)
            for step in ours.executor.steps if samples[step.node]]

    print(f"{args.case} {args.dtype}, {args.threads} threads, {args.rounds} alternating calls after {args.warmup}; "
          f"artifact {path.name}")
    print(f"wall (median ms): ipexconvert {statistics.median(walls['ipexconvert']) * 1e3:.2f}, "
          f"onnxruntime {statistics.median(walls['onnxruntime']) * 1e3:.2f}; sums of steps / nodes: "
          f"{sum(t for *_, t in mine):.2f} / {sum(t for *_, t in theirs):.2f}\n")
    print("| op kind | ipexconvert steps | ms | onnxruntime nodes | ms |")
    print("| --- | ---: | ---: | ---: | ---: |")
    grouped_ours = {kind: [m for m in mine if kind_of_ours(m[1]) == kind] for kind in (*KINDS, "other")}
    grouped_theirs = {kind: [t for t in theirs if kind_of_peer(t[1]) == kind] for kind in (*KINDS, "other")}
    for kind in grouped_ours:
        a, b = grouped_ours[kind], grouped_theirs[kind]
        print(f"| {kind} | {len(a)} | {sum(t for *_, t in a):.2f} | {len(b)} | {sum(t for *_, t in b):.2f} |")
    for kind in KINDS:
        a, b = grouped_ours[kind], grouped_theirs[kind]
        if not a or len(a) != len(b):
            print(f"\n{kind}: {len(a)} steps against {len(b)} nodes, not paired")
            continue
        pairs = sorted(zip(a, b), key=lambda p: -abs(p[0][2] - p[1][2]))[: args.top]
        print(f"\n{kind}, paired in execution order, largest differences first (ms):")
        for (node, kernel, t_ours), (peer_node, op, t_peer) in pairs:
            print(f"  {node:<20} {t_ours:7.3f}  {t_peer:7.3f}  {t_ours / t_peer:5.2f}  "
                  f"{kernel} | {op} {peer_node[:48]}")
    for who, group in (("our", grouped_ours["other"]), ("onnxruntime's", grouped_theirs["other"])):
        longest = sorted(group, key=lambda m: -m[2])[: args.top]
        if longest:
            listed = ", ".join(f"{n[:40]} ({k}) {t:.3f}" for n, k, t in longest)
            print(f"\n{who} other steps, longest first (ms): {listed}")


if __name__ == "__main__":
    main()
