"""GPTQ and AWQ weight-only codes through Intel Neural Compressor (`neural-compressor-pt`, its `neural_compressor.torch`
weight-only algorithms, which run on stock torch without IPEX): `--woq-algorithm gptq|awq` with `--calib-text FILE`,
for decoders (a causal LM traced with its KV cache, examples/decoder_cache.py).

Where it runs. api.optimize hands `IncWeightOnly.before_trace` to the importer (ImportRequest.before_trace), which
calls it with the eager decoder just before torch.export. AWQ does not only round a linear's weight: it multiplies
the weight's input channels by scales and divides the norm feeding the layer by the same scales (q/k/v after
input_layernorm, gate/up after post_attention_layernorm), so the float program must be the one AWQ changed. Run
before the trace, the traced program carries AWQ's norms and scaled weights, and every later step (passes, guard,
accuracy check) sees one consistent program. The eager oracle stays the original model: the artifact is judged
against the model the user gave.

What runs:
1. the calibration text goes through the model's own tokenizer once; the token stream is cut into up to MAX_WINDOWS
   windows of WINDOW_TOKENS tokens spaced evenly over it (the same windows every time: nothing is sampled);
2. a deep copy of the decoder's causal LM, wrapped as input_ids -> logits (`CausalLMLogits`), goes through INC's
   prepare, one call per window, and convert, with GPTQConfig / AWQConfig set to our bits, group size and symmetry
   (GPTQ's act_order stays off: its column permutation has no place in our format);
3. every INCWeightOnlyLinear INC leaves becomes a QuantizedWeight (quant/weight_only.py) keyed by the name of the
   weight it replaces, which is the IR constant name (the torch importer names a parameter constant by its name in
   the traced module, frontend/torch/export.py), and is swapped in the copy for a float nn.Linear holding the weight
   INC rounded: the original one (GPTQ), or the one AWQ scaled, recorded just before AWQ rounds it;
4. the copy, wrapped again as a DecoderWithCache (same parameter names), is what torch.export traces.
   weight_only_quantize takes the codes (PassOptions.weight_codes; merge_linears carries them to the merged Q/K/V
   and gate/up weights) and rounds any other linear it quantizes to nearest (the LM head with --quantize-lm-head:
   INC leaves it float).

INC's conventions, converted (tests/quant/test_weight_only_inc.py checks, per layer, that our codes dequantize to
INC's own dequantized weight):
- symmetric codes are signed in INC: int4 -8..7 (ours: stored + 8 as 0..15, two a byte, low nibble first), int8
  -128..127 (ours: -127..127, the int8 kernels take symmetric codes). GPTQ's symmetric grid is
  scale = 2 max|w| / (2^bits - 1), codes round(w / scale) clamped to -2^(bits-1)..2^(bits-1) - 1, so a row whose
  largest magnitude is negative lands on -128 (and GPTQ's error feedback pushes other weights there too); AWQ's
  clipping search shrinks the range and clamps the weights beyond it, to -128 as well. So -128 does occur (hundreds
  of codes in tiny-llama), and each is stored as -127, the nearest code the format has (one scale step from INC's
  value), and counted (WeightOnlyRecord.int8_codes_clamped). int4 needs nothing: -8 is a code of ours.
- asymmetric int4: codes 0..15 and a zero point per group, round(-min / scale), in 0..15 since INC's range holds 0;
  dequantized (code - zero) * scale like ours.
- scales: INC's default ("optimum") packing stores them as float16; for the run, the INCWeightOnlyLinear INC builds
  is one with use_optimum_format=False, which keeps the float32 scales, [N, K / group] like ours.
- our group "channel" is INC's group_size -1 (one group of all in_features).

INC internals this depends on (checked with neural-compressor-pt 3.10), each patch scoped to the run:
- the INCWeightOnlyLinear name in INC's rtn and gptq modules (for the float32 scales above);
- ActAwareWeightQuant.apply_quantize_with_clip, wrapped to record the float weights AWQ has scaled before it rounds;
- the LM is wrapped without a `config` attribute: INC's AWQ sets config.return_dict = False to jit.trace a Hugging
  Face model, which transformers 5 models cannot run with, and then finds no norm to fold its scales into;
- GPTQ and AWQ resolve `model_path` even when they read no weights from it, and their default "" goes to the Hugging
  Face hub's repo-id check, which refuses it: an existing folder is passed (never read);
- transformers is imported before INC: INC's rtn module binds `transformers` at import only if it is already loaded.
AWQ runs with folding=True: scales only where a norm absorbs them (o_proj and down_proj get the clipping search only),
so the traced graph has no multiplication of its own before a linear.
"""
from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.metadata
import logging
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

import torch
from torch import nn

from ..errors import UserInputError
from ..frontend.base import TraceSubject
from ..ir.ops.woq_linear import SYMMETRIC_INT4_ZERO
from ..manifest import WeightOnlyRecord
from .options import WeightOnlyOptions
from .weight_only import QuantizedWeight, WeightCodes, pack_int4

WINDOW_TOKENS = 128  # tokens a calibration window holds (fewer where the model has fewer positions)
MAX_WINDOWS = 16  # windows calibrated on: 2048 tokens, INC's forward calls on a CPU stay short
MIN_TOKENS = 16  # a shorter text calibrates nothing worth the name
INC_DISTRIBUTION = "neural-compressor-pt"
INSTALL = "pip install neural-compressor-pt accelerate (or pip install 'ipexconvert[woq]')"
_INC_LOGGERS = ("neural_compressor", "torchao")  # torchao: imported by INC, it logs each kernel library it lacks
_INC_MODULES = ("neural_compressor.torch.quantization", "neural_compressor.torch.algorithms.weight_only.rtn",
                "neural_compressor.torch.algorithms.weight_only.gptq",  # imports accelerate
                "neural_compressor.torch.algorithms.weight_only.awq")


def check_available() -> str:
    """The installed neural-compressor-pt version; a UserInputError naming the pip command when it, or a module its
    GPTQ / AWQ import (accelerate), is missing. Imports INC (a few seconds), before any slow work of the conversion."""
    try:
        importlib.import_module("transformers")  # before INC: see the module docstring
    except ModuleNotFoundError:
        raise UserInputError("--woq-algorithm gptq and awq need transformers", "pip install 'ipexconvert[hf]'") from None
    try:
        with _quiet():
            for module in _INC_MODULES:
                importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise UserInputError(f"--woq-algorithm gptq and awq run Intel Neural Compressor's implementations, and "
                             f"{e.name} is not installed", INSTALL) from None
    try:
        return importlib.metadata.version(INC_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:  # the full neural-compressor distribution carries the same modules
        return importlib.metadata.version("neural-compressor")


def prepare_run(settings: WeightOnlyOptions, bits: int, text: Optional[Path],
                say: Callable[[str], None] = lambda _m: None) -> "IncWeightOnly":
    """The run api.optimize hands to the importer; every setting and INC itself checked now, before any slow work."""
    algorithm = settings.algorithm
    if text is None:
        raise UserInputError(f"--woq-algorithm {algorithm} chooses codes from the activations of calibration text, "
                             "and none was given",
                             "pass --calib-text FILE (calibration.text): UTF-8 text like what the model will read; the "
                             f"model's tokenizer cuts it into up to {MAX_WINDOWS} windows of {WINDOW_TOKENS} tokens "
                             "(or use --woq-algorithm rtn, which needs no data)")
    if not Path(text).is_file():
        raise UserInputError(f"--calib-text {text} is not a file", "pass a UTF-8 text file")
    return IncWeightOnly(settings=settings, bits=bits, text=Path(text), version=check_available(), say=say)


@dataclass
class IncWeightOnly:
    """One conversion's GPTQ / AWQ run: `before_trace` (called by the importer) fills `codes` and `record`."""

    settings: WeightOnlyOptions
    bits: int
    text: Path
    version: str
    say: Callable[[str], None] = lambda _m: None
    codes: WeightCodes = field(default_factory=WeightCodes)
    record: Optional[WeightOnlyRecord] = None

    def before_trace(self, subject: TraceSubject) -> nn.Module:
        from ..examples.decoder_cache import DecoderWithCache
        from .convert import source_tokenizer

        algorithm = self.settings.algorithm
        if subject.decoder is None or not isinstance(subject.module, DecoderWithCache):
            raise UserInputError(f"--woq-algorithm {algorithm} runs on Hugging Face causal LMs (a model folder with "
                                 f"its tokenizer), and {subject.location} is not one", "use --woq-algorithm rtn")
        windows, total = calibration_windows(self.text, source_tokenizer(subject), subject.module.shape.max_positions)
        self.say(f"{algorithm}: Intel Neural Compressor {self.version} calibrating on {len(windows)} window(s) of "
                 f"{windows[0].shape[1]} tokens of {self.text.name}")
        runner = CausalLMLogits(copy.deepcopy(subject.module.lm))
        floats = {name: (m.weight.detach().clone(), None if m.bias is None else m.bias.detach().clone())
                  for name, m in runner.named_modules() if isinstance(m, nn.Linear)}
        runner = run_inc(runner, windows, self.settings, self.bits, floats)
        codes, clamped = take_codes(runner, floats, self.bits, self.settings.symmetric or self.bits == 8)
        traced = DecoderWithCache(runner.lm).eval()
        prefix = next(name for name, m in traced.named_modules() if m is runner.lm)
        # runner's names start "lm." (its attribute), the traced module's `prefix` (DecoderWithCache's)
        self.codes = WeightCodes({f"{prefix}.{name.removeprefix('lm.')}.weight": q for name, q in codes.items()})
        self.record = WeightOnlyRecord(
            algorithm=algorithm, implementation=f"{INC_DISTRIBUTION} {self.version}", layers=len(codes),
            calibration=f"{self.text.name}: {len(windows)} window(s) of {windows[0].shape[1]} tokens ({total} in the "
                        "text), one call each", int8_codes_clamped=clamped)
        return traced


class CausalLMLogits(nn.Module):
    """The causal LM as INC drives it, input_ids -> logits. No `config` attribute on purpose: INC's AWQ would set
    config.return_dict = False to jit.trace it, which transformers 5 models cannot run with."""

    def __init__(self, lm: nn.Module):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=input_ids, use_cache=False).logits


def calibration_windows(path: Path, tokenizer, max_positions: int) -> tuple[list[torch.Tensor], int]:
    """Token windows [1, T] of the text (T = WINDOW_TOKENS or fewer where the model has fewer positions), up to
    MAX_WINDOWS spaced evenly over its token stream, and that stream's length."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise UserInputError(f"calibration text file {path} is not UTF-8 text ({e})", "save it as UTF-8") from None
    ids = [int(i) for i in tokenizer(text, verbose=False)["input_ids"]] if text.strip() else []
    if len(ids) < MIN_TOKENS:
        raise UserInputError(f"calibration text file {path} holds {len(ids)} tokens, fewer than {MIN_TOKENS}",
                             f"pass more text: up to {MAX_WINDOWS * WINDOW_TOKENS} tokens are used")
    length = min(WINDOW_TOKENS, max_positions, len(ids))
    count = min(MAX_WINDOWS, len(ids) // length)
    starts = [i * (len(ids) - length) // max(count - 1, 1) for i in range(count)]  # spaced >= length apart
    return [torch.tensor([ids[s:s + length]], dtype=torch.long) for s in starts], len(ids)


def run_inc(runner: CausalLMLogits, windows: list[torch.Tensor], settings: WeightOnlyOptions, bits: int,
            floats: dict[str, tuple]) -> CausalLMLogits:
    """INC's prepare, calibration calls and convert on `runner` (changed in place); `floats` gets the weights AWQ
    scaled, by module name, as they were before it rounded them."""
    from neural_compressor.torch.quantization import AWQConfig, GPTQConfig, convert, prepare

    group = settings.group_size if settings.group_size is not None else (128 if bits == 4 else "channel")
    common = dict(bits=bits, use_sym=settings.symmetric or bits == 8, group_size=-1 if group == "channel" else group,
                  model_path=tempfile.gettempdir())  # an existing folder, never read (module docstring)
    if settings.algorithm == "gptq":
        config = GPTQConfig(**common, act_order=False)
    else:
        config = AWQConfig(**common, use_auto_scale=True, use_auto_clip=True, folding=True)
    with _patched(floats), _quiet(), torch.no_grad():
        prepared = prepare(runner, config, example_inputs=windows[0])
        for window in windows:
            prepared(window)
        quantized = convert(prepared)
    _drop_forward_overrides(quantized)
    return quantized


def take_codes(runner: nn.Module, floats: dict[str, tuple], bits: int, symmetric: bool
               ) -> tuple[dict[str, QuantizedWeight], int]:
    """Our codes of every INC weight-only linear in `runner` by module name, each swapped for a float nn.Linear with
    the weight INC rounded (from `floats`); and how many int8 codes were clamped from -128 to -127."""
    from neural_compressor.torch.algorithms.weight_only.modules import INCWeightOnlyLinear

    codes, clamped = {}, 0
    for name, module in list(runner.named_modules()):
        if isinstance(module, INCWeightOnlyLinear):
            codes[name], count = our_codes(module, bits, symmetric)
            clamped += count
            weight, bias = floats[name]
            linear = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, dtype=weight.dtype)
            linear.weight.data.copy_(weight)
            if bias is not None:
                linear.bias.data.copy_(bias)
            parent, _, child = name.rpartition(".")
            setattr(runner.get_submodule(parent), child, linear.eval())
    leftover = [name for name, m in runner.named_modules() if type(m).__module__.startswith("neural_compressor")]
    if leftover:  # e.g. AWQ's MulLinear, which folding=True should never leave
        raise RuntimeError(f"Intel Neural Compressor left modules of its own in the model: {', '.join(leftover)}")
    return codes, clamped


def our_codes(module, bits: int, symmetric: bool) -> tuple[QuantizedWeight, int]:
    """One INCWeightOnlyLinear's codes in our format (module docstring: the conventions), and the int8 codes clamped
    from -128 to -127."""
    unpacked = module.unpack()
    q, scales, zero = unpacked["int_weight"].to(torch.int32), unpacked["scales"].float(), unpacked["zp"]
    n, k = q.shape
    group = module.group_size
    g_idx = getattr(module, "g_idx", None)  # a column's group; recover() fills in the plain one
    in_order = g_idx is None or torch.equal(g_idx.long(), torch.arange(k) // group)
    if module.bits != bits or not in_order or tuple(scales.shape) != (n, k // group):
        raise RuntimeError(f"unexpected INC weight-only linear: int{module.bits}, groups of {group}, scales "
                           f"{tuple(scales.shape)} for a {n}x{k} weight, columns {'in' if in_order else 'out of'} order")
    if not bool(torch.isfinite(scales).all()) or bool((scales <= 0).any()):
        raise RuntimeError("INC chose scales that are not positive finite numbers")
    zero = None if zero is None else zero.to(torch.int32)
    if symmetric:
        if zero is not None:  # INC's optimum packing stores symmetric codes shifted by 2^(bits-1) with that zero point
            q = q - zero.repeat_interleave(group, dim=1)
        _check_range(q, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        if bits == 8:
            codes = q.clamp_min(-127).to(torch.int8).contiguous()  # -128 -> -127 (module docstring)
            return QuantizedWeight(codes, scales.contiguous(), None, 8, group), int((q == -128).sum())
        return QuantizedWeight(pack_int4((q + SYMMETRIC_INT4_ZERO).to(torch.uint8)), scales.contiguous(), None, 4,
                               group), 0
    if zero is None or bits != 4:
        raise RuntimeError("asymmetric INC codes without zero points")
    _check_range(q, 0, 15)
    _check_range(zero, 0, 15)
    return QuantizedWeight(pack_int4(q.to(torch.uint8)), scales.contiguous(), zero.to(torch.uint8).contiguous(), 4,
                           group), 0


def _check_range(values: torch.Tensor, low: int, high: int) -> None:
    if values.numel() and (int(values.min()) < low or int(values.max()) > high):
        raise RuntimeError(f"INC gave codes {int(values.min())}..{int(values.max())}, outside {low}..{high}")


@contextlib.contextmanager
def _patched(floats: dict[str, tuple]) -> Iterator[None]:
    """INC's internals as this run needs them (module docstring), restored after."""
    from unittest import mock

    from neural_compressor.torch.algorithms.weight_only import awq, gptq, modules, rtn

    class PlainWeightOnlyLinear(modules.INCWeightOnlyLinear):
        """INC's weight-only linear with float32 scales (use_optimum_format=False)."""

        def __init__(self, *args, **kwargs):
            kwargs["use_optimum_format"] = False
            super().__init__(*args, **kwargs)

    rounding = awq.ActAwareWeightQuant.apply_quantize_with_clip

    def record_then_round(self, *args, **kwargs):
        for name, m in self.model.named_modules():  # scaled by AWQ, not rounded yet
            if isinstance(m, nn.Linear):
                floats[name] = (m.weight.detach().clone(), None if m.bias is None else m.bias.detach().clone())
        return rounding(self, *args, **kwargs)

    with mock.patch.object(rtn, "INCWeightOnlyLinear", PlainWeightOnlyLinear), \
            mock.patch.object(gptq, "INCWeightOnlyLinear", PlainWeightOnlyLinear), \
            mock.patch.object(awq.ActAwareWeightQuant, "apply_quantize_with_clip", record_then_round):
        yield


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """INC's info logs and its and transformers' warnings during the run speak of INC's internals (jit tracing,
    layers it skips, deprecated attributes), nothing a user can act on; errors still show."""
    def errors_only(record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR

    loggers = [logging.getLogger(name) for name in _INC_LOGGERS]
    for logger in loggers:  # a filter on the logger survives INC's logger setup, which replaces its handlers
        logger.addFilter(errors_only)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger in loggers:
            logger.removeFilter(errors_only)


def _drop_forward_overrides(model: nn.Module) -> None:
    """INC's prepare replaces the first block's forward (and the model's) by instance attributes and its convert puts
    the originals back the same way; drop those, so the modules are plain again."""
    for m in model.modules():
        for attr in ("forward", "forward_orig"):
            value = vars(m).get(attr)
            if getattr(value, "__self__", None) is m and getattr(value, "__func__", None) is type(m).forward:
                del m.__dict__[attr]
