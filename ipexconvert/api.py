"""The public Python API: optimize() and load_artifact()."""
from __future__ import annotations

import datetime as _dt
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Optional, Union

import torch

from . import __version__
from .accuracy import as_signature_dtypes, describe_failure, flatten_outputs, float_caches, measure
from .artifact import write_artifact
from .backends import get_backend
from .errors import AccuracyError, ArtifactError, ConversionBugError, UserInputError
from .config import ConversionConfig
from .decoder_settings import TOKENIZER_FILE, settle_decoder
from .frontend.base import ImportedModel, ImportRequest, import_model, importer_for
from .ir import Program
from .ir.dynamic_dims import DynamicDims
from .ir.validate import INCONSISTENT, NodeError, check_nodes
from .manifest import AccuracyRecord, IOSpec, Manifest, WeightOnlyRecord
from .output_path import check_writable, scratch_folder, write_errors
from .passes import PassOptions, pipeline_for, run_pipeline
from .passes.pipeline import CALIBRATE
from .runtime.kernels import check_avoid
from .runtime.model import LoadedModel
from .target import Target

if TYPE_CHECKING:
    from .decoder_accuracy import TeacherForcedCheck

Progress = Callable[[str], None]


@dataclass
class OptimizeResult:
    path: Path
    manifest: Manifest
    source: ImportedModel
    example_inputs: dict[str, torch.Tensor]
    config: Optional[ConversionConfig] = None  # the settings it was converted with

    @property
    def accuracy(self) -> Optional[AccuracyRecord]:
        return self.manifest.accuracy


def load_artifact(path: Union[str, Path], device: Optional[str] = None, verify: bool = True,
                  threads: Optional[int] = None, avoid_kernels: Iterable[str] = ()) -> LoadedModel:
    """Load an .ipxc artifact; the result is callable with torch tensors or numpy arrays.

    `device` picks the backend that runs it ("cpu"); None: the device the artifact was made for.
    `avoid_kernels` names kernel factories or families not to use (e.g. ["onednn_direct"]; the names
    `ipexconvert doctor --kernels` shows), for debugging and comparing kernels.
    `threads` sets the (process-wide) intra-op thread count; None keeps torch's default (all cores).
    """
    return LoadedModel(path, device=device, verify=verify, threads=threads, avoid_kernels=tuple(avoid_kernels))


def _default_output(source: ImportedModel, dtype: str) -> Path:
    stem = Path(source.record.location).stem if source.record.kind != "example" else source.record.location
    return Path(f"{stem or 'model'}.{dtype}.ipxc")


def optimize(
    model: Union[str, Path, torch.nn.Module],
    example_inputs: Optional[Mapping[str, torch.Tensor]] = None,
    config: Union[ConversionConfig, str, Path, None] = None,
    *,
    output: Union[str, Path, None] = None,
    dynamic_dims: Optional[DynamicDims] = None,
    calibration=None,
    tune=None,
    progress: Optional[Progress] = None,
    progress_bar=None,
    on_output: Optional[Callable[[Path], None]] = None,
    **settings,
) -> OptimizeResult:
    """Convert a model into an .ipxc artifact, check it against eager PyTorch, and return where it is.

    `model` is an nn.Module, a path (.pt2, Hugging Face folder, checkpoint) or `example:NAME`.
    `config` (a ConversionConfig, or a .json/.toml file of one; see docs/configuration.md) holds every
    setting; keyword `settings` override its fields by name (dtype="bf16", target="cpu", passes=[...],
    skip_passes, inputs=["x:batch,3,224,224:float32"], model_factory, model_kwargs, trust_pickle,
    qconfig_out) or through the flat names of config.FLAT_FIELDS (max_rel_error, min_cosine, min_top1_agreement,
    max_perplexity_ratio, decoder_positions, calib_text, calib_synthetic, quant=QuantOptions(...), and a decoder's
    eos_token_ids, bos_token_id, tokenizer, kv_cache="bf16" or "int8"). A model whose signature is a decoder's
    (docs/decoders.md) gets a decoder record, so the artifact can generate(). Raises
    AccuracyError (and writes nothing) when the artifact misses the dtype's error budget; a weight-only decoder is
    judged teacher-forced (decoder_accuracy.py), its worst layers moved back to float until it passes.

    What cannot live in a config file stays an argument: `example_inputs` (tensors), `dynamic_dims`,
    `calibration` (int8: a list of input dicts or a CalibrationSet; a path works too, as
    calibration files), `tune` (a quant.convert.TuneSettings with its evaluation callable; a config's
    `tune` names the callable instead), `progress` / `progress_bar`, and `on_output`, called with the
    artifact's path once it is known, before anything is written there.
    """
    if isinstance(config, (str, Path)):
        config = ConversionConfig.from_file(Path(config))
    if isinstance(calibration, (str, Path)):
        settings["calib_files"], calibration = Path(calibration), None
    if settings.get("inputs"):
        settings["inputs"] = [arg if isinstance(arg, str) else arg.to_text() for arg in settings["inputs"]]
    cfg = ConversionConfig.build(config, **settings)
    say = progress or (lambda _msg: None)
    names = pipeline_for(cfg.dtype, cfg.passes, cfg.skip_passes, device=cfg.target.device,
                         weight_only=cfg.weight_only_selected,
                         bf16_activations=cfg.weight_only.activations == "bf16",
                         kv_cache=cfg.decoder.kv_cache)  # before any slow work
    _check_target_runs_here(cfg.target)
    avoid = check_avoid(cfg.avoid_kernels, cfg.target.device)
    tune = tune if tune is not None else _tune_settings(cfg)
    if cfg.dtype == "int8" and not cfg.weight_only_selected:  # weight-only int8 calibrates nothing
        from .quant.convert import check_calibration_args

        check_calibration_args(calibration if calibration is not None else cfg.calibration.files,
                               cfg.calibration.text, cfg.calibration.synthetic,
                               required=not importer_for(model).may_state_ranges)  # e.g. a QDQ ONNX model
        if cfg.qconfig_out is not None and not Path(cfg.qconfig_out).parent.is_dir():
            raise UserInputError(f"the folder for --qconfig-out {cfg.qconfig_out} does not exist", "create it first")
        if cfg.qconfig_out is not None:
            check_writable(Path(cfg.qconfig_out), "--qconfig-out")
    inc = None  # weight-only GPTQ / AWQ: Intel Neural Compressor chooses the codes, just before the trace
    if cfg.weight_only_selected and cfg.weight_only.algorithm != "rtn":
        from .passes.weight_only_quantize import bits_for
        from .quant.weight_only_inc import prepare_run

        inc = prepare_run(cfg.weight_only, bits_for(cfg.dtype), cfg.calibration.text, say)
    if output is not None:  # before the slow work
        check_writable(Path(output), "-o")
    source = import_model(model, ImportRequest(
        example_inputs=example_inputs, inputs=cfg.inputs, dynamic_dims=dynamic_dims, model_factory=cfg.model_factory,
        model_kwargs=cfg.model_kwargs, trust_pickle=cfg.trust_pickle,
        before_trace=inc.before_trace if inc is not None else None), say)
    if inc is not None and inc.record is None:  # the importer traced no eager torch module (ONNX, .pt2)
        raise UserInputError(f"--woq-algorithm {cfg.weight_only.algorithm} runs on Hugging Face causal LMs (a model "
                             f"folder with its tokenizer), and {source.record.location} is not one",
                             "use --woq-algorithm rtn")
    program = source.program
    # The decoder's token ids and tokenizer (the user's over the source's); the tokenizer read once: the
    # teacher-forced check and the artifact use it.
    decoder_data = settle_decoder(source, cfg.decoder)
    teacher = _teacher_forced(source, cfg, decoder_data)  # before the passes change the program's graph

    target = cfg.target
    quantization, held_out, woq_guard = None, None, None
    if CALIBRATE in names:  # the int8 stage: calibrate, plan, guard, then the passes after it
        from .quant.convert import quantize_program

        program, records, quantization, held_out = quantize_program(
            program, names, source, cfg.quantization,
            calibration=calibration if calibration is not None else cfg.calibration.files,
            calib_text=cfg.calibration.text, calib_synthetic=cfg.calibration.synthetic, say=say,
            progress_bar=progress_bar, tune=tune, target=target, avoid_kernels=avoid,
            load=lambda candidate, kind: _load_in_memory(candidate, _manifest(candidate, source, kind, [], target), avoid))
    else:
        options = PassOptions(dtype=cfg.dtype, target=target,
                              weight_only=cfg.weight_only if cfg.weight_only_selected else None,
                              weight_codes=inc.codes if inc is not None else None)
        if teacher is not None and cfg.weight_only.guard:
            from .quant.weight_only_guard import guarded_weight_only

            program, records, woq_guard = guarded_weight_only(
                program, names, options, say=say, judge=lambda candidate, recs: teacher.judge(
                    _load_in_memory(candidate, _manifest(candidate, source, cfg.dtype, recs, target), avoid)))
        else:
            records = run_pipeline(program, names, options, on_pass=lambda n: say(f"pass {n}"))
    if cfg.decoder.kv_cache is not None:
        _check_cache_dtype(program, source, cfg.decoder.kv_cache)
    _check_converted(program, source)
    manifest = _manifest(program, source, cfg.dtype, records, target)
    manifest.weight_only_guard = woq_guard
    if cfg.weight_only_selected:
        manifest.weight_only = inc.record if inc is not None else WeightOnlyRecord(algorithm="rtn",
                                                                                   implementation="ipexconvert")
    if quantization is not None:
        manifest.quantization = quantization.model_dump(mode="json")

    out_path = Path(output) if output is not None else _default_output(source, cfg.dtype)
    if output is None:
        check_writable(out_path, "-o")
    if on_output is not None:
        on_output(out_path)
    say("writing artifact and checking accuracy against eager")
    # int8 is checked on a held-out calibration batch: real data, where the example inputs may be
    # random (e.g. token ids of a Hugging Face folder) and outside what the model was calibrated for.
    check_inputs = held_out[0] if held_out else source.example_inputs
    where = "a held-out calibration batch" if held_out else "the example inputs"
    # Every temp file (the checked artifact, the final one before its rename) lives in one scratch folder
    # next to the output, removed however this ends; the output appears complete or not at all.
    with scratch_folder(out_path, "-o") as folder:
        # a bf16 KV cache beside fp32 activations holds bf16-rounded keys and values: judged by bf16's budget; an
        # int8 cache beside float activations holds 8-bit keys and values: judged by int8's
        judged_as = {"bf16": "bf16" if cfg.dtype == "fp32" else None,
                     "int8": "int8" if cfg.dtype in ("fp32", "bf16") else None}.get(cfg.decoder.kv_cache)
        accuracy = _measure_accuracy(program, manifest, source, cfg.dtype, out_path, folder / "check.ipxc",
                                     cfg.accuracy.max_rel_error, cfg.accuracy.min_cosine, check_inputs, where, avoid,
                                     teacher, judged_as)
        with write_errors(out_path, "-o"):
            stored = as_signature_dtypes(source.example_inputs, {io.name: io.spec.dtype for io in manifest.inputs})
            final = write_artifact(folder / "artifact.ipxc", program, manifest.model_copy(update={"accuracy": accuracy}),
                                   stored, data=decoder_data)
            os.replace(folder / "artifact.ipxc", out_path)
    if quantization is not None and cfg.qconfig_out is not None:
        with write_errors(Path(cfg.qconfig_out), "--qconfig-out"):
            Path(cfg.qconfig_out).write_text(quantization.model_dump_json(indent=2) + "\n")
    return OptimizeResult(path=out_path, manifest=final, source=source, example_inputs=source.example_inputs,
                          config=cfg)


def _tune_settings(cfg: ConversionConfig):
    """TuneSettings from the config's `tune` (its eval_fn imported now, before any slow work), or None."""
    if cfg.tune is None:
        return None
    from .importing import import_callable
    from .quant.convert import TuneSettings

    return TuneSettings(eval_fn=import_callable(cfg.tune.eval_fn, "--eval-fn"), tolerable_loss=cfg.tune.tolerable_loss)


def _check_target_runs_here(target: Target) -> None:
    """The converted artifact is loaded and checked against eager here, so this host must run the target."""
    try:
        get_backend(target.device).check_target(target, "the artifact")
    except ArtifactError as e:
        raise UserInputError(f"cannot convert for --target {target} on this machine: {e.problem}",
                             "the conversion checks the artifact by running it: convert on a machine of the target "
                             "class, or use --target cpu (portable)") from None


def _load_in_memory(program: Program, manifest: Manifest, avoid: frozenset[str]) -> LoadedModel:
    """A candidate program as a loaded model, through a temporary artifact (what a user would load)."""
    with scratch_folder(Path(tempfile.gettempdir()) / "ipexconvert-candidate", "a temporary file") as folder:
        write_artifact(folder / "candidate.ipxc", program, manifest)
        return load_artifact(folder / "candidate.ipxc", avoid_kernels=avoid)


def _manifest(program: Program, source: ImportedModel, dtype: str, records, target: Target) -> Manifest:
    graph = program.graph
    return Manifest(
        target=target,
        producer=f"ipexconvert {__version__}",
        torch_version=torch.__version__,
        created_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        source=source.record,
        dtype=dtype,
        passes=records,
        inputs=[IOSpec(name=n, spec=graph.values[n]) for n in graph.inputs],
        outputs=[IOSpec(name=n, spec=graph.values[n]) for n in graph.outputs],
        dims=graph.dims,
        op_histogram=graph.op_histogram(),
        fallback_ops=sorted({n.attrs["target"] for n in graph.nodes if n.op == "aten"}),
        decoder=source.decoder,  # settled by decoder_settings.settle_decoder: token ids and tokenizer
    )


def _check_converted(program: Program, source: ImportedModel) -> None:
    """Every node fits its op, as the loader will check: a graph that does not is this conversion's fault, not a
    file to re-create, and is said so before anything is written."""
    try:
        check_nodes(program.graph)
    except NodeError as e:
        if not e.problem.startswith(INCONSISTENT):
            raise  # a loader limit (a tensor over the size budget): its own fix applies
        raise ConversionBugError(
            f"converting {source.record.location} made a graph that its loader refuses: {e.problem[len(INCONSISTENT):]}",
            "this is a bug in ipexconvert, or a construct of this model it maps wrongly: rerun with IPEXCONVERT_DEBUG=1 "
            "and report it with the model's config") from None


def _check_cache_dtype(program, source: ImportedModel, option: str) -> None:
    """Every KV cache input of the decoder is stored as --kv-cache `option` says after the passes, or a UserInputError
    naming one."""
    if source.decoder is None:
        return
    dtype = {"bf16": "bfloat16", "int8": "int8"}[option]
    for past, _ in source.decoder.cache:
        spec = program.graph.values[past]
        if spec.dtype != dtype:
            raise UserInputError(f"--kv-cache {option}: the cache input {past} stays {spec.dtype}: nothing in this "
                                 "model appends to it as a KV cache (kv_append or rope_kv_append)",
                                 f"convert without --kv-cache {option}")


def _teacher_forced(source: ImportedModel, cfg: ConversionConfig, decoder_data: dict[str, bytes]) -> Optional[TeacherForcedCheck]:
    """A weight-only decoder is judged teacher-forced (decoder_accuracy.py): the eager logits along the corpus (through
    the tokenizer the artifact will store), computed once, and the budget. None for everything else."""
    if not cfg.weight_only_selected:
        return None
    if source.decoder is None:
        given = [name for name in ("min_top1_agreement", "max_perplexity_ratio", "decoder_positions")
                 if name in cfg.accuracy.model_fields_set]
        if given:
            raise UserInputError(f"{', '.join(given)} apply to decoders (causal LMs with a KV cache), and "
                                 f"{source.record.location} is not one", "leave them out; --min-cosine judges this model")
        return None
    from .decoder_accuracy import DECODER_BUDGETS, TeacherForcedCheck, prepare_reference
    from .runtime.decoder import load_tokenizer

    graph, record = source.program.graph, source.decoder
    blob = decoder_data.get(TOKENIZER_FILE)
    reference = prepare_reference(
        source.eager, record, {n: graph.values[n] for n in graph.inputs}, {n: graph.values[n] for n in graph.outputs},
        graph.dims[record.cache_dim].max + 1, None if blob is None else load_tokenizer(blob, source.record.location),
        f"{source.oracle} fp32, teacher-forced", positions=cfg.accuracy.decoder_positions)
    budget = DECODER_BUDGETS[cfg.dtype].with_overrides(cfg.accuracy.min_cosine, cfg.accuracy.min_top1_agreement,
                                                       cfg.accuracy.max_perplexity_ratio)
    return TeacherForcedCheck(reference, budget)


def _measure_accuracy(program: Program, manifest: Manifest, source: ImportedModel, dtype: str, out_path: Path,
                      tmp: Path, max_rel_error: Optional[float], min_cosine: Optional[float],
                      inputs: Mapping[str, torch.Tensor], where: str, avoid: frozenset[str],
                      teacher: Optional[TeacherForcedCheck] = None, judged_as: Optional[str] = None) -> AccuracyRecord:
    """Write to the temp path `tmp` (next to `out_path`, so a full disk shows now, not at the final
    write), load it like a user would, and compare with eager on `inputs` (by `judged_as`'s budget, default the
    dtype's); a weight-only decoder (`teacher`) is judged by its teacher-forced logits, the call on `inputs`
    recorded."""
    with write_errors(out_path, "-o"):
        write_artifact(tmp, program, manifest)
    loaded = load_artifact(tmp, avoid_kernels=avoid)
    given = as_signature_dtypes(dict(inputs), {io.name: io.spec.dtype for io in loaded.signature.inputs})
    got = loaded.run_list([given[n] for n in loaded.signature.input_names])
    got = float_caches(got, loaded.signature.output_names, manifest.decoder)  # (an int8 KV cache's rows, as values)
    os.unlink(tmp)
    with torch.no_grad():
        want = flatten_outputs(source.eager(**inputs))
    computed_in = None if loaded.executor.bf16_compute is None else f"bf16 parts in {loaded.executor.bf16_compute}"
    simulates_int8 = any(n.op == "fake_quantize" for n in program.graph.nodes)
    reference = f"{source.oracle} fp32 on {where}"
    if teacher is None:
        record = measure(loaded.signature.output_names, got, want, dtype, reference, max_rel_error, min_cosine,
                         computed_in, simulates_int8, judged_as)
    else:  # --min-cosine is the teacher-forced budget here, not every sample's
        record = _judged_teacher_forced(measure(loaded.signature.output_names, got, want, dtype, reference, None, None,
                                                computed_in, simulates_int8), teacher, loaded, max_rel_error)
    if not record.passed:
        _refuse(record, dtype, source.oracle, manifest)
    return record


def _judged_teacher_forced(record: AccuracyRecord, teacher: TeacherForcedCheck, loaded: LoadedModel,
                           max_rel_error: Optional[float]) -> AccuracyRecord:
    """`record` (the call on the example inputs) with the teacher-forced comparison deciding; --max-rel-error, when
    given, still judges the example call."""
    from .decoder_accuracy import JUDGED_BY

    decoder = teacher.judge(loaded)
    rel_ok = max_rel_error is None or all(o.max_rel_error <= max_rel_error for o in record.outputs)
    return record.model_copy(update={
        "decoder": decoder, "passed": decoder.passed and rel_ok, "budget_min_cosine": teacher.budget.min_mean_cosine,
        "budget_rel_error": record.budget_rel_error if max_rel_error is None else max_rel_error,
        "judged_by": JUDGED_BY + ("" if max_rel_error is None else " and the example call's max relative error")})


def _refuse(record: AccuracyRecord, dtype: str, oracle: str, manifest: Manifest) -> None:
    """The AccuracyError of a record that missed its budget."""
    if record.decoder is None:
        raise AccuracyError(
            f"the {dtype} artifact is too far from {oracle} ({record.judged_by} decide): "
            f"{describe_failure(record)}; nothing was written",
            "raise the budget with --max-rel-error / --min-cosine if this is expected, or skip the pass that "
            "causes it (--skip-pass NAME) and report the model")
    from .decoder_accuracy import describe_failure as describe_decoder

    why = describe_decoder(record.decoder) if not record.decoder.passed else describe_failure(record)
    guard = manifest.weight_only_guard
    moved = ("" if guard is None else f" (the weight-only guard moved {len(guard.float_layers)} of "
             f"{guard.candidates} layers back to float)")
    raise AccuracyError(
        f"the {dtype} artifact is too far from {oracle}{moved}: {why}; nothing was written",
        "raise the budget with --min-cosine / --min-top1-agreement / --max-perplexity-ratio if this is expected, try "
        "a smaller --group-size, or report the model")
