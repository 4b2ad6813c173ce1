"""Pass registry. A pass rewrites a Program in place and returns what it changed, counted."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional

from ..ir import Program
from ..quant.options import WeightOnlyOptions
from ..target import Target

if TYPE_CHECKING:
    from ..quant.plan import Quantization
    from ..quant.weight_only import WeightCodes


@dataclass(frozen=True)
class PassOptions:
    """Settings passes may read; filled from the CLI/API."""

    dtype: str = "fp32"
    target: Target = field(default_factory=Target)  # the device (and ISA level) the artifact is made for
    # int8: the calibrated plan and its tensors, for the passes after the "calibrate" stage (quantize,
    # int8_residual); None before calibration and for float pipelines
    quantization: Optional["Quantization"] = None
    # weight-only quantization (int4, weight-only int8): group size, symmetry, LM head; None: the defaults
    weight_only: Optional[WeightOnlyOptions] = None
    # weight-only: linears (node names) the accuracy guard moved back to float (quant/weight_only_guard.py)
    keep_float: frozenset[str] = frozenset()
    # weight-only: codes GPTQ / AWQ chose before the passes (quant/weight_only_inc.py), by weight constant name;
    # weight_only_quantize takes them instead of rounding to nearest, merge_linears carries them to merged weights
    weight_codes: Optional["WeightCodes"] = None


PassFn = Callable[[Program, PassOptions], dict[str, int]]


@dataclass(frozen=True)
class PassInfo:
    name: str
    description: str
    run: PassFn


PASSES: dict[str, PassInfo] = {}


def register_pass(name: str, description: str):
    def wrap(fn: PassFn) -> PassFn:
        if name in PASSES:
            raise RuntimeError(f"pass {name} registered twice")
        PASSES[name] = PassInfo(name, description, fn)
        return fn

    return wrap
