"""The quantization plan: every decision the int8 conversion made, per layer.

One pydantic model serves three readers: the quantize pass (what to rewrite), the
manifest and `inspect` (what was done and why), and the qconfig JSON a person can
export, edit and feed back (--qconfig-out / --qconfig-in).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Optional

import torch
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

QCONFIG_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ActivationQuant(_Model):
    """Per-tensor quantization of an activation (a layer's input, or its output: LayerPlan.output)."""

    dtype: Literal["uint8", "int8"] = "uint8"
    scale: float = Field(gt=0)
    zero_point: int = 0
    lo: float = Field(description="calibrated clipping range, low end (after smoothing)")
    hi: float = Field(description="calibrated clipping range, high end (after smoothing)")
    observer: str = Field(default="minmax", description="observer that chose the range (or 'qconfig' if imported)")
    observed_min: Optional[float] = None
    observed_max: Optional[float] = None


class Smoothing(_Model):
    """SmoothQuant for one layer: x / factors before quantizing, W * factors (columns)."""

    alpha: float
    folded_into: str = Field(description="node whose weights absorbed 1/factors, or 'quantize' (the multiplier)")
    group: list[str] = Field(description="linears sharing this input (one factor vector for all)")
    factors: list[float]


class LayerPlan(_Model):
    node: str
    op: Literal["linear", "conv2d"]
    quantized: bool = True
    fallback_reason: Optional[str] = Field(default=None, description="why the layer stays float")
    input: Optional[ActivationQuant] = None
    output: Optional[ActivationQuant] = Field(
        default=None, description="calibrated output range (after post-ops): a conv whose output is only read as "
                                  "a residual operand is kept in uint8 with it (int8_residual); ONNX export "
                                  "requantizes a conv's float output with it")
    weight_scale_min: Optional[float] = None
    weight_scale_max: Optional[float] = None
    smoothing: Optional[Smoothing] = None
    sensitivity: Optional[float] = Field(
        default=None, description="relative error of this layer's output with only this layer quantized (held-out data)")


class _Record(_Model):
    # Written by our own code (guard.py, convert.py) and read back from artifacts: exact JSON types only.
    model_config = ConfigDict(extra="forbid", strict=True)


class GuardRound(_Record):
    fallback_layers: int = Field(description="layers kept in float in this round")
    error: Optional[float] = Field(description="the guard metric's worst error (None: it was NaN)")


class GuardRecord(_Record):
    """The accuracy guard's metric, budget, result and rounds (QuantPlan.guard, stored as a dict)."""

    metric: str
    meaning: str
    budget: float
    held_out_batches: int
    passed: bool
    final_error: Optional[float]
    rounds: list[GuardRound]


class TuneTrial(_Record):
    observer: str
    smoothquant: str
    fallback_layers: int
    score: Optional[float]
    loss: Optional[float]


class TuningRecord(_Record):
    """--tune: the fp32 score and every trial (QuantPlan.tuning, stored as a dict)."""

    baseline_score: Optional[float]
    tolerable_loss: float
    met: bool
    trials: list[TuneTrial]


def _checked_as(model: type[BaseModel]):
    """A dict field whose content must be a valid `model`; it stays a dict (readers index it), normalised."""
    return AfterValidator(lambda value: model.model_validate(value).model_dump())


class QuantPlan(_Model):
    # validate_assignment: the guard and tuning records are assigned as dicts after the plan is made; checking
    # them then keeps what is written in step with what a reader of the artifact accepts.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    version: int = QCONFIG_VERSION
    activation_dtype: Literal["uint8", "int8"] = "uint8"
    weight_dtype: Literal["int8"] = "int8"
    weight_scheme: str = "symmetric per output channel"
    observer: str = "minmax"
    smoothquant: str = Field(default="off", description="off, auto or a fixed alpha")
    float_dtype: Literal["float32", "bfloat16"] = Field(
        default="float32", description="what ops without an int8 kernel run in")
    calibration: str = ""
    calibration_synthetic: bool = False
    calibration_batches: int = 0
    held_out_batches: int = 0
    guard: Optional[Annotated[dict[str, Any], _checked_as(GuardRecord)]] = Field(
        default=None, description="the accuracy guard's metric, budget, result and rounds (a GuardRecord)")
    tuning: Optional[Annotated[dict[str, Any], _checked_as(TuningRecord)]] = Field(
        default=None, description="--tune: the fp32 score and every trial (a TuningRecord)")
    layers: dict[str, LayerPlan] = Field(default_factory=dict)

    def quantized_layers(self) -> list[str]:
        return [n for n, layer in self.layers.items() if layer.quantized]

    def fallback_layers(self) -> dict[str, str]:
        return {n: layer.fallback_reason or "" for n, layer in self.layers.items() if not layer.quantized}


@dataclass
class LayerTensors:
    """What the quantize pass stores for one layer (computed from the float32 weights at planning time)."""

    weight: torch.Tensor  # int8, [out, ...]
    weight_scale: torch.Tensor  # float32 [out]
    bias: Optional[torch.Tensor]  # float32 [out]
    multiplier: Optional[torch.Tensor] = None  # float32 [C]: 1 / (smoothing factor * input scale), or None


@dataclass
class Quantization:
    """A plan plus its tensors: what PassOptions.params["quantization"] carries to the quantize pass."""

    plan: QuantPlan
    tensors: dict[str, LayerTensors] = field(default_factory=dict)
