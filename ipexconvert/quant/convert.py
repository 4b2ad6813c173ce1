"""The int8 conversion: float passes -> calibration -> plan -> accuracy guard -> int8 passes.

api.optimize() calls quantize_program() for --dtype int8. The guard builds candidate
programs in memory (no files) and runs them with the real executor and kernels, so what
it measures is what the artifact will do.
"""
from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Callable, Optional

import torch

from ..accuracy import flatten_outputs
from ..errors import UserInputError
from ..ir import Program
from ..manifest import PassRecord
from ..passes import PassOptions, run_pipeline
from ..passes.pipeline import QUANTIZATION_STAGE
from ..runtime.cpu import ISA_LEVELS, selected_isa
from . import data
from .calibrate import bind_dims
from .guard import choose_metric, guard
from .options import QuantOptions
from .plan import Quantization, QuantPlan
from .planner import plan_quantization

SYNTHETIC_WARNING = ("calibrating INT8 on RANDOM synthetic inputs: activation ranges will not match real data and "
                     "accuracy on real inputs may be poor; pass --calib or --calib-text with real samples")


def default_float_dtype() -> str:
    """bfloat16 for ops without an int8 kernel where the CPU computes bf16 natively, else float32."""
    return "bfloat16" if ISA_LEVELS.index(selected_isa()) >= ISA_LEVELS.index("avx512_bf16") else "float32"


def _input_specs(program: Program) -> dict:
    return {n: program.graph.values[n] for n in program.graph.inputs}


def calibration_set(program: Program, source, calibration, calib_text, calib_synthetic: int) -> data.CalibrationSet:
    """The calibration batches from whichever source the user gave (exactly one)."""
    given = [x for x in (calibration, calib_text) if x is not None] + ([calib_synthetic] if calib_synthetic else [])
    if not given:
        raise UserInputError("--dtype int8 needs calibration data to choose activation ranges",
                             "pass --calib FILE_OR_FOLDER (safetensors batches), --calib-text FILE (one sentence "
                             "a line, for models with a tokenizer), or --calib-synthetic N to calibrate on random "
                             "inputs (not recommended)")
    if len(given) > 1:
        raise UserInputError("more than one calibration source given", "pass only one of --calib, --calib-text, --calib-synthetic")
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


def quantize_program(program: Program, names: list[str], source, options: QuantOptions, *, calibration=None,
                     calib_text=None, calib_synthetic: int = 0, say: Callable[[str], None] = lambda _m: None,
                     progress_bar=None) -> tuple[Program, list[PassRecord], QuantPlan]:
    cut = min((names.index(n) for n in QUANTIZATION_STAGE if n in names), default=len(names))
    records = run_pipeline(program, names[:cut], PassOptions(dtype="int8"), on_pass=lambda n: say(f"pass {n}"))
    cal = calibration_set(program, source, calibration, calib_text, calib_synthetic)
    calib, held_out = cal.split(options.held_out_fraction)
    float_dtype = options.float_dtype or default_float_dtype()
    rest = [n for n in names[cut:] if n != "to_bf16" or float_dtype == "bfloat16"]
    imported = _read_qconfig(options.qconfig_in) if options.qconfig_in else None

    say(f"calibrating on {cal.description}")
    progress = progress_bar or (lambda stage, total: (say(stage), lambda: None)[1])
    quantization = plan_quantization(program, calib, held_out, options, description=cal.description,
                                     synthetic=cal.synthetic, float_dtype=float_dtype, imported=imported,
                                     progress=progress)
    planned = copy.deepcopy(program)

    def build(fallback: set[str]) -> tuple[Program, list[PassRecord]]:
        plan = quantization.plan.model_copy(deep=True)
        for name in fallback:
            plan.layers[name].quantized = False
        candidate = copy.deepcopy(planned)
        recs = run_pipeline(candidate, rest, PassOptions(dtype="int8", params={"quantization": Quantization(plan, quantization.tensors)}))
        return candidate, recs

    fallback: set[str] = set()
    if options.guard:
        from ..runtime.executor import Executor

        names_in = program.graph.inputs
        with torch.no_grad():
            reference = [flatten_outputs(source.eager(**b)) for b in held_out]

        def runner(fb: set[str]):
            executor = Executor(build(fb)[0])
            return lambda b: executor.run([b[n] for n in names_in], bind_dims(program, b))

        metric = choose_metric(options.guard_metric, program)
        fallback = guard(runner, quantization.plan, held_out, reference, metric, options.max_error, say)
    final, rest_records = build(fallback)
    return final, records + rest_records, quantization.plan


def _read_qconfig(path) -> QuantPlan:
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"qconfig file {path} does not exist", "write one with --qconfig-out first")
    try:
        return QuantPlan.model_validate_json(path.read_text())
    except ValueError as e:
        raise UserInputError(f"qconfig file {path} is not a valid ipexconvert qconfig: {' '.join(str(e).split())[:300]}",
                             "fix the field named above, or export a fresh one with --qconfig-out") from None
