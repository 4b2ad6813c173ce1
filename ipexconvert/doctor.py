"""`ipexconvert doctor`: versions, CPU features and the ISA the runtime selects."""
from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from importlib import import_module

import torch

from . import __version__, environment
from .backends.cpu import compute_precision, native_lib, openmp_wait, thread_placement
from .backends.cpu import isa as cpu


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _onednn_summary(report: dict) -> dict:
    """torch's oneDNN/MKL operators, one line each, from the self-check's torch_ops report."""
    def summary(info: dict) -> str:
        if info.get("not_used"):
            return info["not_used"]
        if info.get("found") and info.get("passed") and all(info["passed"].values()):
            return "ok"
        return f"unusable: {info.get('error') or 'failed check'}"

    return {name: summary(info) for name, info in report.get("ops", {}).items()}


def _native_report() -> dict:
    """The native kernel library: the levels it detects, and the build each kernel runs now."""
    if not native_lib.available():
        return {"native_levels": None,
                "kernels": f"no native kernels: the native extension is not built ({native_lib.unavailable_reason()}); "
                           "`ipexconvert doctor --kernels` lists what runs"}
    return {"native_levels": native_lib.supported_levels(),
            "native_kernels": {name: native_lib.kernel_level(name) for name in native_lib.kernel_names()},
            "kernels": "`ipexconvert doctor --kernels` lists every op's kernels and which of them run here"}


def _malloc_report() -> dict:
    """What loading an artifact does (or did) to the process's malloc settings."""
    from .backends.cpu import malloc

    done = malloc.current()
    if done.state != "not yet":
        return done.model_dump()
    skip = malloc.reason_to_skip(os.environ)
    return {"state": "skipped" if skip else "at load",
            "detail": skip or f"mmap threshold {malloc.MMAP_THRESHOLD >> 20} MiB, trim threshold "
                              f"{malloc.TRIM_THRESHOLD >> 30} GiB (IPEXCONVERT_MALLOC_TUNING=0 turns it off)"}


def _int8_compute(isa: str) -> str:
    """Which kernels run int8 layers at this level (decided once per process, not per command)."""
    from .backends.cpu.kernels._torch_onednn import int8_allowed

    if int8_allowed(isa):
        return f"oneDNN int8 (VNNI or AMX: {isa})"
    if cpu.ISA_LEVELS.index(isa) >= cpu.ISA_LEVELS.index("avx2") and native_lib.available():
        return (f"native exact int8 GEMM ({isa}: no VNNI, so oneDNN's u8*s8 products would saturate; "
                "int16 products summed in int32 instead)")
    return "reference (float32 PyTorch ops)"


def _library_caps() -> dict:
    """The ISA ceiling each library we drive was given (isa_caps sets them from IPEXCONVERT_MAX_ISA)."""
    from .backends.cpu import isa_caps

    names = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
    return {name: (f"{isa_caps.applied[name][1]} (from IPEXCONVERT_MAX_ISA)" if isa_caps.applied.get(name, ("",))[0] == "set"
                   else os.environ.get(name) or "unset") for name in names}


def environment_report() -> dict:
    from .backends.cpu import self_check

    checks = self_check.report()  # runs both one-time checks, so the report says how they went
    interesting = sorted(f for f in cpu.cpu_flags() if f.startswith(("avx", "amx", "fma", "f16c")))
    return {
        "ipexconvert": __version__,
        "python": platform.python_version(),
        "versions": {"torch": torch.__version__,  # the build's own (2.11.0+cu130), which package metadata may shorten
                     **{p: _version(p) for p in ("onednn-cpu-gomp", "safetensors", "pydantic", "typer", "transformers", "onnx")}},
        "cpu": cpu.cpu_model(),
        "cpu_flags": interesting,
        "amx_os_permission": cpu.amx_permission(),
        "supported_isa": cpu.supported_levels(),
        "max_isa_env": environment.get("IPEXCONVERT_MAX_ISA") or "unset",
        "selected_isa": cpu.selected_isa(),
        "isa_detection": "native (CPUID + XCR0)" if cpu.detection() == "native" else "python (/proc/cpuinfo)",
        **_native_report(),
        "direct_onednn": checks["onednn_direct"],
        "onednn_probe": _onednn_summary(checks["torch_ops"]),
        "bf16_compute": compute_precision.describe(cpu.selected_isa()),
        "int8_compute": _int8_compute(cpu.selected_isa()),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "library_caps": _library_caps(),
        "threads": torch.get_num_threads(),
        "openmp_wait": openmp_wait.state,
        "thread_placement": thread_placement.rule(),
        "malloc_tuning": _malloc_report(),
        "gpu": gpu_report(),
    }


def gpu_report() -> dict:
    """Whether `--device cuda` can run here: the GPU, its architecture and the libraries its kernels use,
    or why not (docs/gpu.md)."""
    from .backends.cuda import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        return {"cuda": f"not available: {reason}"}
    from .backends.cuda.kernels._triton import pdl_enabled

    major, minor = torch.cuda.get_device_capability()
    return {"cuda": torch.version.cuda, "device": torch.cuda.get_device_name(), "architecture": f"sm_{major}{minor}",
            "cudnn": torch.backends.cudnn.version(), "triton": _version("triton"),
            "programmatic_dependent_launch": pdl_enabled("cuda")}


def kernel_table() -> list[dict]:
    """Every CPU op's registered factories in preference order (from the registry, not a hand-kept list),
    and why each cannot run in this process at the selected ISA level (`doctor --kernels`)."""
    from .backends import get_backend
    from .runtime.kernels import KERNELS, why_not_here

    backend = get_backend("cpu")
    isa = backend.level()
    rows = []
    for op in backend.kernel_names():
        factories = KERNELS["cpu", op]
        why_not = {f.__name__: why_not_here(f, isa) for f in factories}
        rows.append({"op": op, "isa": isa, "factories": [f.__name__ for f in factories],
                     "runs_here": ", ".join(n for n, why in why_not.items() if why is None) or "reference only",
                     "not_here": {n: why for n, why in why_not.items() if why is not None}})
    return rows


def kernels_markdown() -> str:
    """docs/kernels.md: the registry as a table (what `doctor --kernels` shows, without this machine's
    answers), generated so the docs cannot drift from the code; tests/test_docs_kernels.py checks it."""
    from .backends import get_backend
    from .runtime.kernels import KERNELS

    def first_paragraph(text) -> str:
        return " ".join((text or "-").strip().split("\n\n")[0].split())

    lines = ["# CPU kernels", "",
             "Generated by `ipexconvert doctor --kernels --markdown > docs/kernels.md` from the kernel registry",
             "(`ipexconvert/backends/cpu/kernels/<op>.py`); do not edit by hand. Per op, the factories in preference",
             "order: the first that can run at the loading CPU's level and accepts the node runs it, else the next,",
             "and the op's reference implementation when all decline. `ipexconvert doctor --kernels` shows which can",
             "run on your machine and why the others cannot. A step's `kernel_name` (`bench --profile`) names the",
             "kernel that ran, e.g. `onednn_direct:conv2d`, `native:layer_norm@avx512_bf16`, `reference:sdpa`.", "",
             "| op | factory | what it takes | where it can run |", "| --- | --- | --- | --- |"]
    for op in get_backend("cpu").kernel_names():
        for factory in KERNELS["cpu", op]:
            where = first_paragraph(getattr(factory, "runs_at", None).__doc__)
            lines.append(f"| {op} | `{factory.__name__}` | {first_paragraph(factory.__doc__)} | {where} |")
        lines.append(f"| {op} | reference | `ir/ops/{op}.py`, plain torch | everywhere |")
    import_module("ipexconvert.backends.cuda.kernels")  # registers the GPU factories; needs no GPU
    lines += ["", "# GPU (cuda) kernels", "",
              "`load_artifact(path, device=\"cuda\")`, `--device cuda` (`ipexconvert/backends/cuda/kernels/<op>.py`; docs/gpu.md).",
              "Every other op, and any node these decline, runs its reference on the GPU.", "",
              "| op | factory | what it does |", "| --- | --- | --- |"]
    for (device, op), factories in sorted(KERNELS.items()):
        if device == "cuda":
            for factory in factories:
                doc = factory.__doc__ or sys.modules[factory.__module__].__doc__
                lines.append(f"| {op} | `{factory.__name__}` | {first_paragraph(doc)} |")
    return "\n".join(lines) + "\n"
