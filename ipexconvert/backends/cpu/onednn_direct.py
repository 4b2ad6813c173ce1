"""The direct oneDNN layers (`ipexconvert._dnnl`, built from native/dnnl/): convolutions on oneDNN
primitives created once per layer and input size, instead of torch's oneDNN operators, which
rebuild their oneDNN objects on every call (docs/native.md, "Direct oneDNN layers").

oneDNN comes from the onednn-cpu-gomp wheel: oneDNN 3.2 built for GNU OpenMP, so it shares the
OpenMP runtime (and thread count) torch already runs. Its library lives in the environment's
lib/ folder, which the dynamic loader does not search, so it is loaded here by path before the
extension. Missing wheel or extension: available() is False and the kernels decline (torch's
oneDNN operators run); IPEXCONVERT_ONEDNN_DIRECT=0 does the same on purpose. The first kernel that wants
it runs self_check() once: a small int8 and float convolution and an int8 linear against the op
references; a failure warns once and turns the layers off.
"""
from __future__ import annotations

import ctypes
import importlib.metadata as metadata
import importlib.util
import os
import threading
import warnings
from typing import Callable, Optional, Sequence, TypeVar

import torch

from ... import environment
from ...errors import ArtifactError
from .isa import ISA_LEVELS, selected_isa
from .self_check.onednn_direct import check_layers

# Our ISA level -> the highest oneDNN may use (oneDNN dispatches within it by itself).
ONEDNN_ISA = {"avx2": "avx2", "avx512": "avx512_core", "avx512_vnni": "avx512_core_vnni",
              "avx512_bf16": "avx512_core_bf16", "amx": "avx512_core_amx"}


def _load():
    if importlib.util.find_spec("ipexconvert._dnnl") is None:
        raise ImportError("ipexconvert._dnnl was not built: the build found no oneDNN headers (install "
                          "onednn-devel-cpu-gomp==2023.2.0 next to the build requirements and rebuild)")
    for f in metadata.distribution("onednn-cpu-gomp").files or []:
        if f.name == "libdnnl.so.3":
            # Loaded first so _dnnl's DT_NEEDED finds it by soname. RTLD_LOCAL: libdnnl exports weak C++ standard
            # library instantiations (std::_Hashtable<...>::...); in the global scope they would interpose those of
            # libraries loaded later, and OpenVINO GenAI's sampler crashed in free() on such a hash table.
            ctypes.CDLL(str(f.locate().resolve()), mode=ctypes.RTLD_LOCAL)
            break
    from ... import _dnnl
    return _dnnl


try:
    raw = _load()
    _IMPORT_ERROR: Optional[str] = None
except (ImportError, OSError, metadata.PackageNotFoundError) as e:
    raw = None
    _IMPORT_ERROR = f"{type(e).__name__}: {e}"

_lock = threading.Lock()
_checked: Optional[bool] = None
_check_error: Optional[str] = None
_isa_cap: Optional[str] = None


def available() -> bool:
    return raw is not None


def unavailable_reason() -> Optional[str]:
    return _IMPORT_ERROR


def enabled() -> bool:
    """IPEXCONVERT_ONEDNN_DIRECT=0 turns the direct layers off (torch's oneDNN operators run), for debugging and timing."""
    return not environment.switched_off("IPEXCONVERT_ONEDNN_DIRECT")


def usable(isa: str) -> bool:
    """Built, loaded, enabled, allowed at this ISA level (the first cap applied holds for the
    process), and checked against the references."""
    if raw is None or not enabled() or ISA_LEVELS.index(isa) < ISA_LEVELS.index("avx2"):
        return False
    return self_check()


def applied_level() -> Optional[str]:
    """Our level whose cap the direct layers' oneDNN took at their first use (it holds for the process: the level
    selected then, capped or not), or None before that first use."""
    return next((level for level, name in ONEDNN_ISA.items() if name == _isa_cap), None) if _isa_cap else None


def report() -> dict:
    """For `ipexconvert doctor`."""
    return {"available": available(), "version": raw.version() if raw else None,
            "error": _IMPORT_ERROR or _check_error, "checked": _checked, "max_isa": _isa_cap}


def self_check() -> bool:
    global _checked, _check_error, _isa_cap
    with _lock:
        if _checked is None:
            # oneDNN takes its ISA cap only before its first primitive: apply IPEXCONVERT_MAX_ISA now.
            _isa_cap = ONEDNN_ISA.get(selected_isa())
            if _isa_cap is not None:
                raw.set_max_isa(_isa_cap)
            try:
                # Below VNNI oneDNN's u8*s8 products saturate (off by ~100 codes measured at avx2):
                # the int8 kernels do not run there (int8_allowed), so only the float path is checked.
                int8 = ISA_LEVELS.index(selected_isa()) >= ISA_LEVELS.index("avx512_vnni")
                check_layers(raw, int8)
                _checked, _check_error = True, None
            except Exception as e:  # a wrong number or an error: either way, do not use it
                _checked, _check_error = False, f"{type(e).__name__}: {e}"
                warnings.warn(f"ipexconvert: the direct oneDNN layers failed their check ({_check_error}); "
                              "torch's oneDNN operators run instead", RuntimeWarning, stacklevel=3)
        return _checked


# ---- arguments ----------------------------------------------------------------------------------
# The layers check every tensor and geometry parameter before a primitive touches memory and raise
# ValueError / TypeError (native/dnnl/checks.h, native/python/dnnl_module.cpp). The kernels turn
# those into ArtifactError: the executor hands a layer only what the artifact's graph says
# (LoadedModel has checked the user's inputs against the signature), so a tensor that does not
# fit the layer's weights means the graph and its weights disagree.

_FIX = ("re-create the artifact with `ipexconvert optimize`; an artifact whose graph and weights "
        "disagree was damaged or edited, so do not run it")

T = TypeVar("T")


def refused(kernel: str, error: Exception) -> ArtifactError:
    """The error for a layer that refused its arguments (error: the layer's ValueError / TypeError)."""
    return ArtifactError(f"{kernel} refused its arguments: {' '.join(str(error).split())}", _FIX)


def make_layer(kernel: str, make: Callable[..., T], *args, **kwargs) -> T:
    """raw.Conv / Linear / MaxPool(*args, **kwargs); a refused geometry or weight is an ArtifactError."""
    try:
        return make(*args, **kwargs)
    except (ValueError, TypeError) as e:
        raise refused(kernel, e) from None


def check_constant(kernel: str, ctx, slot: int, what: str, expected: Sequence[Optional[int]]) -> None:
    """The constant in input `slot` has the shape and dtype its spec declares, and the shape the
    node's other specs imply (`expected`; None where a dim is dynamic), before a layer is built
    from it: a layer sized by an edited weight would read its activations at the wrong width."""
    tensor, spec = ctx.constants[slot], ctx.input_specs[slot]
    got = list(tensor.shape)
    if spec is None or got != list(spec.shape):
        declared = None if spec is None else list(spec.shape)
        raise ArtifactError(f"{kernel}: the {what} has shape {got}, but the graph declares {declared}", _FIX)
    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype != spec.dtype:
        raise ArtifactError(f"{kernel}: the {what} has dtype {dtype}, but the graph declares {spec.dtype}", _FIX)
    if len(expected) != len(got) or any(e is not None and e != g for e, g in zip(expected, got)):
        want = ["?" if e is None else e for e in expected]
        raise ArtifactError(f"{kernel}: the {what} has shape {got}; the node's input and output need {want}", _FIX)


def static(dim) -> Optional[int]:
    """A spec dim if it is a number (None for a dynamic one)."""
    return dim if isinstance(dim, int) else None
