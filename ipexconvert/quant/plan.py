"""The quantization plan: every decision the int8 conversion made, per layer.

One pydantic model serves three readers: the quantize pass (what to rewrite), the
manifest and `inspect` (what was done and why), and the qconfig JSON a person can
export, edit and feed back (--qconfig-out / --qconfig-in).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional

import torch
from pydantic import BaseModel, ConfigDict, Field

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
        default=None, description="calibrated output range, for a conv whose output is only read as a residual "
                                  "operand (int8_residual keeps it in uint8)")
    weight_scale_min: Optional[float] = None
    weight_scale_max: Optional[float] = None
    smoothing: Optional[Smoothing] = None
    sensitivity: Optional[float] = Field(
        default=None, description="relative error of this layer's output with only this layer quantized (held-out data)")


class QuantPlan(_Model):
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
    guard: Optional[dict] = Field(default=None, description="the accuracy guard's metric, budget, result and rounds")
    tuning: Optional[dict] = Field(default=None, description="--tune: the fp32 score and every trial")
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
