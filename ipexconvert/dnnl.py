"""The direct oneDNN layers (`ipexconvert._dnnl`, built from native/dnnl/): convolutions on oneDNN
primitives created once per layer and input size, instead of torch's oneDNN operators, which
rebuild their oneDNN objects on every call (docs/native.md, "Direct oneDNN layers").

oneDNN comes from the onednn-cpu-gomp wheel: oneDNN 3.2 built for GNU OpenMP, so it shares the
OpenMP runtime (and thread count) torch already runs. Its library lives in the environment's
lib/ folder, which the dynamic loader does not search, so it is loaded here by path before the
extension. Missing wheel or extension: available() is False and the kernels decline (torch's
oneDNN operators run); IPEXCONVERT_DNNL=0 does the same on purpose. The first kernel that wants
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

from .errors import ArtifactError
from .runtime.cpu import ISA_LEVELS, selected_isa

# Our ISA level -> the highest oneDNN may use (oneDNN dispatches within it by itself).
ONEDNN_ISA = {"avx2": "avx2", "avx512": "avx512_core", "avx512_vnni": "avx512_core_vnni",
              "avx512_bf16": "avx512_core_bf16", "amx": "avx512_core_amx"}


def _load():
    if importlib.util.find_spec(f"{__package__}._dnnl") is None:
        raise ImportError("ipexconvert._dnnl was not built: the build found no oneDNN headers (install "
                          "onednn-devel-cpu-gomp==2023.2.0 next to the build requirements and rebuild)")
    for f in metadata.distribution("onednn-cpu-gomp").files or []:
        if f.name == "libdnnl.so.3":
            ctypes.CDLL(str(f.locate().resolve()), mode=ctypes.RTLD_GLOBAL)
            break
    from . import _dnnl
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
    """IPEXCONVERT_DNNL=0 turns the direct layers off (torch's oneDNN operators run), for debugging and timing."""
    return os.environ.get("IPEXCONVERT_DNNL", "1").strip().lower() not in ("0", "false", "off", "no")


def usable(isa: str) -> bool:
    """Built, loaded, enabled, allowed at this ISA level (the first cap applied holds for the
    process), and checked against the references."""
    if raw is None or not enabled() or ISA_LEVELS.index(isa) < ISA_LEVELS.index("avx2"):
        return False
    return self_check()


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
                _check_convolutions(int8)
                if int8:
                    _check_int8_linear()
                _checked, _check_error = True, None
            except Exception as e:  # a wrong number or an error: either way, do not use it
                _checked, _check_error = False, f"{type(e).__name__}: {e}"
                warnings.warn(f"ipexconvert: the direct oneDNN layers failed their check ({_check_error}); "
                              "torch's oneDNN operators run instead", RuntimeWarning, stacklevel=3)
        return _checked


def _check_convolutions(int8: bool) -> None:
    """A 3x3 stride-2 int8 conv with a uint8 residual sum and relu into uint8 (when int8 runs at
    this ISA level), and a float conv."""
    from .ir.ops._quant import dequantize

    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (2, 8, 9, 7), dtype=torch.uint8, generator=g).contiguous(memory_format=torch.channels_last)
    bias = torch.randn(12, generator=g)
    if int8:
        _check_int8_convolution(x, bias, g)
    xf = dequantize(x, 0.05, 7).contiguous(memory_format=torch.channels_last)
    wf = torch.randn(12, 8, 3, 3, generator=g)
    want_f = torch.nn.functional.conv2d(xf, wf, bias, (2, 1), (1, 0)).relu()
    conv = raw.Conv(wf, None, bias, (2, 1), (1, 0), (1, 1), "float32", "float32", relu=True)
    got_f = torch.empty_like(want_f, memory_format=torch.channels_last)
    conv.run(xf, got_f)
    error = ((got_f - want_f).abs().max() / want_f.abs().max()).item()
    if error > 1e-4:
        raise ValueError(f"float32 convolution relative error {error:.2e}")


def _check_int8_convolution(x: torch.Tensor, bias: torch.Tensor, g: torch.Generator) -> None:
    from .ir.ops.qconv2d import QConv2dOp

    w = torch.randint(-127, 128, (12, 8, 3, 3), dtype=torch.int8, generator=g)
    scales = torch.rand(12, generator=g) * 0.01 + 0.002
    attrs = QConv2dOp.parse_attrs({"x_scale": 0.05, "x_zero_point": 7, "stride": [2, 2], "padding": [1, 1],
                                   "output_dtype": "uint8", "output_scale": 0.1, "output_zero_point": 5,
                                   "accum_scale": 0.08, "accum_zero_point": 3,
                                   "post_ops": [{"kind": "add", "operand": 4}, {"kind": "relu"}]})
    accum = torch.randint(0, 256, (2, 12, 5, 4), dtype=torch.uint8, generator=g).contiguous(
        memory_format=torch.channels_last)
    want = QConv2dOp.reference([x, w, scales, bias, accum], attrs, {})
    conv = raw.Conv(w, scales, bias, (2, 2), (1, 1), (1, 1), "uint8", "uint8", relu=True, sum=True,
                    sum_scale=0.08, sum_zero_point=3, x_scale=0.05, x_zero_point=7, y_scale=0.1,
                    y_zero_point=5)
    got = accum.clone(memory_format=torch.channels_last)
    conv.run(x, got)
    worst = (got.int() - want.int()).abs().max().item()
    if worst > 1:
        raise ValueError(f"int8 convolution off by {worst} codes")



def _check_int8_linear() -> None:
    """A qlinear with gelu and a per-feature multiplier (fold_requantize's SmoothQuant form) into uint8."""
    from .ir.ops.qlinear import QLinearOp

    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 256, (2, 3, 40), dtype=torch.uint8, generator=g)
    w = torch.randint(-127, 128, (24, 40), dtype=torch.int8, generator=g)
    scales, bias = torch.rand(24, generator=g) * 0.01 + 0.002, torch.randn(24, generator=g)
    multiplier = 10 / (torch.rand(24, generator=g) + 0.5)  # 1 / (smoothing factor * output scale 0.1)
    attrs = QLinearOp.parse_attrs({"x_scale": 0.05, "x_zero_point": 9, "output_dtype": "uint8", "output_scale": 1.0,
                                   "output_zero_point": 4, "post_ops": [{"kind": "gelu"}, {"kind": "mul", "operand": 4}]})
    want = QLinearOp.reference([x, w, scales, bias, multiplier], attrs, {})
    linear = raw.Linear(w, scales, bias, "uint8", "uint8", post_op="gelu", multiplier=multiplier, x_scale=0.05,
                        x_zero_point=9, y_scale=1.0, y_zero_point=4)
    got = torch.empty_like(want)
    linear.run(x, got)
    worst = (got.int() - want.int()).abs().max().item()
    if worst > 1:
        raise ValueError(f"int8 linear off by {worst} codes")


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
