"""ConversionConfig: everything a conversion is asked to do, as one typed object.

The CLI (`ipexconvert optimize`, flags or `--config FILE`) and the Python API (`optimize(model,
config=..., **fields)`) build the same object, so a conversion is reproducible from its config file
and every setting is validated once, before any slow work. Things that cannot live in a file stay
call arguments of `optimize()`: the model object, example-input tensors, in-memory calibration
batches, a `--tune` evaluation callable, progress callbacks.

A config file is as trusted as the command line it replaces: `model_factory` and `tune.eval_fn` name
code that is imported and run, and `trust_pickle` allows unpickling. Nothing reads a config from an
artifact or a checkpoint (the manifest records the target, dtype and passes, not this object).

Environment variables are not configuration: they override process-wide runtime choices and are
listed, each with what it does, in ipexconvert/environment.py.
"""
from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Literal, Optional, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import UserInputError
from .quant.options import QuantOptions, WeightOnlyOptions
from .target import Target


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AccuracyBudget(_Model):
    """How close the artifact must be to eager PyTorch (None: the dtype's default)."""

    max_rel_error: Optional[float] = Field(default=None, ge=0, description="max |artifact - eager| / max |eager|")
    min_cosine: Optional[float] = Field(default=None, description="min cosine similarity to eager; weight-only decoders: "
                                        "the mean over positions of the teacher-forced logits' cosine")
    # weight-only decoders (int4, weight-only int8), judged teacher-forced on a text (decoder_accuracy.py)
    min_top1_agreement: Optional[float] = Field(default=None, ge=0, le=1, description="weight-only decoders: share of "
                                                "positions whose arg-max next token is eager's")
    max_perplexity_ratio: Optional[float] = Field(default=None, gt=0, description="weight-only decoders: perplexity on "
                                                  "the text / eager's")
    decoder_positions: int = Field(default=128, ge=1, le=4096, description="weight-only decoders: next-token "
                                   "predictions compared (capped by the model's positions)")


class CalibrationSource(_Model):
    """Where int8 calibration batches come from: exactly one of these (or in-memory batches passed to optimize())."""

    files: Optional[Path] = Field(default=None, description="a .safetensors file or a folder of them")
    text: Optional[Path] = Field(default=None, description="a text file, one sentence a line (models with a tokenizer); "
                                 "weight_only.algorithm gptq / awq: any UTF-8 text, cut into windows of tokens")
    synthetic: int = Field(default=0, ge=0, description="random batches (not recommended)")

    def given(self) -> list[str]:
        return [name for name, on in (("files", self.files is not None), ("text", self.text is not None),
                                      ("synthetic", self.synthetic > 0)) if on]


class DecoderSettings(_Model):
    """How generate() drives a decoder (a model whose signature is docs/decoders.md's); each one given replaces what
    the source says (a Hugging Face folder's config and tokenizer.json)."""

    eos_token_ids: list[int] = Field(default_factory=list, description="decoders: generation stops at any of these "
                                     "token ids (default: the Hugging Face config's, else none)")
    bos_token_id: Optional[int] = Field(default=None, ge=0, description="decoders: the beginning-of-sequence token id")
    tokenizer: Optional[Path] = Field(default=None, description="decoders: a Hugging Face tokenizer.json stored in the "
                                      "artifact (text prompts; the teacher-forced check's text)")
    kv_cache: Optional[Literal["bf16", "int8"]] = Field(
        default=None, description="decoders: store the KV cache in bf16 beside float32 activations (half its memory and "
        "of the bytes attention reads a token), or as int8 rows with a float32 scale per position and head (a quarter "
        "of float32's); default: the dtype the model computes in")

    @field_validator("eos_token_ids", mode="before")
    @classmethod
    def _one_id_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("eos_token_ids")
    @classmethod
    def _ids_not_negative(cls, value: list[int]) -> list[int]:
        if any(i < 0 for i in value):
            raise ValueError("token ids are 0 or more")
        return value

    def given(self) -> list[str]:
        return [f"decoder.{name}" for name, on in (("eos_token_ids", bool(self.eos_token_ids)),
                                                   ("bos_token_id", self.bos_token_id is not None),
                                                   ("tokenizer", self.tokenizer is not None),
                                                   ("kv_cache", self.kv_cache is not None)) if on]


class TuneConfig(_Model):
    """--tune: search quantization settings until eval_fn(model) is within tolerable_loss of fp32."""

    eval_fn: str = Field(description="package.module:function taking the loaded model, returning a score")
    tolerable_loss: float = Field(default=0.01, ge=0, lt=1, description="relative score loss allowed")


class ConversionConfig(_Model):
    dtype: Literal["fp32", "bf16", "int8", "int4"] = Field(
        default="fp32", description="what the artifact computes in; int4: 4-bit weights (weight-only, see "
        "weight_only: activations rounded to int8 or float)")
    target: Target = Field(default_factory=Target, description='"cpu" (portable) or "cpu:LEVEL"')
    inputs: list[str] = Field(default_factory=list, description="NAME:SHAPE:DTYPE, e.g. x:batch,3,224,224:float32")
    passes: Optional[list[str]] = Field(default=None, description="a pass list replacing the dtype's pipeline")
    skip_passes: list[str] = Field(default_factory=list, description="passes to leave out of the pipeline")
    accuracy: AccuracyBudget = Field(default_factory=AccuracyBudget)
    model_factory: Optional[str] = Field(default=None, description="package.module:function building the model")
    model_kwargs: dict[str, Any] = Field(default_factory=dict, description="keyword arguments for model_factory")
    trust_pickle: bool = Field(default=False, description="allow sources that run code from the file when loaded")
    avoid_kernels: list[str] = Field(default_factory=list, description="kernel factories or families (`ipexconvert doctor "
                                     "--kernels`) the accuracy check and the int8 guard must not use, e.g. onednn_direct")
    decoder: DecoderSettings = Field(default_factory=DecoderSettings)
    # int8 only
    int8_scheme: Literal["static", "weight-only"] = Field(
        default="static", description="int8: static (int8 activations and weights, calibrated) or weight-only "
        "(int8 weights, no calibration data; activations as weight_only.activations says)")
    # int4 and weight-only int8
    weight_only: WeightOnlyOptions = Field(default_factory=WeightOnlyOptions)
    # static int8; calibration.text also for weight_only.algorithm gptq / awq
    calibration: CalibrationSource = Field(default_factory=CalibrationSource)
    quantization: QuantOptions = Field(default_factory=QuantOptions)
    qconfig_out: Optional[Path] = Field(default=None, description="write the final quantization plan here")
    tune: Optional[TuneConfig] = Field(default=None, description="search int8 settings against a metric of yours")

    @field_validator("target", mode="before")
    @classmethod
    def _target_from_text(cls, value: Any) -> Any:
        return Target.parse(value) if isinstance(value, str) else value

    @property
    def weight_only_selected(self) -> bool:
        """Weight-only quantization: --dtype int4, or int8 with int8_scheme "weight-only"."""
        return self.dtype == "int4" or (self.dtype == "int8" and self.int8_scheme == "weight-only")

    def _changed(self, *names: str) -> list[str]:
        return [name for name in names
                if getattr(self, name) != type(self).model_fields[name].get_default(call_default_factory=True)]

    @model_validator(mode="after")
    def _int8_fields_need_int8(self) -> "ConversionConfig":
        if self.dtype != "int8" and self._changed("int8_scheme"):
            raise ValueError(f"int8_scheme: an int8 setting, but this conversion is {self.dtype}"
                             + (" (always weight-only)" if self.dtype == "int4" else ""))
        if not self.weight_only_selected and self._changed("weight_only"):
            raise ValueError(f"weight_only: settings for --dtype int4 and weight-only int8, but this conversion is "
                             f"{self.dtype}{' (static)' if self.dtype == 'int8' else ''}")
        if self.dtype == "int8" and self.weight_only_selected and not self.weight_only.symmetric:
            raise ValueError("weight_only.symmetric: int8 weights are always symmetric (asymmetric is for int4)")
        calibrates = self.weight_only_selected and self.weight_only.algorithm != "rtn"  # gptq / awq read text
        not_text = [name for name in self.calibration.given() if name != "text"]
        if calibrates and not_text:
            raise ValueError(f"calibration.{not_text[0]}: weight_only.algorithm {self.weight_only.algorithm} calibrates "
                             "on text only (calibration.text)")
        if self.dtype != "int8" or self.weight_only_selected:
            used = [name for name in self._changed("calibration", "quantization", "qconfig_out", "tune")
                    if not (calibrates and name == "calibration")]
            if used:
                kind = "static int8 settings, but this conversion is weight-only int8" if self.dtype == "int8" else \
                    f"int8 settings, but this conversion is {self.dtype}"
                raise ValueError(f"{', '.join(used)}: {kind}")
        decoder_budgets = [f"accuracy.{name}" for name in ("min_top1_agreement", "max_perplexity_ratio", "decoder_positions")
                           if getattr(self.accuracy, name) != AccuracyBudget.model_fields[name].default]
        if decoder_budgets and not self.weight_only_selected:
            raise ValueError(f"{', '.join(decoder_budgets)}: budgets of the teacher-forced check of weight-only decoders "
                             f"(--dtype int4, or int8 weight-only), but this conversion is {self.dtype}")
        if len(self.calibration.given()) > 1:
            raise ValueError(f"more than one calibration source given ({', '.join(self.calibration.given())}); pass one")
        return self

    @classmethod
    def build(cls, base: Optional["ConversionConfig"] = None, **fields: Any) -> "ConversionConfig":
        """`base` (or the defaults) with `fields` applied; the flat names of `FLAT_FIELDS` reach into the
        nested sections. A bad value is a UserInputError naming the field."""
        data = base.model_dump(exclude_unset=True) if base is not None else {}
        for name, value in fields.items():
            if value is None:
                continue
            if name in FLAT_FIELDS:
                section, key = FLAT_FIELDS[name]
                data.setdefault(section, {})
                if key is None:  # a section given as an object (quant=QuantOptions(...)): its set fields win
                    given = value.model_dump(exclude_unset=True) if isinstance(value, BaseModel) else dict(value)
                    data[section] = {**data[section], **given}
                else:
                    data[section][key] = value
            else:
                data[name] = value
        return cls.validated(data, "the conversion settings")

    @classmethod
    def validated(cls, data: dict, where: str) -> "ConversionConfig":
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            first = e.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "config"
            given = first.get("input")
            shown = f" = {given!r}" if first["loc"] and isinstance(given, (str, int, float)) else ""
            raise UserInputError(f"{where}: {field}{shown}: {first['msg'].removeprefix('Value error, ')}",
                                 "see docs/configuration.md for every field and what it takes") from None

    @classmethod
    def from_file(cls, path: Path) -> "ConversionConfig":
        """A config from a .json or .toml file (the same fields; see docs/configuration.md)."""
        path = Path(path)
        if not path.is_file():
            raise UserInputError(f"--config {path} is not a file", "pass a .json or .toml file")
        try:
            text = path.read_text(encoding="utf-8")
            data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise UserInputError(f"--config {path} could not be read: {' '.join(str(e).split())}",
                                 "write it as JSON (.json) or TOML (.toml)") from None
        if not isinstance(data, dict):
            raise UserInputError(f"--config {path} holds a {type(data).__name__}, not a table of settings",
                                 'write an object, e.g. {"dtype": "bf16"}')
        return cls.validated(data, str(path))


# Flat keyword names optimize() and the CLI take -> (section, field) of the config (field None: the whole section).
FLAT_FIELDS: dict[str, tuple[str, Optional[str]]] = {
    "max_rel_error": ("accuracy", "max_rel_error"),
    "min_cosine": ("accuracy", "min_cosine"),
    "min_top1_agreement": ("accuracy", "min_top1_agreement"),
    "max_perplexity_ratio": ("accuracy", "max_perplexity_ratio"),
    "decoder_positions": ("accuracy", "decoder_positions"),
    "calib_files": ("calibration", "files"),
    "calib_text": ("calibration", "text"),
    "calib_synthetic": ("calibration", "synthetic"),
    "quant": ("quantization", None),
    "eos_token_ids": ("decoder", "eos_token_ids"),
    "bos_token_id": ("decoder", "bos_token_id"),
    "tokenizer": ("decoder", "tokenizer"),
    "kv_cache": ("decoder", "kv_cache"),
    "group_size": ("weight_only", "group_size"),
    "woq": ("weight_only", None),
}


def _type_name(annotation: Any) -> str:
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    for noise in ("typing.", "pathlib.", "ipexconvert.config.", "ipexconvert.target."):
        text = text.replace(noise, "")
    return text.replace("NoneType", "None").replace("|", "\\|")


def _rows(model: type[BaseModel], prefix: str = "") -> list[str]:
    rows = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        inner = [a for a in (annotation, *get_args(annotation)) if isinstance(a, type) and issubclass(a, BaseModel)]
        if inner and inner[0] is not Target:
            rows += _rows(inner[0], f"{prefix}{name}.")
            continue
        default = field.get_default(call_default_factory=True)
        shown = "required" if field.is_required() else json.dumps(default if not isinstance(default, (Path, Target))
                                                                  else str(default))
        what = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{prefix}{name}` | `{_type_name(annotation)}` | `{shown}` | {what} |")
    return rows


def configuration_markdown() -> str:
    """docs/configuration.md: every config field and every environment variable, generated from the code
    (`python -m ipexconvert.gen_docs`; tests/test_generated_docs.py checks it is current)."""
    from .environment import VARIABLES

    flat = ", ".join(f"`{name}` → `{section}{'.' + key if key else ''}`" for name, (section, key) in FLAT_FIELDS.items())
    lines = [
        "# Configuration", "",
        "Generated by `python -m ipexconvert.gen_docs`; do not edit by hand.", "",
        "## Conversion settings", "",
        "`ipexconvert optimize SOURCE --config FILE` (JSON or TOML) and `ipexconvert.optimize(model, config=...)`",
        "take one `ConversionConfig` (`ipexconvert/config.py`). Flags on the command line, and keyword arguments",
        "of `optimize()`, override the file's fields. Nested fields are tables in TOML / objects in JSON.",
        f"Flat keyword names of `optimize()`: {flat}.", "",
        "A config file is as trusted as the command line: `model_factory` and `tune.eval_fn` name code that is",
        "imported and run, and `trust_pickle` allows unpickling; write your own, never take one from a model's",
        "source. Nothing reads a config from an artifact.", "",
        "```toml", 'dtype = "int8"', 'target = "cpu"', 'inputs = ["input_ids:batch,seq:int64", "attention_mask:batch,seq:int64"]',
        "", "[calibration]", 'text = "sentences.txt"', "", "[quantization]", 'smoothquant = "auto"', "max_error = 0.0015", "```",
        "", "| field | type | default | what |", "| --- | --- | --- | --- |", *_rows(ConversionConfig), "",
        "`quantization.*` are the int8 settings (`ipexconvert/quant/options.py`), also the `--observer`, `--smoothquant`,",
        "`--max-error`, `--guard-metric`, `--no-guard`, `--float-dtype` and `--qconfig-in` flags.", "",
        "`weight_only.*` are the weight-only settings (`dtype = \"int4\"`, or `dtype = \"int8\"` with",
        "`int8_scheme = \"weight-only\"`; docs/quantization.md): activations as `weight_only.activations` says; no calibration data,",
        "except `calibration.text` for `weight_only.algorithm = \"gptq\"` or `\"awq\"` (docs/decoders.md).", "",
        "## Environment variables", "",
        "Overrides of process-wide runtime choices, not conversion settings; every one ipexconvert reads",
        "(`ipexconvert/environment.py`).", "",
        "| variable | default | effect |", "| --- | --- | --- |",
        *[f"| `{v.name}` | {v.default} | {v.effect} |" for v in VARIABLES.values()], "",
    ]
    return "\n".join(lines)

