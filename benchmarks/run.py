"""Side-by-side latency runner: eager PyTorch, torch.compile + freezing and ipexconvert artifacts.

Everything is timed in ONE process, on the same inputs, in interleaved rounds: each round runs
every system once, and the order rotates by one position per round, so slow drift on a shared
machine (other jobs, frequency changes, thermal limits) hits all systems alike. We report medians
(plus p90) and each system's ratio to torch.compile + freezing of the same dtype measured in the
same run, which is the number the performance targets are stated in.

Systems (see SYSTEMS below):
  eager-fp32        model(**inputs) under torch.no_grad()
  eager-bf16        the same under torch.autocast("cpu", dtype=torch.bfloat16)
  compile-fp32      torch.compile(model) with torch._inductor.config.freezing = True, under no_grad
  compile-bf16      the same under bf16 autocast: autocast + freezing is how PyTorch's own
                    Inductor CPU benchmarks run bf16 (benchmarks/dynamo --amp --freezing); the
                    weights stay float32 in the module and freezing folds their bf16 casts
  ipexconvert-fp32  ipexconvert.optimize(example:NAME, dtype="fp32") -> load_artifact -> call
  ipexconvert-bf16  the same with dtype="bf16"

Optional systems (off by default, so the runner needs nothing beyond the project's .venv):
  ipexconvert-int8  (--int8) ipexconvert.optimize("example:NAME", dtype="int8", calibration=[...]);
                    while ipexconvert has no int8 conversion (TypeError / NotImplementedError /
                    UserInputError from optimize) it is reported as "unavailable", not as a failure
  openvino-fp32     (--peers openvino) openvino.convert_model(eager model, example_input=inputs),
                    reshaped to the case's static shapes, compiled for "CPU" with
                    INFERENCE_PRECISION_HINT f32, INFERENCE_NUM_THREADS = --threads, LATENCY, 1 stream
  openvino-bf16     the same with INFERENCE_PRECISION_HINT bf16
  openvino-int8     nncf.quantize() post-training INT8 of the converted model (model_type TRANSFORMER
                    for the transformer models), compiled with hint --openvino-int8-precision (bf16)
  onnxruntime-fp32  (--peers onnxruntime) torch.onnx.export(eager model, kwargs=inputs, opset 17,
                    dynamo=False: the TorchScript exporter), static shapes, InferenceSession on
                    CPUExecutionProvider with intra_op_num_threads = --threads, inter_op 1,
                    ORT_SEQUENTIAL, ORT_ENABLE_ALL
  onnxruntime-int8  quant_pre_process + quantize_static (QDQ, QUInt8 activations, QInt8 per-channel
                    weights, MinMax calibration, reduce_range --onnxruntime-reduce-range; MatMul/Gemm
                    only for the transformer models), same session options
  See benchmarks/peers/openvino_peer.py and onnxruntime_peer.py. INT8 systems have no
  torch.compile INT8 baseline: their ratio is against compile-bf16 (ratio_vs_compile_bf16), which
  is how the INT8 targets are stated. Every INT8 system calibrates on the same
  --calibration-batches batches (default 4), built like the case's inputs with other seeds
  (minilm: other real sentences from examples.sentences).

Contention case: --background-load N starts N busy processes (`python -c "while True: pass"`)
for the timed rounds of each case and stops them after (also on errors and Ctrl-C), to see how
each system degrades when its cores are shared (e.g. with a compiler busy on every core).

Setup (building, compiling, converting, quantizing, loading), the first call and the warm-up
calls are excluded from the samples but reported. A system that fails (in setup, warm-up or
timing) is recorded with its error and the run goes on with the others.

Usage (from the repository root):
  python benchmarks/run.py                       # all default cases, 30 rounds, 2 threads
  python benchmarks/run.py --cases resnet50-b1 bert-base-b1 --rounds 50
  python benchmarks/run.py --quick --rounds 2 --warmup 1 --name smoke
  python benchmarks/run.py --list
  python benchmarks/run.py --int8 --cases resnet50-b1    # + ipexconvert-int8 (or "unavailable")

OpenVINO peers (a separate venv keeps OpenVINO out of the project's .venv):
  python3.11 -m venv /tmp/ovvenv
  /tmp/ovvenv/bin/pip install torch==2.13.0 openvino nncf
  /tmp/ovvenv/bin/pip install -e ".[examples]"   # ipexconvert + example models (or PYTHONPATH=.)
  /tmp/ovvenv/bin/python benchmarks/run.py --peers openvino --int8 --cases resnet50-b1 --rounds 15

ONNX Runtime peers (optional packages, fine next to torch in .venv):
  .venv/bin/pip install onnxruntime onnx
  python benchmarks/run.py --peers onnxruntime --int8 --cases resnet50-b1 --rounds 15
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import datetime as dt
import gc
import hashlib
import json
import math
import multiprocessing
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO_ROOT / "benchmarks"
if str(REPO_ROOT) not in sys.path:  # so `python benchmarks/run.py` works without PYTHONPATH
    sys.path.insert(0, str(REPO_ROOT))
if str(BENCH_DIR) not in sys.path:  # benchmarks/peers/ (optional peer systems), imported lazily
    sys.path.insert(0, str(BENCH_DIR))

import ipexconvert  # noqa: E402  (before torch: ISA caps and the OpenMP spin count apply to every system here)
import torch  # noqa: E402
from ipexconvert.errors import UserInputError  # noqa: E402
from ipexconvert.examples import get_example  # noqa: E402
from ipexconvert.runtime.kernels import CHOOSING_CALLS  # noqa: E402
from timing import settle  # noqa: E402


# --------------------------------------------------------------------------------------------
# What is measured
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    name: str
    model: str  # an ipexconvert.examples name
    batch: int
    description: str


DEFAULT_CASES = [
    Case("resnet50-b1", "resnet50", 1, "ResNet-50, batch 1, 3x224x224"),
    Case("resnet50-b16", "resnet50", 16, "ResNet-50, batch 16, 3x224x224"),
    Case("bert-base-b1", "bert-base", 1, "BERT-base encoder, batch 1, seq 128"),
    Case("bert-base-b8", "bert-base", 8, "BERT-base encoder, batch 8, seq 128"),
    Case("minilm-b32", "minilm", 32, "all-MiniLM-L6-v2 sentence embeddings, batch 32, seq 128"),
]
QUICK_CASES = [
    Case("tiny-cnn-b1", "tiny-cnn", 1, "tiny ResNet, batch 1, 3x64x64 (smoke test)"),
    Case("tiny-bert-b1", "tiny-bert", 1, "2-layer 64-wide BERT, batch 1, seq 16 (smoke test)"),
]
ALL_CASES = {case.name: case for case in DEFAULT_CASES + QUICK_CASES}

BASE_SYSTEMS = ["eager-fp32", "eager-bf16", "compile-fp32", "compile-bf16", "ipexconvert-fp32", "ipexconvert-bf16"]
INT8_SYSTEMS = ["ipexconvert-int8"]  # --int8
PEER_SYSTEMS = {  # --peers NAME
    "openvino": ["openvino-fp32", "openvino-bf16", "openvino-int8"],
    "onnxruntime": ["onnxruntime-fp32", "onnxruntime-int8"],
}
SYSTEMS = BASE_SYSTEMS + INT8_SYSTEMS + [s for peer in PEER_SYSTEMS.values() for s in peer]  # canonical order
SYSTEM_DTYPE = {name: name.rsplit("-", 1)[1] for name in SYSTEMS}
BASELINE = {"fp32": "compile-fp32", "bf16": "compile-bf16"}  # ratios are against these, same dtype
INT8_BASELINE = "compile-bf16"  # no torch.compile INT8: INT8 systems (and targets) compare with bf16
CALIBRATION_SEED = 1000  # calibration batch i uses seed CALIBRATION_SEED + i (the cases' inputs use 0..2)
SYSTEM_METHOD = {
    "eager-fp32": "eager, torch.no_grad()",
    "eager-bf16": 'eager, torch.no_grad() + torch.autocast("cpu", dtype=torch.bfloat16)',
    "compile-fp32": "torch.compile(model), inductor freezing=True, torch.no_grad()",
    "compile-bf16": "torch.compile(model), inductor freezing=True, torch.no_grad() + bf16 autocast "
                    "(autocast + freezing, as PyTorch's Inductor CPU bf16 benchmarks do)",
    "ipexconvert-fp32": 'ipexconvert.optimize("example:NAME", dtype="fp32") -> load_artifact() -> model(**inputs)',
    "ipexconvert-bf16": 'ipexconvert.optimize("example:NAME", dtype="bf16") -> load_artifact() -> model(**inputs)',
    "ipexconvert-int8": 'ipexconvert.optimize("example:NAME", dtype="int8", calibration=[batches]) -> '
                        'load_artifact() -> model(**inputs)',
    "openvino-fp32": "openvino.convert_model(model, example_input=inputs), static shapes, compile_model(CPU, "
                     "INFERENCE_PRECISION_HINT=f32, INFERENCE_NUM_THREADS=threads, LATENCY, 1 stream)",
    "openvino-bf16": "openvino.convert_model(model, example_input=inputs), static shapes, compile_model(CPU, "
                     "INFERENCE_PRECISION_HINT=bf16, INFERENCE_NUM_THREADS=threads, LATENCY, 1 stream)",
    "openvino-int8": "openvino.convert_model -> nncf.quantize(calibration batches; TRANSFORMER model_type for "
                     "transformers) -> compile_model(CPU, precision hint for unquantized ops, threads, LATENCY, "
                     "1 stream)",
    "onnxruntime-fp32": "torch.onnx.export(model, kwargs=inputs, opset 17, dynamo=False), static shapes -> "
                        "InferenceSession(CPUExecutionProvider, intra_op_num_threads=threads, inter_op 1, "
                        "ORT_SEQUENTIAL, ORT_ENABLE_ALL)",
    "onnxruntime-int8": "torch.onnx.export -> quant_pre_process -> quantize_static(calibration batches, QDQ, "
                        "QUInt8 activations, QInt8 per-channel weights, MinMax; MatMul/Gemm for transformers) -> "
                        "InferenceSession(same options)",
}
SYSTEM_FLAG = {**{name: "--int8" for name in INT8_SYSTEMS},
               **{name: f"--peers {peer}" for peer, names in PEER_SYSTEMS.items() for name in names}}
TRANSFORMER_TASKS = {"hidden-states", "embedding", "causal-lm"}  # ExampleModel.task values quantized as transformers


@dataclass(frozen=True)
class Target:
    case: str
    dtype: str
    max_ratio: float  # ipexconvert median / torch.compile+freezing median, same dtype (int8: bf16), same run

    @property
    def label(self) -> str:
        if self.dtype == "int8":
            return f"{self.case} int8: ipexconvert int8 / torch.compile+freezing bf16 <= {self.max_ratio:.2f}"
        return f"{self.case} {self.dtype}: ipexconvert / torch.compile+freezing <= {self.max_ratio:.2f}"


TARGETS = [
    Target("resnet50-b1", "bf16", 0.55),
    Target("resnet50-b16", "bf16", 0.80),
    Target("resnet50-b1", "fp32", 0.70),
    Target("bert-base-b1", "bf16", 0.85),
    Target("bert-base-b1", "fp32", 0.90),
    # INT8 (issue 4): ratios to torch.compile+freezing bf16 in the same run.
    Target("resnet50-b1", "int8", 0.30),
    Target("resnet50-b16", "int8", 0.50),
    Target("bert-base-b1", "int8", 0.65),
]

# The variables that cap the ISA the libraries under ipexconvert and torch use (ipexconvert/isa_caps.py).
ISA_CAP_VARIABLES = ["IPEXCONVERT_MAX_ISA", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS"]
# Contention case (--background-load): one busy process each. PR_SET_PDEATHSIG makes the kernel
# kill it if the runner dies without its finally block (SIGKILL); the parent check closes the race
# of a runner that died before the prctl.
BACKGROUND_LOAD_CODE = (
    "import ctypes, os, signal, sys\n"
    "try:\n    ctypes.CDLL(None).prctl(1, signal.SIGKILL)\nexcept (OSError, AttributeError):\n    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n    sys.exit(0)\n"
    "while True: pass")

ISA_FLAGS = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
             "amx_tile", "amx_bf16", "amx_int8"]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Systems: each is prepared into a zero-argument callable that runs one inference
# --------------------------------------------------------------------------------------------

@dataclass
class SystemRun:
    name: str
    dtype: str
    method: str
    fn: Optional[Callable[[], Any]] = None
    setup_s: Optional[float] = None  # build / torch.compile wrap / convert + load
    convert_s: Optional[float] = None  # ipexconvert.optimize, None when the artifact came from the cache
    load_s: Optional[float] = None  # ipexconvert.load_artifact
    artifact: Optional[str] = None
    first_call_s: Optional[float] = None  # includes the torch.compile compilation
    warmup_s: Optional[float] = None
    cosine_vs_eager_fp32: Optional[float] = None
    samples_s: list[float] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # peer-specific: versions, effective settings, timings
    error: Optional[str] = None
    error_stage: Optional[str] = None
    unavailable: bool = False  # the system does not exist (yet) here: not a failure

    def fail(self, stage: str, exc: BaseException) -> None:
        self.error, self.error_stage, self.fn = f"{type(exc).__name__}: {exc}", stage, None
        log(f"    {self.name}: FAILED in {stage}: {self.error.splitlines()[0][:300]}")
        if os.environ.get("BENCH_DEBUG"):
            traceback.print_exc()

    def mark_unavailable(self, reason: str) -> None:
        self.error, self.error_stage, self.fn, self.unavailable = reason, "unavailable", None, True
        log(f"    {self.name}: unavailable: {reason.splitlines()[0][:300]}")


class SystemUnavailable(Exception):
    """Raised by prepare() for a system that cannot exist in this build (e.g. no int8 in ipexconvert yet)."""


def source_fingerprint() -> str:
    """Hash of the ipexconvert sources and torch version: a cached artifact is reused only if both match."""
    digest = hashlib.sha256(torch.__version__.encode())
    package = Path(ipexconvert.__file__).parent
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def calibration_fingerprint(batches: list[dict[str, torch.Tensor]]) -> str:
    """Hash of the calibration tensors: an int8 artifact is reused only for the same calibration data."""
    digest = hashlib.sha256()
    for batch in batches:
        for name, tensor in batch.items():
            digest.update(f"{name}:{tensor.dtype}:{list(tensor.shape)}".encode())
            digest.update(tensor.detach().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:10]


def artifact_for(model: str, dtype: str, cache_dir: Path, rebuild: bool,
                 calibration: Optional[list[dict[str, torch.Tensor]]] = None) -> tuple[Path, Optional[float]]:
    """Path of the converted artifact and the conversion time (None when it was cached).

    With calibration (int8), optimize() gets `calibration=` and the cache key includes its hash.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    tag = dtype if calibration is None else f"{dtype}-cal{calibration_fingerprint(calibration)}"
    path = cache_dir / f"{model}.{tag}.{source_fingerprint()}.ipxc"
    if path.is_file() and not rebuild:
        return path, None
    for stale in cache_dir.glob(f"{model}.{tag}.*.ipxc"):  # older code or torch: never reused
        stale.unlink()
    extra = {} if calibration is None else {"calibration": calibration}
    start = time.perf_counter()
    # In a child process: a deployment only loads an artifact, and what converting leaves in a process (the export's
    # and calibration's heap) slowed the timed calls after it (session 68: BERT-base b1 bf16 27.6 ms beside
    # OpenVINO's 26.0 in the run that converted it, 23.3 against 23.5 in the next one, which loaded it from the cache).
    child = multiprocessing.get_context("spawn").Process(target=convert_example, args=(model, dtype, path, extra))
    child.start()
    child.join()
    if child.exitcode != 0 or not path.is_file():
        raise RuntimeError(f"converting example:{model} to {dtype} failed in its child process (exit code "
                           f"{child.exitcode}; its output is above)")
    return path, time.perf_counter() - start


def convert_example(model: str, dtype: str, path: Path, extra: dict) -> None:
    """artifact_for's child process."""
    ipexconvert.optimize(f"example:{model}", dtype=dtype, output=path,
                         progress=lambda msg: log(f"      ipexconvert {dtype}: {msg}"), **extra)


def calibration_batches(case: Case, count: int) -> list[dict[str, torch.Tensor]]:
    """`count` input batches built like the case's inputs, but with other seeds (other data).

    Image models: other random images; BERT models: other random token ids (same padding
    pattern); minilm: other real sentences from ipexconvert.examples.sentences.SENTENCES.
    Shared by every INT8 system of the case (ipexconvert-int8 and openvino-int8).
    """
    from ipexconvert.examples import bert, resnet, tiny_bert, tiny_cnn

    seeds = [CALIBRATION_SEED + i for i in range(count)]
    if case.model in ("resnet50", "tiny-cnn"):
        size = resnet.IMAGE_SIZE if case.model == "resnet50" else tiny_cnn.IMAGE_SIZE
        return [resnet.image_inputs(case.batch, size, seed=seed) for seed in seeds]
    if case.model == "bert-base":
        return [bert.padded_token_inputs(case.batch, bert.SEQ_LEN, vocab_size=30522, seed=seed) for seed in seeds]
    if case.model == "tiny-bert":
        return [bert.padded_token_inputs(case.batch, tiny_bert.SEQ_LEN, vocab_size=tiny_bert.VOCAB_SIZE, seed=seed)
                for seed in seeds]
    if case.model == "minilm":
        from ipexconvert.examples import minilm

        batches = []
        for seed in seeds:
            order = torch.randperm(len(minilm.SENTENCES), generator=torch.Generator().manual_seed(seed)).tolist()
            sentences = [minilm.SENTENCES[order[i % len(order)]] for i in range(case.batch)]
            batches.append(minilm.tokenize(sentences, minilm.SEQ_LEN))
        return batches
    raise ValueError(f"no calibration data recipe for example model {case.model!r}")


def first_tensor(output: Any) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (list, tuple)) and output:
        return first_tensor(output[0])
    raise TypeError(f"cannot find a tensor in a {type(output).__name__} output")


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().float().flatten(), b.detach().float().flatten()
    return float(torch.nn.functional.cosine_similarity(a, b, dim=0))


def prepare(system: SystemRun, case: Case, eager_model: torch.nn.Module, inputs: dict[str, torch.Tensor],
            args: argparse.Namespace, calibration: Optional[list[dict[str, torch.Tensor]]] = None) -> None:
    """Fill system.fn (and its setup timings); raises on failure (SystemUnavailable: cannot exist here)."""
    start = time.perf_counter()
    name = system.name
    if name == "eager-fp32":
        def run():
            with torch.no_grad():
                return eager_model(**inputs)
    elif name == "eager-bf16":
        def run():
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                return eager_model(**inputs)
    elif name in ("compile-fp32", "compile-bf16"):
        import torch._inductor.config as inductor_config

        inductor_config.freezing = True
        compiled = torch.compile(copy.deepcopy(eager_model))  # own copy: freezing must not touch the others
        if name == "compile-fp32":
            def run():
                with torch.no_grad():
                    return compiled(**inputs)
        else:
            def run():
                with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                    return compiled(**inputs)
    elif name in ("ipexconvert-fp32", "ipexconvert-bf16", "ipexconvert-int8"):
        if system.dtype == "int8":
            if calibration is None:
                raise RuntimeError("no calibration batches for int8")
            try:
                path, system.convert_s = artifact_for(case.model, "int8", args.cache_dir, args.rebuild, calibration)
            except (TypeError, NotImplementedError, UserInputError) as exc:
                # The int8 API (dtype="int8", calibration=[...]) is not in this ipexconvert yet.
                raise SystemUnavailable(f'ipexconvert.optimize(dtype="int8", calibration=...) is not supported '
                                        f"by this ipexconvert ({type(exc).__name__}: {exc})") from exc
        else:
            path, system.convert_s = artifact_for(case.model, system.dtype, args.cache_dir, args.rebuild)
        system.artifact = str(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path)
        load_start = time.perf_counter()
        loaded = ipexconvert.load_artifact(path)
        system.load_s = time.perf_counter() - load_start
        # Match the artifact's declared input dtypes (bf16 artifacts still take float32 today).
        specs = {io.name: io.spec.dtype for io in loaded.signature.inputs}
        artifact_inputs = {k: v.to(getattr(torch, specs[k])) if v.is_floating_point() else v
                           for k, v in inputs.items()}

        def run():
            return loaded(**artifact_inputs)
    elif name.startswith("openvino-"):
        from peers import openvino_peer

        system.details["versions"] = openvino_peer.check_available(need_nncf=system.dtype == "int8")
        if system.dtype == "int8":
            if calibration is None:
                raise RuntimeError("no calibration batches for int8")
            transformer = get_example(case.model).task in TRANSFORMER_TASKS
            ov_model = openvino_peer.build_int8(eager_model, inputs, args.threads, calibration,
                                                transformer=transformer, precision=args.openvino_int8_precision)
            system.details.update(calibration_batches=len(calibration),
                                  nncf_model_type="TRANSFORMER" if transformer else "default")
        else:
            ov_model = openvino_peer.BUILDERS[system.dtype](eager_model, inputs, args.threads)
        system.details.update(precision_hint=ov_model.precision, effective=ov_model.properties,
                              **ov_model.timings_s)
        system.method += f" [effective: {ov_model.describe()}]"

        def run():
            return ov_model(**inputs)
    elif name.startswith("onnxruntime-"):
        from peers import onnxruntime_peer

        system.details["versions"] = onnxruntime_peer.check_available()
        if system.dtype == "int8":
            if calibration is None:
                raise RuntimeError("no calibration batches for int8")
            transformer = get_example(case.model).task in TRANSFORMER_TASKS
            ort_model = onnxruntime_peer.build_int8(eager_model, inputs, args.threads, calibration,
                                                    transformer=transformer,
                                                    reduce_range=args.onnxruntime_reduce_range)
        else:
            ort_model = onnxruntime_peer.BUILDERS[system.dtype](eager_model, inputs, args.threads)
        system.details.update(settings=ort_model.settings, effective=ort_model.effective, **ort_model.timings_s)
        system.method += f" [effective: {ort_model.describe()}]"

        def run():
            return ort_model(**inputs)
    else:
        raise ValueError(f"unknown system {name}")
    system.fn = run
    system.setup_s = time.perf_counter() - start


def warm_up(system: SystemRun, reference: Optional[torch.Tensor], warmup: int) -> None:
    start = time.perf_counter()
    output = system.fn()
    system.first_call_s = time.perf_counter() - start
    if reference is not None:
        system.cosine_vs_eager_fp32 = cosine(first_tensor(output), reference)
    start = time.perf_counter()
    for _ in range(warmup):
        system.fn()
    system.warmup_s = time.perf_counter() - start


def time_interleaved(systems: list[SystemRun], rounds: int) -> None:
    """Each round runs every live system once; the order rotates by one position every round."""
    gc.collect()
    for r in range(rounds):
        live = [s for s in systems if s.fn is not None]
        if not live:
            return
        shift = r % len(live)
        for system in live[shift:] + live[:shift]:
            try:
                settle(system.fn)  # the previous system's threads idle, this one warm (timing.py)
                start = time.perf_counter()
                system.fn()
                system.samples_s.append(time.perf_counter() - start)
            except Exception as exc:  # noqa: BLE001 - keep timing the others
                system.fail("timing", exc)
        if (r + 1) % 10 == 0 or r + 1 == rounds:
            log(f"    round {r + 1}/{rounds}")


def run_case(case: Case, system_names: list[str], args: argparse.Namespace) -> dict:
    log(f"\n== {case.name}: {case.description}")
    torch._dynamo.reset()  # a fresh compile cache per case: no recompiles, no dynamic-shape fallbacks
    example = get_example(case.model)
    systems = [SystemRun(name, SYSTEM_DTYPE[name], SYSTEM_METHOD[name]) for name in system_names]
    case_result: dict[str, Any] = {"case": case.name, "model": case.model, "batch": case.batch,
                                   "description": case.description}
    try:
        start = time.perf_counter()
        eager_model = example.build().eval()
        inputs = example.example_inputs(case.batch)
        case_result["build_s"] = time.perf_counter() - start
        case_result["inputs"] = {k: f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}" for k, v in inputs.items()}
        with torch.no_grad():
            reference = first_tensor(eager_model(**inputs)).float()
    except Exception as exc:  # noqa: BLE001 - the model itself cannot be built: every system fails
        for system in systems:
            system.fail("build", exc)
        case_result["systems"] = {s.name: summarize(s, case.batch) for s in systems}
        return case_result

    calibration = None
    int8_systems = [s for s in systems if s.dtype == "int8"]
    if int8_systems:
        try:
            start = time.perf_counter()
            calibration = calibration_batches(case, args.calibration_batches)
            case_result["calibration"] = {
                "batches": len(calibration), "seeds": [CALIBRATION_SEED + i for i in range(len(calibration))],
                "build_s": time.perf_counter() - start, "fingerprint": calibration_fingerprint(calibration)}
        except Exception as exc:  # noqa: BLE001 - only the int8 systems need it
            for system in int8_systems:
                system.fail("calibration data", exc)

    for system in systems:
        if system.error:  # already failed (calibration data)
            continue
        log(f"  preparing {system.name}")
        try:
            prepare(system, case, eager_model, inputs, args, calibration)
        except SystemUnavailable as exc:
            system.mark_unavailable(str(exc))
            continue
        except Exception as exc:  # noqa: BLE001
            system.fail("setup", exc)
            continue
        try:
            # ours: at least the calls its layers may spend choosing their kernels (runtime.kernels.CHOOSING_CALLS)
            warm_up(system, reference, max(args.warmup, CHOOSING_CALLS) if system.name.startswith("ipexconvert-")
                    else args.warmup)
            log(f"    setup {system.setup_s:.1f}s, first call {system.first_call_s:.2f}s, "
                f"cosine vs eager fp32 {system.cosine_vs_eager_fp32:.6f}")
        except Exception as exc:  # noqa: BLE001
            system.fail("first call / warm-up", exc)

    log(f"  timing {args.rounds} interleaved rounds")
    with background_load(args.background_load) as load:
        time_interleaved(systems, args.rounds)
    if args.background_load:
        case_result["background_load"] = load

    results = {s.name: summarize(s, case.batch) for s in systems}

    def ratio(result: dict, baseline_name: Optional[str]) -> Optional[float]:
        baseline = results.get(baseline_name) if baseline_name else None
        if result.get("median_ms") is not None and baseline and baseline.get("median_ms"):
            return result["median_ms"] / baseline["median_ms"]
        return None

    for name, result in results.items():
        dtype = SYSTEM_DTYPE[name]
        result["ratio_vs_compile_same_dtype"] = ratio(result, BASELINE.get(dtype))  # None for int8
        if dtype in ("bf16", "int8"):  # the INT8 targets are stated against torch.compile+freezing bf16
            result["ratio_vs_compile_bf16"] = ratio(result, INT8_BASELINE)
    case_result["systems"] = results
    del systems, eager_model, calibration
    torch._dynamo.reset()
    gc.collect()
    return case_result


@contextlib.contextmanager
def background_load(count: int, settle_s: float = 0.5):
    """`count` busy processes for the duration of the block; they are stopped however the block ends.

    Yields a dict that records them (pids, and how many were still running at the end: a load
    process that died early means the rounds after it ran on a less loaded machine).
    """
    record: dict[str, Any] = {"processes": count, "pids": [], "running_at_end": None}
    processes: list[subprocess.Popen] = []
    try:
        for _ in range(count):
            processes.append(subprocess.Popen([sys.executable, "-c", BACKGROUND_LOAD_CODE, str(os.getpid())],
                                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))
        record["pids"] = [p.pid for p in processes]
        if processes:
            log(f"    background load: {count} busy process(es) {record['pids']}")
            time.sleep(settle_s)  # let them start spinning before the first timed call
        yield record
        record["running_at_end"] = sum(p.poll() is None for p in processes)
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if processes:
            ended = record["running_at_end"]
            log("    background load stopped " + (f"({ended} of {count} were running at the end)" if ended is not None
                                                  else "(the timed rounds were interrupted)"))


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def summarize(system: SystemRun, batch: int) -> dict:
    samples_ms = [s * 1e3 for s in system.samples_s]
    result: dict[str, Any] = {"dtype": system.dtype, "method": system.method, "samples_ms": samples_ms,
                              "median_ms": None, "p90_ms": None, "min_ms": None, "items_per_s": None}
    if samples_ms:
        median = statistics.median(samples_ms)
        result.update(median_ms=median, p90_ms=percentile(samples_ms, 90), min_ms=min(samples_ms),
                      items_per_s=batch / (median / 1e3))
    result.update(setup_s=system.setup_s, first_call_s=system.first_call_s, warmup_s=system.warmup_s,
                  cosine_vs_eager_fp32=system.cosine_vs_eager_fp32)
    if system.name.startswith("ipexconvert"):
        result.update(artifact=system.artifact, convert_s=system.convert_s, load_s=system.load_s,
                      artifact_cached=system.convert_s is None and system.artifact is not None)
    if system.details:
        result["details"] = system.details
    # A system that failed mid-timing keeps its samples but its numbers are flagged by the error.
    result.update(error=system.error, error_stage=system.error_stage, unavailable=system.unavailable)
    return result


# --------------------------------------------------------------------------------------------
# Machine description, targets, reports
# --------------------------------------------------------------------------------------------

def machine_info(threads: int) -> dict:
    from ipexconvert.backends.cpu import isa as cpu

    try:
        selected = cpu.selected_isa()
    except Exception as exc:  # noqa: BLE001 - e.g. a bad IPEXCONVERT_MAX_ISA
        selected = f"error: {exc}"
    flags = cpu.cpu_flags()
    return {
        "cpu_model": cpu.cpu_model(),
        "cpu_class": cpu_class(selected),
        "logical_cpus": os.cpu_count(),
        "isa_flags": {flag: flag in flags for flag in ISA_FLAGS},
        "ipexconvert_selected_isa": selected,
        "torch_version": torch.__version__,
        "ipexconvert_version": ipexconvert.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "threads": threads,
        "torch_num_threads": torch.get_num_threads(),
        "env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "KMP_AFFINITY", "IPEXCONVERT_MAX_ISA",
                                           "LD_PRELOAD", "PYTHONPATH") if k in os.environ},
    }


def cpu_class(selected: str) -> dict:
    """The CPU's class: best ISA level it supports, vendor, and the caps in force (ipexconvert's and the libraries')."""
    from ipexconvert.backends.cpu import isa_caps
    from ipexconvert.backends.cpu import isa as cpu

    try:
        best = cpu.supported_levels()[-1]
    except Exception as exc:  # noqa: BLE001 - the record must not fail the run
        best = f"error: {exc}"
    caps = {name: os.environ[name] for name in ISA_CAP_VARIABLES if os.environ.get(name)}
    return {
        "label": best,
        "vendor": cpu.cpu_vendor(),
        "ipexconvert_selected_isa": selected,
        "caps": caps,  # empty: uncapped
        # "set": ipexconvert wrote it from IPEXCONVERT_MAX_ISA at import; "user": it was set already
        "caps_source": {name: how for name, (how, _) in isa_caps.applied.items()},
    }


def cpu_class_line(machine: dict) -> str:
    """One markdown line: e.g. `amx (GenuineIntel), uncapped` or `... capped by IPEXCONVERT_MAX_ISA=avx2, ...`."""
    record = machine.get("cpu_class")
    if not record:
        return "unknown (older results file)"
    caps = record.get("caps") or {}
    effective = ("capped by " + ", ".join(f"{k}={v}" for k, v in caps.items())) if caps else "uncapped"
    selected = record["ipexconvert_selected_isa"]
    return (f"`{record['label']}` ({record['vendor']}), {effective}; ipexconvert runs `{selected}`"
            f" (the caps bind ipexconvert, torch's ATen, oneDNN and MKL; the peers pick their kernels themselves)")


def git_info() -> dict:
    def git(*cmd: str) -> Optional[str]:
        try:
            return subprocess.run(["git", *cmd], cwd=REPO_ROOT, capture_output=True, text=True,
                                  timeout=10, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    status = git("status", "--porcelain")
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None else None}


def evaluate_targets(cases: list[dict]) -> list[dict]:
    by_name = {c["case"]: c for c in cases}
    rows = []
    for target in TARGETS:
        row = {"case": target.case, "dtype": target.dtype, "max_ratio": target.max_ratio, "label": target.label,
               "ratio": None, "status": "not measured"}
        result = by_name.get(target.case, {}).get("systems", {}).get(f"ipexconvert-{target.dtype}")
        key = "ratio_vs_compile_bf16" if target.dtype == "int8" else "ratio_vs_compile_same_dtype"
        if result is not None and result.get(key) is not None:
            row["ratio"] = result[key]
            row["status"] = "met" if row["ratio"] <= target.max_ratio else "not met"
        elif result is not None and result.get("unavailable"):
            row["status"] = "unavailable"
        rows.append(row)
    return rows


def fmt(value: Optional[float], spec: str = ".2f", missing: str = "–") -> str:
    return missing if value is None else format(value, spec)


def markdown_report(report: dict, chart_note: str) -> str:
    machine, settings = report["machine"], report["settings"]
    flags = ", ".join(f for f, on in machine["isa_flags"].items() if on) or "none"
    lines = [
        f"# Benchmark `{report['name']}`",
        "",
        "Produced by:",
        "",
        "```bash",
        report["command"],
        "```",
        "",
        f"- date: {report['date']}",
        f"- git: {report['git']['commit']}{' (dirty tree)' if report['git']['dirty'] else ''}",
        f"- CPU: {machine['cpu_model']} ({machine['logical_cpus']} logical CPUs); ISA flags: {flags}",
        f"- CPU class: {cpu_class_line(machine)}",
        f"- ipexconvert selected ISA: {machine['ipexconvert_selected_isa']}; ipexconvert {machine['ipexconvert_version']}, "
        f"torch {machine['torch_version']}, Python {machine['python']}",
        f"- threads: {settings['threads']} (torch.get_num_threads() = {machine['torch_num_threads']}); "
        f"{settings['rounds']} interleaved rounds after {settings['warmup']} warm-up calls per system "
        f"(ipexconvert at least {CHOOSING_CALLS}: its layers may choose their kernels in their first calls)",
        f"- torch.compile: {settings['compile']}; bf16: {settings['compile_bf16']}",
        f"- ipexconvert: {settings['ipexconvert']}",
    ]
    if settings.get("openvino"):
        versions = ", ".join(f"{k} {v}" for k, v in machine.get("peer_versions", {}).items()
                             if k in ("openvino", "nncf"))
        lines.append(f"- OpenVINO peers ({versions}): {settings['openvino']}")
    if settings.get("onnxruntime"):
        versions = ", ".join(f"{k} {v}" for k, v in machine.get("peer_versions", {}).items()
                             if k in ("onnxruntime", "onnx"))
        lines.append(f"- ONNX Runtime peers ({versions}): {settings['onnxruntime']}")
    if settings.get("calibration"):
        lines.append(f"- INT8 calibration: {settings['calibration']}")
    if settings.get("openmp_wait"):
        lines.append(f"- OpenMP wait (every system in this process): {settings['openmp_wait']}")
    if settings.get("background_load"):
        lines.append(f"- **contention case**: {settings['background_load']} busy background processes "
                     f"(`python -c \"while True: pass\"`) ran during the timed rounds of every case; "
                     f"the latencies are those of a shared machine, not an idle one")
    lines += [
        "",
        "Ratio = median / median of torch.compile+freezing of the same dtype, measured in this run "
        "(lower is better). Setup, first call (compilation) and warm-up are excluded from the samples.",
    ]
    if any(SYSTEM_DTYPE.get(n) == "int8" for c in report["cases"] for n in c["systems"]):
        lines.append("INT8 systems have no torch.compile INT8 counterpart: they are compared with torch.compile+"
                     "freezing **bf16** (column \"ratio vs compile bf16\", which also shows the bf16 rows), "
                     "the baseline the INT8 targets are stated against.")
    lines += [
        "",
        "## Targets",
        "",
        "| target | ratio | status |",
        "| --- | ---: | --- |",
    ]
    for row in report["targets"]:
        lines.append(f"| {row['label']} | {fmt(row['ratio'], '.3f')} | {row['status']} |")

    lines += ["", "## Results", ""]
    for case in report["cases"]:
        lines += [f"### {case['case']}: {case['description']}", ""]
        if case.get("inputs"):
            lines += ["inputs: " + ", ".join(f"`{k}: {v}`" for k, v in case["inputs"].items()), ""]
        has_int8 = any(SYSTEM_DTYPE.get(n) == "int8" for n in case["systems"])
        bf16_header, bf16_align = (" ratio vs compile bf16 |", " ---: |") if has_int8 else ("", "")
        lines += ["| system | median ms | p90 ms | ratio vs compile (same dtype) |" + bf16_header +
                  " items/s | setup s | first call s | cosine vs eager fp32 | note |",
                  "| --- | ---: | ---: | ---: |" + bf16_align + " ---: | ---: | ---: | ---: | --- |"]
        for name, r in case["systems"].items():
            note = ""
            if r.get("unavailable"):
                note = f"*unavailable*: {r['error'].splitlines()[0][:200]}".replace("|", "\\|")
            elif r.get("error"):
                note = f"**failed in {r['error_stage']}**: {r['error'].splitlines()[0][:200]}".replace("|", "\\|")
            elif name.startswith("ipexconvert"):
                note = "artifact cached" if r.get("artifact_cached") else f"converted in {fmt(r.get('convert_s'), '.1f')} s"
                note += f", loaded in {fmt(r.get('load_s'), '.2f')} s"
            elif name.startswith("openvino"):
                note = openvino_note(r.get("details") or {})
            elif name.startswith("onnxruntime"):
                note = onnxruntime_note(r.get("details") or {})
            bf16_cell = f" {fmt(r.get('ratio_vs_compile_bf16'), '.3f')} |" if has_int8 else ""
            lines.append(f"| {name} | {fmt(r['median_ms'])} | {fmt(r['p90_ms'])} | "
                         f"{fmt(r.get('ratio_vs_compile_same_dtype'), '.3f')} |{bf16_cell} {fmt(r['items_per_s'], '.1f')} | "
                         f"{fmt(r['setup_s'], '.1f')} | {fmt(r['first_call_s'], '.2f')} | "
                         f"{fmt(r['cosine_vs_eager_fp32'], '.6f')} | {note} |")
        load = case.get("background_load")
        if load and load.get("running_at_end") is not None and load["running_at_end"] < load["processes"]:
            lines.append(f"Background load: only {load['running_at_end']} of {load['processes']} processes were "
                         f"still running at the end of the timed rounds.")
        lines.append("")
    lines += ["## Chart", "", chart_note, ""]
    return "\n".join(lines)


def openvino_note(details: dict) -> str:
    """Markdown note of an OpenVINO row: the effective settings and where its setup time went."""
    effective = details.get("effective", {})
    asked = details.get("precision_hint")
    ran = effective.get("INFERENCE_PRECISION_HINT")
    # What the compiled model reports, which may differ from the hint (bf16 runs f32 without bf16 support).
    what = f"NNCF INT8, other ops {ran or '?'}" if details.get("calibration_batches") else (ran or "?")
    ran_as = f"**ran as {what}**" + (f" (asked {asked})" if asked and ran and asked != ran else "")
    parts = [ran_as, f"{effective.get('INFERENCE_NUM_THREADS', '?')} threads"]
    if details.get("calibration_batches"):
        parts.append(f"{details['calibration_batches']} calibration batches, NNCF model_type "
                     f"{details.get('nncf_model_type')}")
    steps = [(k.removesuffix("_s"), details[k]) for k in ("convert_s", "quantize_s", "compile_s") if k in details]
    if steps:
        parts.append(", ".join(f"{step} {fmt(value, '.1f')} s" for step, value in steps))
    return "; ".join(parts)


def onnxruntime_note(details: dict) -> str:
    """Markdown note of an ONNX Runtime row: what it ran (providers, quantization) and its setup time."""
    effective, settings = details.get("effective", {}), details.get("settings", {})
    providers = ",".join(effective.get("providers", ["?"]))
    quant = settings.get("quantization")
    if quant:
        ops = quant.get("op_types_to_quantize")
        ops = "+".join(ops) if isinstance(ops, list) else "default ops"
        qdq = quant.get("qdq_nodes", {})
        ran_as = (f"**ran as QDQ INT8** (U8 act., S8 per-channel weights, {ops}, reduce_range "
                  f"{quant.get('reduce_range')}, {qdq.get('QuantizeLinear', '?')} QuantizeLinear; "
                  f"{quant.get('calibration_batches')} calibration batches)")
    else:
        ran_as = "**ran as fp32**"
    parts = [f"{ran_as} on {providers}", f"{effective.get('intra_op_num_threads', '?')} threads",
             f"{settings.get('exporter', '?')}, opset {settings.get('opset', '?')}"]
    steps = [(k.removesuffix("_s"), details[k]) for k in ("export_s", "pre_process_s", "quantize_s", "session_s")
             if k in details]
    if steps:
        parts.append(", ".join(f"{step} {fmt(value, '.1f')} s" for step, value in steps))
    return "; ".join(parts)


def bar_chart(report: dict, path: Path) -> str:
    """Write a PNG of the medians per case; returns the markdown note about it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "No chart: matplotlib is not installed in this environment (the runner does not install it)."
    try:
        cases = [c for c in report["cases"] if any(r["median_ms"] for r in c["systems"].values())]
        if not cases:
            return "No chart: no system produced samples."
        colors = {"eager": "#9e9e9e", "compile": "#ee7733", "ipexconvert": "#0077bb", "openvino": "#009988",
                  "onnxruntime": "#cc3311"}
        fig, axes = plt.subplots(1, len(cases), figsize=(4.2 * len(cases), 4.2), squeeze=False)
        for ax, case in zip(axes[0], cases):
            names = [n for n, r in case["systems"].items() if r["median_ms"]]
            medians = [case["systems"][n]["median_ms"] for n in names]
            bars = ax.bar(range(len(names)), medians, color=[colors[n.split("-")[0]] for n in names])
            for bar, name in zip(bars, names):
                if name.endswith("bf16"):
                    bar.set_hatch("//")
                elif name.endswith("int8"):
                    bar.set_hatch("xx")
            ax.set_xticks(range(len(names)))
            ax.set_xticklabels(names, rotation=45, ha="right", fontsize=8)
            ax.set_title(case["case"], fontsize=10)
            ax.set_ylabel("median latency (ms)")
        fig.suptitle(f"{report['name']}: {report['machine']['cpu_model']}, {report['settings']['threads']} threads",
                     fontsize=10)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
    except Exception as exc:  # noqa: BLE001 - a chart is never worth losing the results over
        return f"No chart: drawing it failed ({type(exc).__name__}: {exc})."
    return f"![median latency per case]({path.name})"


def console_summary(report: dict) -> str:
    lines = []
    for case in report["cases"]:
        lines.append(f"{case['case']} ({case['description']})")
        for name, r in case["systems"].items():
            if r.get("unavailable"):
                lines.append(f"  {name:18s} unavailable: {r['error'].splitlines()[0][:120]}")
            elif r.get("error") and r["median_ms"] is None:
                lines.append(f"  {name:18s} FAILED ({r['error_stage']}): {r['error'].splitlines()[0][:120]}")
            else:
                line = (f"  {name:18s} median {fmt(r['median_ms']):>9s} ms  p90 {fmt(r['p90_ms']):>9s} ms  "
                        f"ratio {fmt(r.get('ratio_vs_compile_same_dtype'), '.3f'):>6s}")
                if SYSTEM_DTYPE.get(name) == "int8":
                    line += f"  ratio vs compile-bf16 {fmt(r.get('ratio_vs_compile_bf16'), '.3f')}"
                lines.append(line)
    lines.append("targets:")
    for row in report["targets"]:
        lines.append(f"  {row['label']}: {fmt(row['ratio'], '.3f')} -> {row['status']}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------

def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Time eager PyTorch, torch.compile+freezing and ipexconvert artifacts (fp32 and bf16; int8 "
                    "with --int8) and optional peers (--peers openvino onnxruntime) side by side, in interleaved "
                    "rounds, in one process.")
    parser.add_argument("--cases", nargs="+", metavar="CASE",
                        help=f"cases to run (default: {' '.join(c.name for c in DEFAULT_CASES)}); "
                             f"also: {' '.join(c.name for c in QUICK_CASES)}")
    parser.add_argument("--quick", action="store_true", help="run only the tiny models (tiny-cnn, tiny-bert)")
    parser.add_argument("--systems", nargs="+", metavar="SYSTEM", choices=SYSTEMS,
                        help=f"systems to time (default: {' '.join(BASE_SYSTEMS)}, plus those of --int8 and "
                             f"--peers); naming an optional one here turns it on")
    parser.add_argument("--peers", nargs="+", metavar="PEER", choices=sorted(PEER_SYSTEMS), default=[],
                        help="also time other inference stacks: openvino (openvino-fp32/bf16/int8; needs the "
                             "openvino and nncf packages, see benchmarks/peers/openvino_peer.py), onnxruntime "
                             "(onnxruntime-fp32/int8; needs onnxruntime and onnx, see "
                             "benchmarks/peers/onnxruntime_peer.py)")
    parser.add_argument("--int8", action="store_true",
                        help='also time ipexconvert-int8 (optimize(dtype="int8", calibration=...)); reported as '
                             "unavailable while ipexconvert has no int8 conversion")
    parser.add_argument("--calibration-batches", type=int, default=4,
                        help="calibration batches for the INT8 systems, built like the case's inputs with other "
                             "seeds (default 4)")
    parser.add_argument("--openvino-int8-precision", choices=["bf16", "f32"], default=None,
                        help="OpenVINO INFERENCE_PRECISION_HINT for the ops NNCF leaves unquantized (default bf16; "
                             "f32 below avx512_bf16, capped or not: OpenVINO reads the ONEDNN_MAX_CPU_ISA a cap "
                             "sets, and its bf16 Softmax then fails to compile)")
    parser.add_argument("--onnxruntime-reduce-range", action="store_true",
                        help="onnxruntime-int8: quantize weights to 7 bits (reduce_range=True). ORT's docs advise it "
                             "on x86 CPUs without VNNI, where its u8 x s8 kernels may saturate; default off")
    parser.add_argument("--background-load", type=int, default=0, metavar="N",
                        help="contention case: run N busy processes (python -c 'while True: pass') during the "
                             "timed rounds of every case (default 0); they are stopped at the end, also on errors")
    parser.add_argument("--rounds", type=int, default=30, help="interleaved timed rounds (default 30)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls per system after the first (default 5)")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    parser.add_argument("--name", help="results file stem (default: date-time)")
    parser.add_argument("--out-dir", type=Path, default=BENCH_DIR / "results", help="where results go")
    parser.add_argument("--cache-dir", type=Path, default=BENCH_DIR / ".cache", help="where artifacts are cached")
    parser.add_argument("--rebuild", action="store_true", help="re-convert artifacts even if cached")
    parser.add_argument("--list", action="store_true", help="list cases and systems, then exit")
    args = parser.parse_args(argv)
    if args.quick and args.cases:
        parser.error("--quick and --cases are exclusive")
    unknown = [c for c in args.cases or [] if c not in ALL_CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(ALL_CASES)}")
    if args.rounds < 1 or args.warmup < 0 or args.threads < 1:
        parser.error("--rounds and --threads must be >= 1, --warmup >= 0")
    if args.calibration_batches < 1:
        parser.error("--calibration-batches must be >= 1")
    if args.background_load < 0:
        parser.error("--background-load must be >= 0")
    if args.openvino_int8_precision is None:  # what our own bf16 parts compute in at the selected level
        from ipexconvert.backends.cpu import compute_precision
        from ipexconvert.backends.cpu import isa as cpu
        native_bf16 = compute_precision.bf16_compute_dtype(cpu.selected_isa()) == "bfloat16"
        args.openvino_int8_precision = "bf16" if native_bf16 else "f32"
    return args


def selected_systems(args: argparse.Namespace) -> list[str]:
    """--systems if given (optional systems named there are on), else the base systems + --int8 + --peers."""
    if args.systems:
        return [s for s in SYSTEMS if s in args.systems]  # canonical order
    enabled = set(BASE_SYSTEMS) | (set(INT8_SYSTEMS) if args.int8 else set())
    for peer in args.peers:
        enabled |= set(PEER_SYSTEMS[peer])
    return [s for s in SYSTEMS if s in enabled]


def check_peers(systems: list[str]) -> dict[str, str]:
    """Versions of the peer stacks the selected systems need; raises PeerUnavailable (install hint) if missing."""
    versions: dict[str, str] = {}
    openvino_systems = [s for s in systems if s in PEER_SYSTEMS["openvino"]]
    if openvino_systems:
        from peers import openvino_peer

        versions.update(openvino_peer.check_available(need_nncf="openvino-int8" in openvino_systems))
    if any(s in PEER_SYSTEMS["onnxruntime"] for s in systems):
        from peers import onnxruntime_peer

        versions.update(onnxruntime_peer.check_available())
    return versions


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    if args.list:
        for case in DEFAULT_CASES + QUICK_CASES:
            print(f"{case.name:14s} {case.description}")
        for name in SYSTEMS:
            flag = f" [{SYSTEM_FLAG[name]}]" if name in SYSTEM_FLAG else ""
            print(f"{name:18s} {SYSTEM_METHOD[name]}{flag}")
        return 0

    cases = QUICK_CASES if args.quick else [ALL_CASES[c] for c in args.cases] if args.cases else DEFAULT_CASES
    systems = selected_systems(args)
    try:
        peer_versions = check_peers(systems)
    except Exception as exc:  # noqa: BLE001 - PeerUnavailable: say how to install, before any slow work
        print(f"error: {exc}", file=sys.stderr)
        return 2
    name = args.name or dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    torch.set_num_threads(args.threads)
    started = dt.datetime.now(dt.timezone.utc)

    case_results = [run_case(case, systems, args) for case in cases]

    machine = machine_info(args.threads)
    if peer_versions:
        machine["peer_versions"] = peer_versions
    report = {
        "name": name,
        "command": shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv])),
        "cwd": os.getcwd(),
        "date": started.isoformat(timespec="seconds"),
        "duration_s": (dt.datetime.now(dt.timezone.utc) - started).total_seconds(),
        "git": git_info(),
        "machine": machine,
        "settings": {
            "rounds": args.rounds, "warmup": args.warmup, "threads": args.threads,
            "cases": [c.name for c in cases], "systems": systems,
            "order": "interleaved: every round runs each system once, the order rotating by one per round",
            "statistic": "median and nearest-rank p90 of per-call wall time (time.perf_counter)",
            "compile": "torch.compile(model) (default mode, inductor), torch._inductor.config.freezing=True, "
                       "under torch.no_grad(); torch._dynamo.reset() between cases",
            "compile_bf16": "bf16 autocast + freezing (torch.autocast('cpu', dtype=torch.bfloat16)), "
                            "as PyTorch's Inductor CPU bf16 benchmarks run it; model weights are not cast",
            "ipexconvert": "default conversion of example:NAME (dynamic batch/seq dims), one artifact per model "
                           "and dtype (int8: and calibration data), cached in benchmarks/.cache/ keyed by a hash of "
                           "the ipexconvert sources",
            "peers": args.peers,
            "int8": "ipexconvert-int8" in systems,
        },
        "cases": case_results,
    }
    if any(s.startswith("openvino-") for s in systems):
        report["settings"]["openvino"] = (
            f"openvino.convert_model(eager model, example_input=inputs), reshaped to the case's static shapes; "
            f"Core().compile_model(CPU) with INFERENCE_NUM_THREADS={args.threads}, PERFORMANCE_HINT=LATENCY, "
            f"NUM_STREAMS=1, INFERENCE_PRECISION_HINT f32 / bf16; int8: nncf.quantize (TRANSFORMER model_type for "
            f"transformers) with precision hint {args.openvino_int8_precision} for the unquantized ops")
        report["settings"]["openvino_int8_precision"] = args.openvino_int8_precision
    if any(s.startswith("onnxruntime-") for s in systems):
        report["settings"]["onnxruntime"] = (
            f"torch.onnx.export(eager model, kwargs=inputs, opset 17, TorchScript exporter (dynamo=False)), static "
            f"shapes; InferenceSession(CPUExecutionProvider) with intra_op_num_threads={args.threads}, "
            f"inter_op_num_threads=1, ORT_SEQUENTIAL, ORT_ENABLE_ALL; int8: quant_pre_process, then quantize_static "
            f"(QDQ, QUInt8 activations, QInt8 per-channel weights, MinMax calibration, "
            f"reduce_range={args.onnxruntime_reduce_range}; MatMul/Gemm only for transformers, ORT's default op "
            f"types otherwise)")
        report["settings"]["onnxruntime_reduce_range"] = args.onnxruntime_reduce_range
    report["settings"]["background_load"] = args.background_load
    report["settings"]["openmp_wait"] = ipexconvert.backends.cpu.openmp_wait.state
    if args.background_load:
        report["settings"]["background_load_command"] = (
            f"{args.background_load} x python -c 'while True: pass' (killed with the runner), "
            f"started before and stopped after the timed rounds of each case")
    if any(SYSTEM_DTYPE[s] == "int8" for s in systems):
        report["settings"]["calibration"] = (
            f"{args.calibration_batches} batches per case, the case's batch size, built like its inputs with seeds "
            f"{CALIBRATION_SEED}..{CALIBRATION_SEED + args.calibration_batches - 1} (minilm: other real sentences); "
            f"the same batches for every INT8 system; INT8 ratios are against {INT8_BASELINE}")
        report["settings"]["calibration_batches"] = args.calibration_batches
    report["targets"] = evaluate_targets(case_results)

    args.out_dir.mkdir(parents=True, exist_ok=True)
    json_path = args.out_dir / f"{name}.json"
    md_path = args.out_dir / f"{name}.md"
    png_path = args.out_dir / f"{name}.png"
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    chart_note = bar_chart(report, png_path)
    md_path.write_text(markdown_report(report, chart_note))

    print(console_summary(report))
    written = [json_path, md_path] + ([png_path] if png_path.is_file() and chart_note.startswith("![") else [])
    print("wrote " + ", ".join(str(p) for p in written))
    if not chart_note.startswith("!["):
        print(chart_note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
