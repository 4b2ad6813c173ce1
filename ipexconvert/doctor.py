"""`ipexconvert doctor`: versions, CPU features and the ISA the runtime selects."""
from __future__ import annotations

import importlib.metadata
import os
import platform

import torch

from . import __version__, native
from .runtime import cpu


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _onednn_summary() -> dict:
    from .runtime.cpu_kernels import probe_report

    report = probe_report()
    return {name: ("ok" if info.get("found") and all(info.get("passed", {}).values()) else f"unusable: {info.get('error') or 'failed check'}")
            for name, info in report.get("ops", {}).items()}


def _native_report() -> dict:
    """The native kernel library: the levels it detects, and the build each kernel runs now."""
    if not native.available():
        return {"native_levels": None,
                "kernels": f"reference (PyTorch ops) only: the native extension is not built ({native.unavailable_reason()})"}
    return {"native_levels": native.supported_levels(),
            "native_kernels": {name: native.kernel_level(name) for name in native.KERNELS},
            "kernels": "native (ipexconvert._native) for norms/softmax/activations, oneDNN (through torch) for conv2d "
                   "and bf16 linear where the probe passes, else reference (PyTorch ops)"}


def environment_report() -> dict:
    interesting = sorted(f for f in cpu.cpu_flags() if f.startswith(("avx", "amx", "fma", "f16c")))
    return {
        "ipexconvert": __version__,
        "python": platform.python_version(),
        "versions": {p: _version(p) for p in ("torch", "safetensors", "pydantic", "typer", "transformers", "onnx")},
        "cpu": cpu.cpu_model(),
        "cpu_flags": interesting,
        "amx_os_permission": cpu.amx_permission(),
        "supported_isa": cpu.supported_levels(),
        "max_isa_env": os.environ.get("IPEXCONVERT_MAX_ISA") or "unset",
        "selected_isa": cpu.selected_isa(),
        "isa_detection": "native (CPUID + XCR0)" if cpu.detection() == "native" else "python (/proc/cpuinfo)",
        **_native_report(),
        "onednn_probe": _onednn_summary(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }
