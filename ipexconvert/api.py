"""The public Python API: optimize() and load_artifact()."""
from __future__ import annotations

import datetime as _dt
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Union

import torch

from . import __version__
from .accuracy import describe_failure, flatten_outputs, measure
from .artifact import write_artifact
from .backends import get_backend
from .errors import AccuracyError, ArtifactError, UserInputError
from .frontend.torch.export import decompose, export_module, program_from_exported
from .frontend.torch.inputs import InputArg, check_example_inputs, make_example_inputs
from .frontend.torch.sources import ResolvedSource, SourceRequest, from_module, resolve_source
from .ir import Program
from .ir.dynamic_dims import DynamicDim, DynamicDims
from .manifest import AccuracyRecord, IOSpec, Manifest
from .output_path import check_writable, scratch_folder, write_errors
from .passes import PassOptions, pipeline_for, run_pipeline
from .quant.options import QuantOptions
from .runtime.model import LoadedModel
from .target import Target

Progress = Callable[[str], None]


@dataclass
class OptimizeResult:
    path: Path
    manifest: Manifest
    source: ResolvedSource
    example_inputs: dict[str, torch.Tensor]

    @property
    def accuracy(self) -> Optional[AccuracyRecord]:
        return self.manifest.accuracy


def load_artifact(path: Union[str, Path], device: Optional[str] = None, verify: bool = True,
                  threads: Optional[int] = None) -> LoadedModel:
    """Load an .ipxc artifact; the result is callable with torch tensors or numpy arrays.

    `device` picks the backend that runs it ("cpu"); None: the device the artifact was made for.
    `threads` sets the (process-wide) intra-op thread count; None keeps torch's default (all cores).
    """
    return LoadedModel(path, device=device, verify=verify, threads=threads)


def _default_output(source: ResolvedSource, dtype: str) -> Path:
    stem = Path(source.record.location).stem if source.record.kind != "example" else source.record.location
    return Path(f"{stem or 'model'}.{dtype}.ipxc")


def _prepare_inputs(source: ResolvedSource, example_inputs: Optional[Mapping[str, torch.Tensor]],
                    inputs: Optional[list[InputArg]], dynamic_dims: Optional[DynamicDims]) -> None:
    """Settle the example inputs and dynamic dims: explicit arguments win over the source's defaults."""
    if inputs:
        tensors, declared = make_example_inputs(inputs, int_high=source.int_high)
        source.example_inputs, source.dynamic = tensors, declared
    if example_inputs is not None:
        source.example_inputs = {k: torch.as_tensor(v) for k, v in example_inputs.items()}
        if not inputs:
            source.dynamic = {}
    if dynamic_dims is not None:
        source.dynamic = dynamic_dims
    if not source.example_inputs and source.exported is None:
        raise UserInputError("no example inputs: ipexconvert needs them to trace the model",
                             "pass --input NAME:SHAPE:DTYPE (e.g. --input x:batch,3,224,224:float32) "
                             "or --example-inputs inputs.safetensors")
    check_example_inputs(source.example_inputs)


def optimize(
    model: Union[str, Path, torch.nn.Module],
    example_inputs: Optional[Mapping[str, torch.Tensor]] = None,
    *,
    dtype: str = "fp32",
    target: Union[str, Target, None] = None,
    output: Union[str, Path, None] = None,
    inputs: Optional[list[InputArg]] = None,
    dynamic_dims: Optional[DynamicDims] = None,
    passes: Optional[Iterable[str]] = None,
    skip_passes: Iterable[str] = (),
    max_rel_error: Optional[float] = None,
    min_cosine: Optional[float] = None,
    model_factory: Optional[str] = None,
    model_kwargs: Optional[dict] = None,
    trust_pickle: bool = False,
    progress: Optional[Progress] = None,
    calibration=None,
    calib_text: Union[str, Path, None] = None,
    calib_synthetic: int = 0,
    quant: Optional[QuantOptions] = None,
    qconfig_out: Union[str, Path, None] = None,
    progress_bar=None,
    tune=None,
    on_output: Optional[Callable[[Path], None]] = None,
) -> OptimizeResult:
    """Convert a model into an .ipxc artifact, check it against eager PyTorch, and return where it is.

    `model` is an nn.Module, a path (.pt2, Hugging Face folder, checkpoint) or `example:NAME`.
    Raises AccuracyError (and writes nothing) when the artifact misses the dtype's error budget.

    dtype="int8" needs calibration data: `calibration` (a list of input dicts, a CalibrationSet,
    or a path to safetensors file(s)), `calib_text` (a text file, for models with a tokenizer),
    or `calib_synthetic=N` random batches (a loud warning; recorded in the manifest).
    `quant` holds the int8 settings (observer, SmoothQuant, accuracy guard, qconfig import);
    `qconfig_out` writes the final quantization plan as editable JSON. `tune` (a
    quant.convert.TuneSettings) searches settings until a user metric is within tolerance of fp32.
    `on_output` is called with the artifact's path once it is known, before anything is written there.
    `target` ("cpu", "cpu:avx2", a Target; default: a portable CPU artifact) is recorded in the manifest.
    """
    say = progress or (lambda _msg: None)
    target = Target.parse(target)
    names = pipeline_for(dtype, passes, skip_passes, device=target.device)  # validate before any slow work
    _check_target_runs_here(target)
    if dtype == "int8":
        from .quant.convert import check_calibration_args

        check_calibration_args(calibration, calib_text, calib_synthetic)
        if qconfig_out is not None and not Path(qconfig_out).parent.is_dir():
            raise UserInputError(f"the folder for --qconfig-out {qconfig_out} does not exist", "create it first")
        if qconfig_out is not None:
            check_writable(Path(qconfig_out), "--qconfig-out")
    if output is not None:  # before the slow work
        check_writable(Path(output), "-o")
    say("loading model")
    if isinstance(model, torch.nn.Module):
        source = from_module(model)
    else:
        source = resolve_source(SourceRequest(location=str(model), model_factory=model_factory,
                                              model_kwargs=model_kwargs or {}, trust_pickle=trust_pickle))
    _prepare_inputs(source, example_inputs, inputs, dynamic_dims)

    say("exporting with torch.export")
    if source.module is not None:
        ep = export_module(source.module, source.example_inputs, source.dynamic)
    else:
        ep = source.exported
    program = program_from_exported(decompose(ep), source.dynamic, source.output_names)
    _ensure_example_inputs(program, source)

    if dtype == "int8":
        from .quant.convert import quantize_program

        program, records, quantization, held_out = quantize_program(
            program, names, source, quant or QuantOptions(), calibration=calibration, calib_text=calib_text,
            calib_synthetic=calib_synthetic, say=say, progress_bar=progress_bar, tune=tune, target=target,
            load=lambda candidate, kind: _load_in_memory(candidate, _manifest(candidate, source, kind, [], target)))
    else:
        records = run_pipeline(program, names, PassOptions(dtype=dtype, target=target),
                               on_pass=lambda n: say(f"pass {n}"))
        quantization, held_out = None, None
    manifest = _manifest(program, source, dtype, records, target)
    if quantization is not None:
        manifest.quantization = quantization.model_dump(mode="json")

    out_path = Path(output) if output is not None else _default_output(source, dtype)
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
        accuracy = _measure_accuracy(program, manifest, source, dtype, out_path, folder / "check.ipxc",
                                     max_rel_error, min_cosine, check_inputs, where)
        with write_errors(out_path, "-o"):
            final = write_artifact(folder / "artifact.ipxc", program, manifest.model_copy(update={"accuracy": accuracy}),
                                   source.example_inputs)
            os.replace(folder / "artifact.ipxc", out_path)
    if quantization is not None and qconfig_out is not None:
        with write_errors(Path(qconfig_out), "--qconfig-out"):
            Path(qconfig_out).write_text(quantization.model_dump_json(indent=2) + "\n")
    return OptimizeResult(path=out_path, manifest=final, source=source, example_inputs=source.example_inputs)


def _check_target_runs_here(target: Target) -> None:
    """The converted artifact is loaded and checked against eager here, so this host must run the target."""
    try:
        get_backend(target.device).check_target(target, "the artifact")
    except ArtifactError as e:
        raise UserInputError(f"cannot convert for --target {target} on this machine: {e.problem}",
                             "the conversion checks the artifact by running it: convert on a machine of the target "
                             "class, or use --target cpu (portable)") from None


def _load_in_memory(program: Program, manifest: Manifest) -> LoadedModel:
    """A candidate program as a loaded model, through a temporary artifact (what a user would load)."""
    with scratch_folder(Path(tempfile.gettempdir()) / "ipexconvert-candidate", "a temporary file") as folder:
        write_artifact(folder / "candidate.ipxc", program, manifest)
        return load_artifact(folder / "candidate.ipxc")


def _ensure_example_inputs(program: Program, source: ResolvedSource) -> None:
    """A .pt2 saved without example inputs: make random ones from the graph's signature."""
    if source.example_inputs:
        return
    args = []
    for name in program.graph.inputs:
        spec = program.graph.values[name]
        shape = [d if isinstance(d, int) else DynamicDim(name=d, min=program.graph.dims[d].min, max=program.graph.dims[d].max)
                 for d in spec.shape]
        args.append(InputArg(name=name, shape=shape, dtype=spec.dtype))
    source.example_inputs, _ = make_example_inputs(args)
    check_example_inputs(source.example_inputs)


def _manifest(program: Program, source: ResolvedSource, dtype: str, records, target: Target) -> Manifest:
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
    )


def _measure_accuracy(program: Program, manifest: Manifest, source: ResolvedSource, dtype: str, out_path: Path,
                      tmp: Path, max_rel_error: Optional[float], min_cosine: Optional[float],
                      inputs: Mapping[str, torch.Tensor], where: str) -> AccuracyRecord:
    """Write to the temp path `tmp` (next to `out_path`, so a full disk shows now, not at the final
    write), load it like a user would, and compare with eager on `inputs`."""
    with write_errors(out_path, "-o"):
        write_artifact(tmp, program, manifest)
    loaded = load_artifact(tmp)
    got = loaded.run_list([inputs[n] for n in loaded.signature.input_names])
    os.unlink(tmp)
    with torch.no_grad():
        want = flatten_outputs(source.eager(**inputs))
    computed_in = None if loaded.executor.bf16_compute is None else f"bf16 parts in {loaded.executor.bf16_compute}"
    record = measure(loaded.signature.output_names, got, want, dtype, f"eager PyTorch fp32 on {where}",
                     max_rel_error, min_cosine, computed_in)
    if not record.passed:
        raise AccuracyError(
            f"the {dtype} artifact is too far from eager PyTorch ({record.judged_by} decide): "
            f"{describe_failure(record)}; nothing was written",
            "raise the budget with --max-rel-error / --min-cosine if this is expected, or skip the pass that "
            "causes it (--skip-pass NAME) and report the model")
    return record
