"""QuantOptions: the int8 settings a user chooses (CLI flags / optimize() keyword), validated once; WeightOnlyOptions:
the weight-only (int4, weight-only int8) settings."""
from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

ALPHA_GRID = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # SmoothQuant's useful range; the paper's default is 0.5


class QuantOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    observer: Optional[str] = Field(default=None, description="minmax, percentile or histogram; None: per model family")
    activation_dtype: Literal["uint8", "int8"] = Field(default="uint8", description="the quantized activations' type")
    smoothquant: Union[Literal["auto", "off"], float] = Field(
        default="auto", description="auto (alpha searched per layer), off, or a fixed alpha in [0, 1]; transformer linears only")
    float_dtype: Optional[Literal["float32", "bfloat16"]] = Field(
        default=None, description="what ops without an int8 kernel run in; None: bfloat16 where the CPU has it")
    guard_metric: Literal["auto", "cosine", "relative", "top1"] = Field(
        default="auto", description="what the accuracy guard measures; auto: top1 for classifiers, else cosine")
    max_error: Optional[float] = Field(default=None, gt=0, description="guard budget; None: the metric's default")
    guard: bool = Field(default=True, description="move the most sensitive layers back to float until the budget holds")
    held_out_fraction: float = Field(default=0.2, ge=0, lt=1, description="calibration batches kept for the accuracy check")
    qconfig_in: Optional[Path] = Field(default=None, description="a plan written by qconfig_out (edited or not)")
    sample_rows: int = Field(default=512, gt=0, description="activation rows kept per layer for the alpha search")

    @field_validator("observer")
    @classmethod
    def _known_observer(cls, v):
        from .observers import OBSERVERS

        if v is not None and v not in OBSERVERS:
            raise ValueError(f"unknown observer {v!r}; use one of: {', '.join(sorted(OBSERVERS))}")
        return v

    @field_validator("smoothquant", mode="before")
    @classmethod
    def _alpha(cls, v):
        if isinstance(v, str) and v not in ("auto", "off"):
            try:
                v = float(v)
            except ValueError:
                raise ValueError("smoothquant must be auto, off or a number in [0, 1]") from None
        if isinstance(v, (int, float)) and not 0.0 <= float(v) <= 1.0:
            raise ValueError("a fixed SmoothQuant alpha must be in [0, 1]")
        return v


GroupSize = Union[Literal[32, 64, 128], Literal["channel"]]


WoqAlgorithm = Literal["rtn", "gptq", "awq"]


class WeightOnlyOptions(BaseModel):
    """Weight-only quantization (--dtype int4, or int8 with int8_scheme weight-only): how the linear weights are
    rounded and whether activations are rounded to int8 too; only gptq and awq read calibration text."""

    model_config = ConfigDict(extra="forbid")

    algorithm: WoqAlgorithm = Field(
        default="rtn", description="how the codes are chosen: rtn rounds each weight to nearest (no data); gptq "
        "rounds column by column, moving each rounding error onto the columns not yet rounded as the calibration "
        "activations say (GPTQ); awq scales the input channels that the calibration activations make salient before "
        "rounding and divides the norm before the layer by the same scales (AWQ), then searches a clipping range. "
        "gptq and awq decoders only: they need calibration text (calibration.text, --calib-text) and run Intel "
        "Neural Compressor's implementation (pip install neural-compressor-pt)")

    group_size: Optional[GroupSize] = Field(
        default=None, description="input features sharing one scale: 32, 64, 128 or channel (one per output "
        "channel); None: 128 for int4, channel for int8")
    symmetric: bool = Field(default=True, description="int4: a scale per group (codes -8..7), or false for a scale "
                            "and a zero point per group (codes 0..15); int8 weights are always symmetric")
    quantize_lm_head: bool = Field(default=False, description="also quantize the LM head (a linear producing a graph "
                                   "output, or sharing its weight with an embedding); kept float by default")
    activations: Literal["auto", "float", "bf16", "int8"] = Field(
        default="auto", description="int8: each activation row rounded to int8 (max|x| / 127) so the layers multiply "
        "integers (int8 weights: VNNI / AVX2 integer GEMM at every row count; int4: integer decode on AVX2 and up; "
        "faster than float activations on every CPU measured, docs/decoders.md); float: the activations stay float32; "
        "bf16: everything but the quantized weights computes in bfloat16 as a bf16 artifact does (attention, norms, "
        "the float embedding and LM head; the KV cache held in bf16): what a GPU runs fastest, and CPUs without bf16 "
        "arithmetic compute it in float32 from the bf16 weights; auto (default): int8 for decoders whose "
        "teacher-forced check the guard runs, which falls back to float activations before moving any layer back to "
        "float weights, and float everywhere else")

    guard: bool = Field(default=True, description="decoders: move the linears whose weights round worst back to float, "
                        "in rounds of 1, 2, 4, ... until the teacher-forced accuracy budget holds, then bisect to the "
                        "fewest that hold it")

    @field_validator("group_size", mode="before")
    @classmethod
    def _group_size_from_text(cls, v):
        if isinstance(v, str) and v.strip().isdigit():  # "--group-size 64" arrives as text
            return int(v)
        return v

    def resolved_group_size(self, bits: int, in_features: int) -> int:
        """The group size for a layer of `in_features` inputs (channel: all of them)."""
        size = self.group_size if self.group_size is not None else (128 if bits == 4 else "channel")
        return in_features if size == "channel" else int(size)
