"""OpenVINO as a peer in `benchmarks/run.py`: FP32, BF16 and INT8 (NNCF post-training quantization).

Given the eager torch module and the case's example inputs (a dict name -> tensor), this builds an
OpenVINO model compiled for the CPU and returns a callable that takes the same keyword inputs and
returns torch tensors (one tensor, or a tuple when the model has several outputs), like the
module does. Only public OpenVINO / NNCF API is used:

  conversion   openvino.convert_model(module, example_input=inputs)  (keyword inputs: the model's
               inputs are named after the dict keys), then Model.reshape() to the example shapes,
               so OpenVINO compiles for the case's static shapes, as torch.compile specializes to
               them (static=False keeps the converted model's dynamic dims)
  fp32         Core().compile_model(model, "CPU", {INFERENCE_PRECISION_HINT: f32, ...})
  bf16         the same with INFERENCE_PRECISION_HINT bf16 (OpenVINO's own default on CPUs with
               AVX512_BF16 / AMX; an explicit f32 is needed for a real fp32 peer)
  int8         nncf.quantize(converted model, nncf.Dataset(calibration batches), subset_size=number
               of batches, model_type=nncf.ModelType.TRANSFORMER for transformer models), then
               compiled like the others; the operations NNCF leaves unquantized run at the
               precision hint of `int8_precision` (bf16 by default, f32 also possible)

Every compiled model gets INFERENCE_NUM_THREADS = the runner's --threads, PERFORMANCE_HINT
LATENCY and NUM_STREAMS 1: one synchronous request at a time on `threads` cores, the way the
other systems run. The effective properties (precision, threads, streams, pinning) are read
back from the compiled model and recorded, because OpenVINO may quietly adjust a hint (for
example bf16 on a CPU without bf16 support runs f32).

Install (a separate venv keeps the project's .venv free of OpenVINO):

  python3.11 -m venv /tmp/ovvenv
  /tmp/ovvenv/bin/pip install torch==2.13.0 openvino nncf
  /tmp/ovvenv/bin/pip install -e ".[examples]"     # from the repository root; or PYTHONPATH=.
  /tmp/ovvenv/bin/python benchmarks/run.py --peers openvino --int8 --cases resnet50-b1 --rounds 15
"""
from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import torch

INSTALL_HINT = (
    "the OpenVINO peers need the `openvino` and `nncf` packages next to torch. Install them into a "
    "separate venv, e.g.\n"
    "  python3.11 -m venv /tmp/ovvenv\n"
    "  /tmp/ovvenv/bin/pip install torch==2.13.0 openvino nncf\n"
    "  /tmp/ovvenv/bin/pip install -e '.[examples]'    # ipexconvert and the example models\n"
    "and run the runner with that interpreter:\n"
    "  /tmp/ovvenv/bin/python benchmarks/run.py --peers openvino ..."
)

PRECISIONS = ("f32", "bf16")


class PeerUnavailable(RuntimeError):
    """The peer's packages are missing (or broken); the message says how to install them."""


def _import(name: str):
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - ImportError, or a broken install raising anything else
        raise PeerUnavailable(f"cannot import {name} ({type(exc).__name__}: {exc}); {INSTALL_HINT}") from exc


def check_available(need_nncf: bool = True) -> dict[str, str]:
    """Import openvino (and nncf); return their versions or raise PeerUnavailable with the install hint."""
    ov = _import("openvino")
    found = {"openvino": ov.get_version()}
    if need_nncf:
        nncf = _import("nncf")
        found["nncf"] = getattr(nncf, "__version__", "unknown")
    return found


@dataclass
class OpenVINOModel:
    """A compiled OpenVINO model callable like the torch module: model(**inputs) -> tensor or tuple."""

    compiled: Any  # openvino.CompiledModel
    input_names: list[str]  # the runner's input names, in the compiled model's input order
    precision: str  # the hint that was asked for: "f32" or "bf16"
    quantized: bool = False
    timings_s: dict[str, float] = field(default_factory=dict)  # convert / quantize / compile
    properties: dict[str, str] = field(default_factory=dict)  # effective, read back from the compiled model
    keepalive: Any = None  # the torch module: convert_model shares its weights by default

    def __post_init__(self) -> None:
        self._request = self.compiled.create_infer_request()

    def __call__(self, **inputs: torch.Tensor):
        feed = [_to_numpy(inputs[name]) for name in self.input_names]
        # share_inputs=True: the request reads the numpy views of the torch tensors without a copy;
        # outputs are copied (share_outputs=False), so the returned tensors stay valid after the
        # next call.
        results = self._request.infer(feed, share_inputs=True)
        outputs = tuple(torch.from_numpy(results[i]) for i in range(len(self.compiled.outputs)))
        return outputs[0] if len(outputs) == 1 else outputs

    def describe(self) -> str:
        props = self.properties
        kind = "NNCF INT8, " if self.quantized else ""
        return (f"OpenVINO CPU, {kind}precision hint {props.get('INFERENCE_PRECISION_HINT', self.precision)}, "
                f"{props.get('INFERENCE_NUM_THREADS', '?')} threads, {props.get('NUM_STREAMS', '?')} stream(s)")


def _to_numpy(tensor: torch.Tensor):
    tensor = tensor.detach()
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16; the peers are fed float32 anyway
        tensor = tensor.float()
    return tensor.numpy()


def convert(module: torch.nn.Module, example_inputs: Mapping[str, torch.Tensor], static: bool = True):
    """openvino.convert_model on the eager module (traced with the keyword example inputs).

    Returns (ov.Model, input names in the model's input order). With static=True the model is
    reshaped to the example inputs' shapes.
    """
    ov = _import("openvino")
    example = dict(example_inputs)
    with torch.no_grad():
        model = ov.convert_model(module, example_input=example)
    names = _input_names(model, list(example))
    if static:
        model.reshape({model.inputs[i]: ov.PartialShape(list(example[name].shape)) for i, name in enumerate(names)})
    return model, names


def _input_names(model, expected: list[str]) -> list[str]:
    """Map the converted model's inputs to the runner's input names (by tensor name, else by position)."""
    names = []
    for index, port in enumerate(model.inputs):
        port_names = set(port.get_names())
        match = next((name for name in expected if name in port_names), None)
        if match is None:
            if len(model.inputs) != len(expected):
                raise RuntimeError(f"OpenVINO model has inputs {[sorted(p.get_names()) for p in model.inputs]}, "
                                   f"expected {expected}")
            match = expected[index]
        names.append(match)
    if sorted(names) != sorted(expected):
        raise RuntimeError(f"OpenVINO model inputs map to {names}, expected {expected}")
    return names


def compile_for_cpu(model, threads: int, precision: str):
    """Core().compile_model(model, "CPU") for one synchronous stream on `threads` threads.

    Returns (compiled model, effective properties read back from it).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    ov = _import("openvino")
    config = {
        "INFERENCE_NUM_THREADS": int(threads),
        "INFERENCE_PRECISION_HINT": precision,
        "PERFORMANCE_HINT": "LATENCY",
        "NUM_STREAMS": 1,
    }
    compiled = ov.Core().compile_model(model, "CPU", config)
    properties = {}
    for key in ("INFERENCE_PRECISION_HINT", "INFERENCE_NUM_THREADS", "NUM_STREAMS", "PERFORMANCE_HINT",
                "ENABLE_CPU_PINNING", "ENABLE_HYPER_THREADING", "SCHEDULING_CORE_TYPE"):
        try:
            value = compiled.get_property(key)
        except Exception:  # noqa: BLE001 - a property this OpenVINO version does not report
            continue
        # ov.Type prints as "<Type: 'bfloat16'>"; its type name is the short "bf16" / "f32".
        properties[key] = value.get_type_name() if hasattr(value, "get_type_name") else str(value)
    return compiled, properties


def _build(module: torch.nn.Module, inputs: Mapping[str, torch.Tensor], threads: int, precision: str,
           static: bool, calibration: Optional[Sequence[Mapping[str, torch.Tensor]]] = None,
           transformer: bool = False) -> OpenVINOModel:
    timings = {}
    start = time.perf_counter()
    model, names = convert(module, inputs, static=static)
    timings["convert_s"] = time.perf_counter() - start
    if calibration is not None:
        start = time.perf_counter()
        model = quantize(model, names, calibration, transformer=transformer)
        timings["quantize_s"] = time.perf_counter() - start
    start = time.perf_counter()
    compiled, properties = compile_for_cpu(model, threads, precision)
    timings["compile_s"] = time.perf_counter() - start
    return OpenVINOModel(compiled, names, precision, quantized=calibration is not None, timings_s=timings,
                         properties=properties, keepalive=module)


def quantize(model, input_names: list[str], calibration: Sequence[Mapping[str, torch.Tensor]],
             transformer: bool = False):
    """NNCF post-training INT8 quantization of a converted OpenVINO model.

    calibration: a few input dicts (name -> tensor) shaped like the model's inputs. All of them are
    used (subset_size = their number). transformer=True passes model_type=nncf.ModelType.TRANSFORMER
    (NNCF's setting for attention models: it keeps the quantization-sensitive ops in float).
    """
    nncf = _import("nncf")
    if not calibration:
        raise ValueError("INT8 quantization needs at least one calibration batch")
    items = list(calibration)

    def transform(item: Mapping[str, torch.Tensor]):
        return {name: _to_numpy(item[name]) for name in input_names}

    kwargs: dict[str, Any] = {"subset_size": len(items)}
    if transformer:
        kwargs["model_type"] = nncf.ModelType.TRANSFORMER
    return nncf.quantize(model, nncf.Dataset(items, transform), **kwargs)


def build_fp32(module: torch.nn.Module, inputs: Mapping[str, torch.Tensor], threads: int,
               static: bool = True) -> OpenVINOModel:
    """OpenVINO FP32: converted model compiled with INFERENCE_PRECISION_HINT f32."""
    return _build(module, inputs, threads, "f32", static)


def build_bf16(module: torch.nn.Module, inputs: Mapping[str, torch.Tensor], threads: int,
               static: bool = True) -> OpenVINOModel:
    """OpenVINO BF16: the same float model compiled with INFERENCE_PRECISION_HINT bf16."""
    return _build(module, inputs, threads, "bf16", static)


def build_int8(module: torch.nn.Module, inputs: Mapping[str, torch.Tensor], threads: int,
               calibration: Sequence[Mapping[str, torch.Tensor]], transformer: bool = False,
               precision: str = "bf16", static: bool = True) -> OpenVINOModel:
    """OpenVINO INT8: nncf.quantize on the converted model, compiled with hint `precision` for the rest."""
    return _build(module, inputs, threads, precision, static, calibration=calibration, transformer=transformer)


BUILDERS = {"fp32": build_fp32, "bf16": build_bf16}
