"""Build one node's kernel the way the executor does, run it, and compare with the op's reference."""
from __future__ import annotations

import warnings
from typing import Callable, Optional, Sequence

import pytest
import torch

from ipexconvert.ir.opdef import SpecError, get_op
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.self_check import torch_ops as probe
from ipexconvert.runtime.kernels import Kernel, NodeContext

BF16_TOLERANCE, FP32_TOLERANCE = 2e-2, 1e-4


def runs_at_selected_level(what: str, runs_at: Callable[[str], Optional[str]]) -> pytest.MarkDecorator:
    """Skips a test of `what` where `runs_at` (a factory's, kernels/_runs_at.py) says it cannot run at the selected
    ISA level (IPEXCONVERT_MAX_ISA=generic: torch's oneDNN needs avx2), giving its reason."""
    level = selected_isa()
    why = runs_at(level)
    return pytest.mark.skipif(why is not None, reason=f"{what} cannot run at the selected ISA level {level}: {why}")


def spec_of(t: Optional[torch.Tensor], dynamic_batch: bool) -> Optional[TensorSpec]:
    """The tensor's spec; with dynamic_batch, dim 0 of a full-batch tensor is the named dim "batch"."""
    if t is None:
        return None
    spec = TensorSpec.of(t)
    if dynamic_batch and t.dim() >= 2 and t.shape[0] > 1:
        spec = spec.with_(shape=["batch", *spec.shape[1:]])
    return spec


def context(op: str, attrs: dict, tensors: Sequence[Optional[torch.Tensor]], constant_slots: set[int],
            dynamic_batch: bool = False, isa: Optional[str] = None) -> NodeContext:
    """A NodeContext for a node reading `tensors`; the slots in constant_slots are constants."""
    parsed = get_op(op).parse_attrs(attrs)
    specs = tuple(spec_of(t, dynamic_batch and i not in constant_slots) for i, t in enumerate(tensors))
    try:
        out = get_op(op).infer(specs, parsed)
    except SpecError:  # a node the loader refuses (weight and input dtypes disagree), built to see a kernel decline it
        out = get_op(op).infer([s.with_(dtype=specs[0].dtype) if i == 1 else s for i, s in enumerate(specs)], parsed)
    return NodeContext(op=op, attrs=parsed,
                       constants=tuple(t if i in constant_slots else None for i, t in enumerate(tensors)),
                       input_specs=specs, output_specs=tuple(out), device="cpu", isa=isa or selected_isa())


def run(kernel: Kernel, tensors: Sequence[Optional[torch.Tensor]], dims: dict[str, int]) -> torch.Tensor:
    """Call the kernel as the executor does: consumed constants are passed as None."""
    inputs = [None if i in kernel.consumed_inputs else t for i, t in enumerate(tensors)]
    with torch.inference_mode():
        return kernel.fn(inputs, dims)


def reference(op: str, attrs: dict, tensors: Sequence[Optional[torch.Tensor]]) -> torch.Tensor:
    """The op's reference in float32."""
    floats = [None if t is None else t.float() for t in tensors]
    return get_op(op).reference(floats, get_op(op).parse_attrs(attrs), {})


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.float() - want).abs().max() / want.abs().max()).item()


def probe_with(monkeypatch, replace: dict) -> list[str]:
    """Probe with some ops replaced (None: missing, else a wrapper class around the real op); the
    oneDNN warning messages it gave."""
    real = probe.resolve_op

    def resolve(name):
        if name not in replace:
            return real(name)
        if replace[name] is None:
            raise AttributeError(name)
        return replace[name](real(name))

    monkeypatch.setattr(probe, "resolve_op", resolve)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        probe.probe_report()
    return [str(w.message) for w in caught if "oneDNN" in str(w.message)]


class WrongResult:
    """Stands in for an op whose schema is right but whose numbers are off."""

    def __init__(self, op):
        self._op, self._schema = op, op._schema

    def __call__(self, *args):
        return self._op(*args) * 1.5


@pytest.fixture(autouse=True)
def torch_operators_only(monkeypatch):
    """Imported by the tests about torch's oneDNN operators: keeps the direct oneDNN layers (tried
    first) out of their way."""
    monkeypatch.setenv("IPEXCONVERT_ONEDNN_DIRECT", "0")


def float_linear_kernel(dtype: str) -> str:
    """The kernel a float linear of this dtype ("float32" / "bfloat16", computed as such) loads onto here: MKL for
    float32 on Intel CPUs; else our direct oneDNN matmul at the avx512_bf16 level (bf16 unless it widens to
    MKL), torch's oneDNN operator elsewhere from avx2 up, the reference below (generic)."""
    from ipexconvert.backends.cpu.isa import selected_isa
    from ipexconvert.backends.cpu.kernels import _runs_at
    from ipexconvert.backends.cpu.kernels._torch_onednn import mkl_runs_float32_linear
    from ipexconvert.backends.cpu.kernels.linear import widens_many_rows

    isa = selected_isa()
    if dtype == "float32" and mkl_runs_float32_linear():
        return "torch_mkl:linear"
    if _runs_at.onednn_direct_float_linear(isa) is None and not widens_many_rows(isa, dtype):
        return "onednn_direct:linear"
    if _runs_at.torch_onednn_float(isa) is not None:  # below avx2 (generic): no oneDNN, and no native float linear
        return "reference:linear"
    return "torch_onednn:linear"


def bf16_linear_kernels() -> frozenset[str]:
    """The kernels a bf16 model's linears (computed in bf16) load onto here: float_linear_kernel's, and on AMX our
    bf16_amx_gemm for the layers it takes (sizes multiples of 32; no post-op, or relu / erf GELU)."""
    from ipexconvert.backends.cpu.isa import selected_isa
    from ipexconvert.backends.cpu.kernels import _runs_at

    amx = _runs_at.native_amx_linear(selected_isa()) is None
    return frozenset({float_linear_kernel("bfloat16")} | ({"native:bf16_amx_gemm|torch_onednn:linear"} if amx else set()))
