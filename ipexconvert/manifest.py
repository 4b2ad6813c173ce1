"""The artifact manifest: what was converted, how, and how accurate it is.

A pydantic model; its JSON Schema is committed under schemas/ (see
`python -m ipexconvert.schemas`), and a test fails when the two drift.
"""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .ir.spec import DimRange, TensorSpec
from .target import Target

# 2: content_sha256 binds the manifest, graph and each tensor's name, dtype, shape and bytes (artifact.py);
# version 1 files hashed bytes only and are refused by the loader (inspect still shows them).
FORMAT_VERSION = 2


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SourceRecord(_Model):
    kind: str = Field(description="export, hf-folder, state-dict, pickle, example, module")
    location: str = Field(description="path or example name")
    sha256: Optional[str] = Field(default=None, description="of the source file(s), when there is one")


class PassRecord(_Model):
    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    changes: dict[str, int] = Field(default_factory=dict, description="what the pass did, counted")
    seconds: float = 0.0


class IOSpec(_Model):
    name: str
    spec: TensorSpec


class OutputAccuracy(_Model):
    name: str
    max_abs_error: float
    max_rel_error: float = Field(description="max |artifact - eager| / max |eager|")
    cosine: float = Field(description="cosine similarity of the whole output")
    sample_cosine_min: Optional[float] = Field(default=None, description="lowest cosine of one sample (dim 0) of the output")
    sample_cosine_mean: Optional[float] = None
    top1_agreement: Optional[float] = Field(default=None, description="[batch, classes] outputs: share of samples "
                                            "whose arg-max is the eager one's")
    neighbour_agreement: Optional[float] = Field(default=None, description="[batch, dim] outputs of 3+ samples: share "
                                                 "of samples whose nearest other sample (cosine) is the eager one's")


class DecoderAccuracy(_Model):
    """A decoder judged teacher-forced (decoder_accuracy.py): a token sequence fed to the artifact with its KV cache, the
    true next token each step, and every step's logits compared with the float reference's at the same position."""

    reference: str = Field(description="what the logits were compared with")
    text: str = Field(description="the token sequence: the built-in corpus through the stored tokenizer, or fixed ids")
    prefill_tokens: int = Field(ge=1, description="tokens of the first call (a prompt); one token a call after it")
    positions: int = Field(ge=1, description="next-token predictions compared (one per call)")
    mean_cosine: float = Field(description="mean over positions of the cosine of the logits to the reference's")
    min_cosine: float = Field(description="the lowest position's cosine")
    top1_agreement: float = Field(description="share of positions whose arg-max token is the reference's")
    perplexity: float = Field(description="exp(mean negative log-likelihood of the true next tokens), the artifact's")
    reference_perplexity: float = Field(description="the same for the reference")
    perplexity_ratio: float = Field(description="perplexity / reference_perplexity")
    budget_mean_cosine: float = Field(description="mean_cosine must reach this (--min-cosine)")
    budget_top1_agreement: float = Field(description="top1_agreement must reach this (--min-top1-agreement)")
    budget_perplexity_ratio: float = Field(description="perplexity_ratio must stay at or below this (--max-perplexity-ratio)")
    passed: bool


class AccuracyRecord(_Model):
    reference: str = Field(description="what the artifact was compared with")
    dtype: str
    budget_rel_error: float
    budget_min_cosine: float
    judged_by: str = Field(default="max relative error and cosine",
                           description="which measurements decide `passed` (the others are recorded)")
    computed_in: Optional[str] = Field(default=None, description="what the converting CPU computed bf16 parts in")
    passed: bool
    outputs: list[OutputAccuracy]
    decoder: Optional[DecoderAccuracy] = Field(
        default=None, description="weight-only decoders: the teacher-forced comparison that decides `passed` (`outputs` "
        "then records one call on the example inputs)")


class GuardRound(_Model):
    float_layers: int = Field(ge=0, description="layers moved back to float in this round")
    activations: Optional[Literal["float", "bf16", "int8"]] = Field(
        default=None, description="the layers' activations in this round (weight-only; absent: float)")
    mean_cosine: Optional[float] = None
    top1_agreement: Optional[float] = None
    perplexity_ratio: Optional[float] = None
    passed: bool


class FloatLayer(_Model):
    layer: str = Field(description="the linear's node name in the graph")
    weight_error: float = Field(description="the sensitivity it was ranked by: RMS(dequantized - W) / mean|W|")
    reason: str


class WeightOnlyGuardRecord(_Model):
    """What the weight-only accuracy guard (quant/weight_only_guard.py) moved back to float, and why."""

    ranked_by: str = Field(description="the per-layer sensitivity, highest moved first")
    candidates: int = Field(ge=0, description="layers weight_only_quantize quantized before the guard")
    rounds: list[GuardRound] = Field(description="one teacher-forced measurement per round: 1, 2, 4, ... more layers "
                                                 "in float, then the bisected counts")
    float_layers: list[FloatLayer] = Field(default_factory=list)
    activations: Optional[Literal["float", "bf16", "int8"]] = Field(
        default=None, description="the activations of the artifact's quantized layers (absent: float)")
    passed: bool


class WeightOnlyRecord(_Model):
    """How the weight-only codes were chosen (quant/weight_only.py; gptq / awq: quant/weight_only_inc.py)."""

    algorithm: Literal["rtn", "gptq", "awq"] = Field(description="rtn: round to nearest; gptq / awq: calibrated")
    implementation: str = Field(description="what chose the codes: ipexconvert (rtn), or the neural-compressor-pt "
                                "version that ran GPTQ / AWQ")
    calibration: Optional[str] = Field(default=None, description="gptq / awq: the text the codes were calibrated on "
                                       "and how much of it")
    layers: int = Field(default=0, ge=0, description="gptq / awq: linears the algorithm chose codes for (the pass "
                        "record's from_codes counts those quantized after merging); any other linear weight_only_quantize "
                        "quantizes (the LM head with quantize_lm_head) is rounded to nearest")
    int8_codes_clamped: int = Field(default=0, ge=0, description="gptq / awq int8: codes of -128 the algorithm chose, "
                                    "stored as -127 (int8 weight codes are symmetric, -127..127)")


class DecoderRecord(_Model):
    """A causal LM traced with its KV cache as inputs and outputs: how generate() drives it. Read off the
    signature at conversion (frontend/decoder_signature.py), checked against it at load (runtime/decoder.py)."""

    input_ids: str = Field(default="input_ids", description="int64 input [batch, seq]")
    logits: str = Field(default="logits", description="output [batch, 1, vocab] (the last position's logits) or "
                        "[batch, seq, vocab], of which generate() reads the last position")
    cache: list[tuple[str, str]] = Field(description="(past input, present output) of every cache tensor, "
                                         "[batch, kv_heads, past, head_dim] in, [.., past + seq, ..] out")
    cache_dim: str = Field(default="past", description="the dynamic dim of the cached length")
    bos_token_id: Optional[int] = None
    eos_token_ids: list[int] = Field(default_factory=list, description="generation stops at any of these")
    tokenizer: Optional[str] = Field(default=None, description="data file holding the Hugging Face tokenizer.json")


class Manifest(_Model):
    @model_validator(mode="before")
    @classmethod
    def _target_from_older_fields(cls, data: Any) -> Any:
        """Artifacts written before the target existed say `device` ("cpu") and `prepack_isa` (always null):
        that is the portable CPU target."""
        if isinstance(data, dict) and "target" not in data and ("device" in data or "prepack_isa" in data):
            data = dict(data)
            device, packed = data.pop("device", "cpu"), data.pop("prepack_isa", None)
            if packed is not None:
                raise ValueError(f"prepack_isa {packed!r}: artifacts store plain weights; packed ones are not readable")
            data["target"] = {"device": device}
        return data

    format: Literal["ipexconvert"] = "ipexconvert"
    format_version: int = FORMAT_VERSION
    producer: str = Field(description="ipexconvert version that wrote the file")
    torch_version: str
    created_at: str
    source: SourceRecord
    target: Target = Field(default_factory=Target, description="the device and ISA level the artifact was made for")
    dtype: Literal["fp32", "bf16", "int8", "int4"]
    passes: list[PassRecord] = Field(default_factory=list)
    quantization: Optional[dict[str, Any]] = None
    inputs: list[IOSpec]
    outputs: list[IOSpec]
    dims: dict[str, DimRange] = Field(default_factory=dict)
    accuracy: Optional[AccuracyRecord] = None
    weight_only: Optional[WeightOnlyRecord] = Field(
        default=None, description="weight-only artifacts (int4, weight-only int8): the algorithm that chose the codes")
    weight_only_guard: Optional[WeightOnlyGuardRecord] = Field(
        default=None, description="weight-only decoders: the accuracy guard's rounds and the layers it kept float")
    decoder: Optional[DecoderRecord] = Field(default=None, description="set for causal LMs with a KV cache")
    op_histogram: dict[str, int] = Field(default_factory=dict)
    fallback_ops: list[str] = Field(default_factory=list, description="ATen ops run through the generic fallback")
    graph_sha256: str = ""
    tensor_sha256: dict[str, str] = Field(default_factory=dict, description="sha256 of each tensor's bytes")
    content_sha256: str = Field(default="", description="sha256 over this manifest (without this field), the graph "
                                "and every tensor's name, dtype, shape and byte hash (see ipexconvert/artifact.py)")
