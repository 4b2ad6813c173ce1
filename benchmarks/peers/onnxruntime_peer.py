"""ONNX Runtime as a peer in `benchmarks/run.py`: FP32 and INT8 (static QDQ post-training quantization).

Given the eager torch module and the case's example inputs (a dict name -> tensor), this exports
the module to ONNX, opens an onnxruntime.InferenceSession on the CPU and returns a callable that
takes the same keyword inputs and returns torch tensors (one tensor, or a tuple when the model has
several outputs), like the module does. Only public torch.onnx / ONNX Runtime API is used:

  export   torch.onnx.export(module, (), kwargs=inputs, input_names=..., opset_version=17,
           dynamo=False): the TorchScript exporter, which needs only the `onnx` package (the
           dynamo exporter needs `onnxscript`; it is tried second, if the first one fails).
           No dynamic_axes: the graph has the case's static shapes, as the other peers do.
           The graph's inputs follow forward()'s parameter order whatever order the kwargs dict
           has, so the names are given in that order (a dict order would silently swap them).
  fp32     InferenceSession(model, SessionOptions(intra_op_num_threads=threads,
           inter_op_num_threads=1, execution_mode=ORT_SEQUENTIAL,
           graph_optimization_level=ORT_ENABLE_ALL), providers=[CPUExecutionProvider])
  int8     onnxruntime.quantization.shape_inference.quant_pre_process(fp32 model) (when it
           fails, the plain export is quantized and the failure recorded), then
           quantize_static(..., CalibrationDataReader over the calibration batches,
           quant_format=QDQ, activation_type=QUInt8, weight_type=QInt8, per_channel=True,
           reduce_range=False unless asked, calibrate_method=MinMax), op types: ORT's defaults for
           CNNs, MatMul and Gemm for transformers (their Softmax / LayerNorm / embedding Gather stay
           float); then a session with the fp32 options (ORT_ENABLE_ALL fuses the QDQ pairs into
           its integer kernels)

ONNX Runtime's CPU kernels (MLAS) pick their code from CPUID at run time; nothing tells which ISA
they picked, so what is recorded is what can be read: the package version, get_device(), the
session's providers and the session options read back. On CPUs without VNNI, ORT's u8 x s8
(U8S8) int8 kernels may saturate the int16 intermediate sums (ORT's quantization docs); set
reduce_range=True (7-bit weights) there when accuracy matters, and the choice is recorded.

Install (optional, next to torch in the project's .venv or any venv that has ipexconvert):

  .venv/bin/pip install onnxruntime onnx
  .venv/bin/python benchmarks/run.py --peers onnxruntime --int8 --cases resnet50-b1 --rounds 15
"""
from __future__ import annotations

import importlib
import inspect
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import torch

INSTALL_HINT = (
    "the ONNX Runtime peers need the `onnxruntime` and `onnx` packages next to torch, e.g.\n"
    "  .venv/bin/pip install onnxruntime onnx\n"
    "(torch.onnx.export's TorchScript exporter needs only `onnx`; the dynamo exporter, tried when it "
    "fails, also needs `onnxscript`)"
)

OPSET = 17
# Tried in this order; each name maps to torch.onnx.export's `dynamo` argument.
EXPORTERS = {"torchscript": False, "dynamo": True}
TRANSFORMER_OP_TYPES = ["MatMul", "Gemm"]  # quantized in transformers; None = ORT's default op types


class PeerUnavailable(RuntimeError):
    """The peer's packages are missing (or broken); the message says how to install them."""


def _import(name: str):
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - ImportError, or a broken install raising anything else
        raise PeerUnavailable(f"cannot import {name} ({type(exc).__name__}: {exc}); {INSTALL_HINT}") from exc


def check_available() -> dict[str, str]:
    """Import onnxruntime and onnx; return their versions or raise PeerUnavailable with the install hint."""
    ort = _import("onnxruntime")
    onnx = _import("onnx")
    return {"onnxruntime": ort.__version__, "onnx": onnx.__version__}


@dataclass
class ORTModel:
    """An ONNX Runtime session callable like the torch module: model(**inputs) -> tensor or tuple."""

    session: Any  # onnxruntime.InferenceSession
    input_names: list[str]  # the session's inputs (a subset of the runner's: unused inputs are dropped)
    quantized: bool = False
    timings_s: dict[str, float] = field(default_factory=dict)  # export / pre_process / quantize / session
    settings: dict[str, Any] = field(default_factory=dict)  # exporter, quantizer and session settings
    effective: dict[str, Any] = field(default_factory=dict)  # read back: version, device, providers, options

    def __call__(self, **inputs: torch.Tensor):
        feed = {name: _to_numpy(inputs[name]) for name in self.input_names}
        results = self.session.run(None, feed)
        outputs = tuple(torch.from_numpy(result) for result in results)
        return outputs[0] if len(outputs) == 1 else outputs

    def describe(self) -> str:
        kind = "static QDQ INT8, " if self.quantized else ""
        providers = ",".join(self.effective.get("providers", ["?"]))
        return (f"ONNX Runtime {self.effective.get('version', '?')} {providers}, {kind}"
                f"{self.effective.get('intra_op_num_threads', '?')} intra-op threads, "
                f"{self.effective.get('graph_optimization_level', '?')}")


def _to_numpy(tensor: torch.Tensor):
    tensor = tensor.detach()
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16; the exported graph takes float32
        tensor = tensor.float()
    return tensor.numpy()


def _signature_order(module: torch.nn.Module, names: Sequence[str]) -> list[str]:
    """The input names in forward()'s parameter order (the order the exported graph's inputs take)."""
    try:
        parameters = list(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return list(names)
    position = {name: index for index, name in enumerate(parameters)}
    return sorted(names, key=lambda name: position.get(name, len(parameters)))  # stable: unknown keep order


def export(module: torch.nn.Module, example_inputs: Mapping[str, torch.Tensor], path: Path) -> dict[str, Any]:
    """torch.onnx.export of the eager module with static shapes; returns what was used (exporter, opset)."""
    names = _signature_order(module, list(example_inputs))
    kwargs = {name: example_inputs[name] for name in names}
    failures = {}
    for exporter, dynamo in EXPORTERS.items():
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer warnings
                torch.onnx.export(module, (), str(path), kwargs=kwargs, input_names=names,
                                  opset_version=OPSET, dynamo=dynamo)
            return {"exporter": f"torch.onnx.export(dynamo={dynamo}) ({exporter})", "opset": OPSET,
                    "input_names": names, "static_shapes": True,
                    **({"exporter_failures": failures} if failures else {})}
        except Exception as exc:  # noqa: BLE001 - try the next exporter, report all if none works
            failures[exporter] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
    raise RuntimeError(f"torch.onnx.export failed with every exporter: {failures}")


def session_options(threads: int):
    """SessionOptions for one synchronous request on `threads` intra-op threads."""
    ort = _import("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = int(threads)
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return options


def open_session(path: Path, threads: int):
    """InferenceSession on the CPU provider; returns (session, effective settings read back from it)."""
    ort = _import("onnxruntime")
    session = ort.InferenceSession(str(path), sess_options=session_options(threads),
                                   providers=["CPUExecutionProvider"])
    options = session.get_session_options()
    effective = {
        "version": ort.__version__,
        "device": ort.get_device(),
        "providers": session.get_providers(),
        "available_providers": ort.get_available_providers(),
        "intra_op_num_threads": options.intra_op_num_threads,
        "inter_op_num_threads": options.inter_op_num_threads,
        "execution_mode": str(options.execution_mode).rsplit(".", 1)[-1],
        "graph_optimization_level": str(options.graph_optimization_level).rsplit(".", 1)[-1],
    }
    try:
        spinning = options.get_session_config_entry("session.intra_op.allow_spinning")
    except Exception:  # noqa: BLE001 - not set: ORT's default applies
        spinning = "default (spinning on)"
    effective["intra_op_allow_spinning"] = spinning
    try:
        effective["build_info"] = ort.get_build_info()
    except Exception:  # noqa: BLE001 - older versions have no get_build_info
        pass
    return session, effective


def _graph_inputs(path: Path) -> list[str]:
    onnx = _import("onnx")
    model = onnx.load(str(path), load_external_data=False)
    initializers = {init.name for init in model.graph.initializer}
    return [value.name for value in model.graph.input if value.name not in initializers]


def quantize(fp32_path: Path, int8_path: Path, calibration: Sequence[Mapping[str, torch.Tensor]],
             transformer: bool = False, reduce_range: bool = False) -> tuple[dict[str, Any], dict[str, float]]:
    """Static QDQ INT8 quantization of an exported model; returns (settings used, timings)."""
    _import("onnx")
    quantization = _import("onnxruntime.quantization")
    shape_inference = _import("onnxruntime.quantization.shape_inference")
    if not calibration:
        raise ValueError("INT8 quantization needs at least one calibration batch")
    timings: dict[str, float] = {}
    settings: dict[str, Any] = {}

    source = fp32_path
    start = time.perf_counter()
    prepared = fp32_path.with_name("model.pre.onnx")
    try:
        shape_inference.quant_pre_process(str(fp32_path), str(prepared))
        source, settings["pre_process"] = prepared, "quant_pre_process (symbolic shape inference, optimization)"
    except Exception as exc:  # noqa: BLE001 - optional step: quantize the plain export instead
        settings["pre_process"] = f"skipped: quant_pre_process failed ({type(exc).__name__}: {str(exc)[:200]})"
    timings["pre_process_s"] = time.perf_counter() - start

    class Reader(quantization.CalibrationDataReader):
        """The runner's calibration batches, fed by the graph's input names (unused inputs are not inputs)."""

        def __init__(self, names: Sequence[str]):
            self._feeds = iter([{name: _to_numpy(batch[name]) for name in names} for batch in calibration])

        def get_next(self):
            return next(self._feeds, None)

    reader = Reader(_graph_inputs(source))
    # QUInt8 activations x QInt8 weights is ORT's U8S8 format, the one its docs advise for x86 CPUs.
    op_types = TRANSFORMER_OP_TYPES if transformer else None
    settings.update(
        quant_format="QDQ", activation_type="QUInt8", weight_type="QInt8", per_channel=True,
        reduce_range=reduce_range, calibrate_method="MinMax", calibration_batches=len(calibration),
        op_types_to_quantize=op_types if op_types else "ORT default (all its QDQ op types)")
    start = time.perf_counter()
    quantization.quantize_static(
        str(source), str(int8_path), reader,
        quant_format=quantization.QuantFormat.QDQ,
        op_types_to_quantize=op_types,
        per_channel=True,
        reduce_range=reduce_range,
        activation_type=quantization.QuantType.QUInt8,
        weight_type=quantization.QuantType.QInt8,
        calibrate_method=quantization.CalibrationMethod.MinMax,
    )
    timings["quantize_s"] = time.perf_counter() - start
    settings["qdq_nodes"] = _count_ops(int8_path, ("QuantizeLinear", "DequantizeLinear"))  # 0: nothing quantized
    return settings, timings


def _count_ops(path: Path, op_types: Sequence[str]) -> dict[str, int]:
    onnx = _import("onnx")
    nodes = onnx.load(str(path), load_external_data=False).graph.node
    return {op: sum(1 for node in nodes if node.op_type == op) for op in op_types}


def _build(module: torch.nn.Module, inputs: Mapping[str, torch.Tensor], threads: int,
           calibration: Optional[Sequence[Mapping[str, torch.Tensor]]] = None, transformer: bool = False,
           reduce_range: bool = False) -> ORTModel:
    check_available()
    timings: dict[str, float] = {}
    # The session keeps the model in memory: the files are only needed until it is open.
    with tempfile.TemporaryDirectory(prefix="ort-peer-") as tmp:
        fp32_path = Path(tmp) / "model.onnx"
        start = time.perf_counter()
        settings = export(module, inputs, fp32_path)
        timings["export_s"] = time.perf_counter() - start
        path = fp32_path
        if calibration is not None:
            path = Path(tmp) / "model.int8.onnx"
            quant_settings, quant_timings = quantize(fp32_path, path, calibration, transformer=transformer,
                                                     reduce_range=reduce_range)
            settings["quantization"] = quant_settings
            timings.update(quant_timings)
        start = time.perf_counter()
        session, effective = open_session(path, threads)
        timings["session_s"] = time.perf_counter() - start
    names = [value.name for value in session.get_inputs()]
    unknown = [name for name in names if name not in inputs]
    if unknown:
        raise RuntimeError(f"ONNX model has inputs {names}, the case gives {list(inputs)}")
    return ORTModel(session, names, quantized=calibration is not None, timings_s=timings, settings=settings,
                    effective=effective)


def build_fp32(module: torch.nn.Module, inputs: Mapping[str, torch.Tensor], threads: int) -> ORTModel:
    """ONNX Runtime FP32: the exported model in a CPU session with ORT_ENABLE_ALL."""
    return _build(module, inputs, threads)


def build_int8(module: torch.nn.Module, inputs: Mapping[str, torch.Tensor], threads: int,
               calibration: Sequence[Mapping[str, torch.Tensor]], transformer: bool = False,
               reduce_range: bool = False) -> ORTModel:
    """ONNX Runtime INT8: quantize_static (QDQ, U8 activations, S8 per-channel weights) of the export."""
    return _build(module, inputs, threads, calibration=calibration, transformer=transformer,
                  reduce_range=reduce_range)


BUILDERS = {"fp32": build_fp32}
