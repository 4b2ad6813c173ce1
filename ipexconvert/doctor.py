"""`ipexconvert doctor`: versions, CPU features and the ISA the runtime selects."""
from __future__ import annotations

import importlib.metadata
import os
import platform

import torch

from . import __version__, native, openmp_wait
from .runtime import compute_precision, cpu


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _onednn_summary() -> dict:
    from .runtime.cpu_kernels import probe_report

    report = probe_report()
    def summary(info: dict) -> str:
        if info.get("not_used"):
            return info["not_used"]
        if info.get("found") and info.get("passed") and all(info["passed"].values()):
            return "ok"
        return f"unusable: {info.get('error') or 'failed check'}"

    return {name: summary(info) for name, info in report.get("ops", {}).items()}


def _native_report() -> dict:
    """The native kernel library: the levels it detects, and the build each kernel runs now."""
    if not native.available():
        return {"native_levels": None,
                "kernels": f"reference (PyTorch ops) only: the native extension is not built ({native.unavailable_reason()})"}
    return {"native_levels": native.supported_levels(),
            "native_kernels": {name: native.kernel_level(name) for name in native.KERNELS},
            "kernels": "native (ipexconvert._native) for norms/softmax/activations/quantize and attention (bf16: amx or avx512_bf16; fp32: avx512), direct oneDNN "
                       "(ipexconvert._dnnl) for conv2d/qconv2d/max_pool2d, oneDNN through torch for bf16 linear (fp32 too on "
                       "non-Intel CPUs), qlinear and the convolutions the direct layers decline, MKL for fp32 linear on Intel "
                       "CPUs, else reference (PyTorch ops)"}


def _dnnl_report() -> dict:
    """The direct oneDNN layers: loaded or not (and why), checked, and the ISA cap they run under."""
    from . import dnnl

    if dnnl.available():
        dnnl.usable(cpu.selected_isa())  # runs the one-time check, so the report says how it went
    return dnnl.report()


def _malloc_report() -> dict:
    """What loading an artifact does (or did) to the process's malloc settings."""
    from .runtime import malloc

    done = malloc.current()
    if done.state != "not yet":
        return done.model_dump()
    skip = malloc.reason_to_skip(os.environ)
    return {"state": "skipped" if skip else "at load",
            "detail": skip or f"mmap threshold {malloc.MMAP_THRESHOLD >> 20} MiB, trim threshold "
                              f"{malloc.TRIM_THRESHOLD >> 30} GiB (IPEXCONVERT_MALLOC_TUNING=0 turns it off)"}


def _int8_compute(isa: str) -> str:
    """Which kernels run int8 layers at this level (decided once per process, not per command)."""
    from .runtime.cpu_kernels._common import int8_allowed

    if int8_allowed(isa):
        return f"oneDNN int8 (VNNI or AMX: {isa})"
    if cpu.ISA_LEVELS.index(isa) >= cpu.ISA_LEVELS.index("avx2") and native.available():
        return (f"native exact int8 GEMM ({isa}: no VNNI, so oneDNN's u8*s8 products would saturate; "
                "int16 products summed in int32 instead)")
    return "reference (float32 PyTorch ops)"


def _library_caps() -> dict:
    """The ISA ceiling each library we drive was given (isa_caps sets them from IPEXCONVERT_MAX_ISA)."""
    from . import isa_caps

    names = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
    return {name: (f"{isa_caps.applied[name][1]} (from IPEXCONVERT_MAX_ISA)" if isa_caps.applied.get(name, ("",))[0] == "set"
                   else os.environ.get(name) or "unset") for name in names}


def environment_report() -> dict:
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
        "max_isa_env": os.environ.get("IPEXCONVERT_MAX_ISA") or "unset",
        "selected_isa": cpu.selected_isa(),
        "isa_detection": "native (CPUID + XCR0)" if cpu.detection() == "native" else "python (/proc/cpuinfo)",
        **_native_report(),
        "direct_onednn": _dnnl_report(),
        "onednn_probe": _onednn_summary(),
        "bf16_compute": compute_precision.describe(cpu.selected_isa()),
        "int8_compute": _int8_compute(cpu.selected_isa()),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "library_caps": _library_caps(),
        "threads": torch.get_num_threads(),
        "openmp_wait": openmp_wait.state,
        "malloc_tuning": _malloc_report(),
    }
