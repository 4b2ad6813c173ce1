"""The int8 conversion: float passes -> calibration -> plan -> accuracy guard -> int8 passes.

api.optimize() calls quantize_program() for --dtype int8. The guard builds candidate
programs in memory (no files) and runs them with the real executor and kernels, so what
it measures is what the artifact will do.
"""
from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch

from ..accuracy import flatten_outputs
from ..errors import AccuracyError, UserInputError
from ..ir import Program
from ..manifest import PassRecord
from ..passes import PassOptions, run_pipeline
from ..passes.pipeline import CALIBRATE
from ..target import Target
from . import data
from .calibrate import bind_dims
from .guard import choose_metric, guard
from .options import QuantOptions
from .model_ranges import MODEL, ModelRanges, plan_from_ranges, take_model_ranges
from .plan import Quantization, QuantPlan
from .planner import plan_quantization

SYNTHETIC_WARNING = ("calibrating INT8 on RANDOM synthetic inputs: activation ranges will not match real data and "
                     "accuracy on real inputs may be poor; pass --calib or --calib-text with real samples")


def default_float_dtype() -> str:
    """bfloat16 for ops without an int8 kernel, whatever CPU converts: the artifact does not depend
    on the converting machine. A CPU without native bf16 computes those ops in float32 from the
    bf16 weights at load (backends/cpu/compute_precision.py)."""
    return "bfloat16"


def _input_specs(program: Program) -> dict:
    return {n: program.graph.values[n] for n in program.graph.inputs}


def check_calibration_args(calibration, calib_text, calib_synthetic: int, required: bool = True) -> None:
    """Exactly one calibration source (at most one where not `required`: a model that may state its own
    ranges, an ONNX one); checked before any slow work (loading, export)."""
    given = [x for x in (calibration, calib_text) if x is not None] + ([calib_synthetic] if calib_synthetic else [])
    if not given and required:
        raise UserInputError("--dtype int8 needs calibration data to choose activation ranges",
                             "pass --calib FILE_OR_FOLDER (safetensors batches), --calib-text FILE (one sentence "
                             "a line, for models with a tokenizer), or --calib-synthetic N to calibrate on random "
                             "inputs (not recommended)")
    if len(given) > 1:
        raise UserInputError("more than one calibration source given", "pass only one of --calib, --calib-text, --calib-synthetic")
    if calib_synthetic < 0:
        raise UserInputError(f"--calib-synthetic {calib_synthetic}", "pass a positive number of random batches")


def calibration_set(program: Program, source, calibration, calib_text, calib_synthetic: int) -> data.CalibrationSet:
    """The calibration batches from whichever source the user gave (exactly one)."""
    check_calibration_args(calibration, calib_text, calib_synthetic)
    specs, dims = _input_specs(program), program.graph.dims
    if isinstance(calibration, data.CalibrationSet):
        return calibration
    if isinstance(calibration, (str, Path)):
        return data.load_calibration_files(calibration, specs, dims)
    if calibration is not None:
        batches = [dict(b) for b in calibration]
        if not batches:
            raise UserInputError("the calibration list is empty", "pass at least one batch of inputs")
        return data.validated_set(batches, specs, dims, "calibration batches from the caller")
    if calib_text is not None:
        tokenizer = source_tokenizer(source)
        return data.text_calibration(calib_text, tokenizer, specs, dims)
    warnings.warn(SYNTHETIC_WARNING, UserWarning, stacklevel=3)
    return data.synthetic_calibration(calib_synthetic, specs, dims, int_high=source.int_high)


def source_tokenizer(source):
    """The Hugging Face tokenizer that belongs to the model (HF folders and the MiniLM example)."""
    folder = source.tokenizer_folder
    if folder is None:
        raise UserInputError("--calib-text needs the model's tokenizer, and this source has none",
                             "convert a Hugging Face folder that holds its tokenizer, or pass token batches with --calib")
    import transformers

    try:
        return transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception as e:  # transformers raises many types for a folder without a usable tokenizer
        raise UserInputError(f"could not load the tokenizer from {folder}: {e}",
                             "pass token batches with --calib instead") from None


@dataclass
class TuneSettings:
    """--tune: search quantization settings until eval_fn(artifact) is within tolerable_loss of fp32."""

    eval_fn: Callable  # (loaded model) -> score
    tolerable_loss: float = 0.01  # relative: (fp32 - int8) / |fp32| for a higher-is-better score
    higher_is_better: bool = True
    max_trials: int = 8


LoadFn = Callable[[Program, str], object]  # (program, dtype) -> a loaded model like load_artifact() returns


def quantize_program(program: Program, names: list[str], source, options: QuantOptions, *, calibration=None,
                     calib_text=None, calib_synthetic: int = 0, say: Callable[[str], None] = lambda _m: None,
                     progress_bar=None, tune: Optional[TuneSettings] = None,
                     load: Optional[LoadFn] = None, target: Target = Target(),
                     avoid_kernels: frozenset[str] = frozenset()
                     ) -> tuple[Program, list[PassRecord], QuantPlan, list[dict]]:
    """The int8 program, all pass records, the final plan, and the held-out batches (for the final check)."""
    cut = names.index(CALIBRATE)  # pipeline_for puts the stage into every int8 pipeline
    records: list[PassRecord] = []
    if any(n.op == "fake_quantize" for n in program.graph.nodes):
        # Before the float passes, so fusions see the plain graph; constants folded first (a QDQ model
        # dequantizes its weights and fake-quantizes some constants).
        records = run_pipeline(program, ["constant_fold"], PassOptions(dtype="int8", target=target))
    ranges = take_model_ranges(program)
    if ranges:
        say(f"int8 input ranges of {len(ranges)} layer(s) come from {MODEL}")
    records += run_pipeline(program, names[:cut], PassOptions(dtype="int8", target=target),
                            on_pass=lambda n: say(f"pass {n}"))
    if ranges and calibration is None and calib_text is None and not calib_synthetic:
        cal = _check_batches(program, source)
    else:
        cal = calibration_set(program, source, calibration, calib_text, calib_synthetic)
    calib, held_out = cal.split(options.held_out_fraction)
    float_dtype = options.float_dtype or default_float_dtype()
    rest = [n for n in names[cut + 1:] if n != "to_bf16" or float_dtype == "bfloat16"]
    say(f"calibrating on {cal.description}")
    with torch.no_grad():
        reference = [flatten_outputs(source.eager(**b)) for b in held_out]
    search = _Candidates(program, rest, cal, calib, held_out, reference, float_dtype, say,
                         progress_bar or _stage_messages(say), target, avoid_kernels, ranges)
    if tune is None:
        final, rest_records, plan = search.build(options)
    else:
        if load is None:
            raise ValueError("tuning needs a load function")
        final, rest_records, plan = _tune(search, options, tune, load, say)
    return final, records + rest_records, plan, held_out


def _check_batches(program: Program, source) -> data.CalibrationSet:
    """A model that states its own ranges needs no calibration data; random batches only exercise the
    accuracy guard and the final check against the source."""
    cal = data.synthetic_calibration(MODEL_RANGE_CHECK_BATCHES, _input_specs(program), program.graph.dims,
                                     int_high=source.int_high)
    cal.description = f"ranges from {MODEL}; accuracy checked on {MODEL_RANGE_CHECK_BATCHES} random batches"
    cal.synthetic = False  # nothing was calibrated on them
    return cal


MODEL_RANGE_CHECK_BATCHES = 4


def _stage_messages(say: Callable[[str], None]):
    """Without a progress bar: announce each calibration stage once, count no batches."""

    def stage(description: str, total: int) -> Callable[[], None]:
        say(description)
        return lambda: None

    return stage


class _Candidates:
    """Builds int8 programs from one float program and calibration set, for given options."""

    def __init__(self, float_program, rest, cal, calib, held_out, reference, float_dtype, say, progress,
                 target: Target, avoid_kernels: frozenset[str], ranges: ModelRanges):
        self.float_program, self.rest, self.cal, self.target = float_program, rest, cal, target
        self.ranges = ranges  # stated by the model (model_ranges.py): they replace calibrated ones
        self.avoid_kernels = avoid_kernels  # the guard measures with the kernels the artifact will run
        self.calib, self.held_out, self.reference = calib, held_out, reference
        self.float_dtype, self.say, self.progress = float_dtype, say, progress

    def build(self, options: QuantOptions, extra_fallback: int = 0) -> tuple[Program, list[PassRecord], QuantPlan]:
        """Plan, guard (if on), then fall back `extra_fallback` more of the most sensitive layers."""
        planned = copy.deepcopy(self.float_program)  # planning applies SmoothQuant to the weights
        if options.qconfig_in:
            imported = read_qconfig(options.qconfig_in)
        else:
            imported = plan_from_ranges(planned, self.ranges) if self.ranges else None
        quantization = plan_quantization(planned, self.calib, self.held_out, options, description=self.cal.description,
                                         synthetic=self.cal.synthetic, float_dtype=self.float_dtype,
                                         imported=imported, progress=self.progress)

        def build(fallback: set[str]) -> tuple[Program, list[PassRecord]]:
            plan = quantization.plan.model_copy(deep=True)
            for name in fallback:
                plan.layers[name].quantized = False
            candidate = copy.deepcopy(planned)
            chosen = Quantization(plan, quantization.tensors)
            pass_options = PassOptions(dtype="int8", target=self.target, quantization=chosen)
            return candidate, run_pipeline(candidate, self.rest, pass_options)

        fallback: set[str] = set()
        if options.guard:
            from ..runtime.executor import Executor

            names_in = planned.graph.inputs

            def runner(fb: set[str]):
                executor = Executor(build(fb)[0], avoid_kernels=self.avoid_kernels)
                return lambda b: executor.run([b[n] for n in names_in], bind_dims(planned, b))

            metric = choose_metric(options.guard_metric, planned)
            fallback = guard(runner, quantization.plan, self.held_out, self.reference, metric, options.max_error, self.say)
        if extra_fallback:
            ranked = sorted((n for n, layer in quantization.plan.layers.items() if layer.quantized),
                            key=lambda n: quantization.plan.layers[n].sensitivity or 0.0, reverse=True)
            for name in ranked[:extra_fallback]:
                layer = quantization.plan.layers[name]
                layer.quantized, layer.fallback_reason = False, (
                    f"tuning: the user metric needed the {extra_fallback} most sensitive layers in float "
                    f"(sensitivity {layer.sensitivity:.3g})")
                fallback.add(name)
        final, recs = build(fallback)
        return final, recs, quantization.plan


def _tune_options(options: QuantOptions, family: str) -> list[QuantOptions]:
    """Settings to try, most promising first: the given ones, then other observers and alphas."""
    tried = [options]
    observers = ["minmax", "percentile", "histogram"]
    alphas = ["auto", 0.5, 0.75, "off"] if family == "transformer" else ["off"]
    for alpha in alphas:
        for obs in observers:
            candidate = options.model_copy(update={"observer": obs, "smoothquant": alpha})
            if candidate not in tried:
                tried.append(candidate)
    return tried


def _tune(search: _Candidates, options: QuantOptions, tune: TuneSettings, load: LoadFn, say):
    from .planner import family

    def loss(score: float) -> float:
        delta = (baseline - score) if tune.higher_is_better else (score - baseline)
        return delta / max(abs(baseline), 1e-12)

    float_copy = copy.deepcopy(search.float_program)
    run_pipeline(float_copy, [n for n in search.rest if n == "prepack"], PassOptions(dtype="fp32", target=search.target))
    baseline = float(tune.eval_fn(load(float_copy, "fp32")))
    say(f"tuning: fp32 score {baseline:.6g}; tolerable loss {tune.tolerable_loss:g}")
    trials: list[dict] = []
    best = None
    for opts in _tune_options(options, family(search.float_program))[:tune.max_trials]:
        program, recs, plan = search.build(opts)
        score = float(tune.eval_fn(load(program, "int8")))
        trials.append({"observer": plan.observer, "smoothquant": plan.smoothquant, "fallback_layers":
                       len(plan.fallback_layers()), "score": score, "loss": round(loss(score), 6)})
        say(f"tuning: observer {plan.observer}, smoothquant {plan.smoothquant}: score {score:.6g} (loss {loss(score):.4g})")
        if best is None or loss(score) < best[0]:
            best = (loss(score), opts, (program, recs, plan))
        if loss(score) <= tune.tolerable_loss:
            break
    extra = 1
    while best[0] > tune.tolerable_loss:
        program, recs, plan = search.build(best[1], extra_fallback=extra)
        score = float(tune.eval_fn(load(program, "int8")))
        trials.append({"observer": plan.observer, "smoothquant": plan.smoothquant,
                       "fallback_layers": len(plan.fallback_layers()), "score": score, "loss": round(loss(score), 6)})
        say(f"tuning: {len(plan.fallback_layers())} layer(s) in float: score {score:.6g} (loss {loss(score):.4g})")
        if loss(score) < best[0] or loss(score) <= tune.tolerable_loss:
            best = (loss(score), best[1], (program, recs, plan))
        if not plan.quantized_layers():
            break
        extra *= 2
    program, recs, plan = best[2]
    plan.tuning = {"baseline_score": baseline, "tolerable_loss": tune.tolerable_loss, "met": best[0] <= tune.tolerable_loss,
                   "trials": trials}
    if best[0] > tune.tolerable_loss:
        raise AccuracyError(f"tuning found no int8 configuration within {tune.tolerable_loss:g} of the fp32 score "
                            f"{baseline:.6g} (best loss {best[0]:.4g}, {len(trials)} trials); nothing was written",
                            "raise --tolerable-loss, or use --dtype bf16")
    return program, recs, plan


def read_qconfig(path) -> QuantPlan:
    """A qconfig JSON file (written by --qconfig-out, possibly edited by hand), validated."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"qconfig file {path} does not exist", "write one with --qconfig-out first")
    try:
        return QuantPlan.model_validate_json(path.read_text())
    except ValueError as e:
        raise UserInputError(f"qconfig file {path} is not a valid ipexconvert qconfig: {' '.join(str(e).split())[:300]}",
                             "fix the field named above, or export a fresh one with --qconfig-out") from None
