"""Artifact -> ONNX: `ipexconvert export model.ipxc -o model.onnx`.

The artifact's graph (after its passes: fused post-ops, packed layouts undone) is written as
standard ONNX ops at opset 17 through EMITTERS (emitters/, one file per op family), its weights as
initializers, its dynamic dims as symbolic input dims. Every op is checked first and the ones
without an emitter are refused in one message; the file is checked by onnx.checker and renamed into
place only when complete. fp32 artifacts, and int8 ones as QDQ (emitters/quant.py: codes between
layers, DequantizeLinear with the calibrated scales into each int8 layer, float parts in float32).
"""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import onnx
import torch
from onnx import helper, numpy_helper

from ...artifact import read_artifact
from ...errors import AccuracyError, UnsupportedOpError, UserInputError
from ...output_path import check_writable, scratch_folder, write_errors
from .builder import OnnxBuilder, Unexportable, unsupported
from .emitters import EMITTERS
from .emitters.aten import supported as aten_supported
from .emitters.layout import onnx_type

OPSET = 17


def _label(node) -> str:
    return f"aten:{node.attrs.get('target')}" if node.op == "aten" else node.op


def _value_info(graph, name: str) -> onnx.ValueInfoProto:
    spec = graph.values[name]
    dims = [d if isinstance(d, int) else str(d) for d in spec.shape]
    return helper.make_tensor_value_info(name, onnx_type(spec.dtype), dims)


def _output_ranges(quantization) -> dict[str, tuple[float, int, str]]:
    """Layer -> (scale, zero point, dtype) of its calibrated output, from the artifact's int8 plan."""
    layers = (quantization or {}).get("layers", {})
    return {name: (out["scale"], out["zero_point"], out["dtype"]) for name, layer in layers.items()
            if (out := layer.get("output")) is not None}


def to_onnx_model(path: Path) -> onnx.ModelProto:
    manifest, program = read_artifact(path)
    if manifest.dtype not in ("fp32", "int8"):
        raise UserInputError(f"{path} is a {manifest.dtype} artifact; export writes fp32 and int8 artifacts",
                             "convert the model with --dtype fp32 (or int8) and export that")
    graph = program.graph
    missing = Counter(_label(n) for n in graph.nodes
                      if n.op not in EMITTERS or (n.op == "aten" and not aten_supported(n.attrs.get("target"))))
    if missing:
        raise unsupported(dict(missing))
    b = OnnxBuilder(graph, program.weights)
    b.output_ranges = _output_ranges(manifest.quantization)
    initializers = []
    for name in graph.constants:
        tensor = program.weights[name].contiguous()
        if tensor.dtype == torch.bfloat16:  # float parts are written as float32 (emitters/layout.py)
            tensor = tensor.float()
        initializers.append(numpy_helper.from_array(tensor.numpy(), name))
    for node in graph.nodes:
        try:
            EMITTERS[node.op](b, node)
        except Unexportable as e:
            raise UnsupportedOpError(f"cannot export node {node.name} ({_label(node)}) to ONNX: {e}",
                                     "see docs/onnx.md for what export covers") from None
    read = {i for n in b.nodes for i in n.input}  # a linear's weight is stored transposed: drop the original
    onnx_graph = helper.make_graph(b.nodes, Path(path).stem, [_value_info(graph, n) for n in graph.inputs],
                                   [_value_info(graph, n) for n in graph.outputs],
                                   [t for t in initializers + b.initializers if t.name in read])
    model = helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="ipexconvert", doc_string=f"exported from {Path(path).name}")
    model.ir_version = 8  # readable by ONNX Runtime and OpenVINO releases of the last years
    onnx.checker.check_model(model)
    return model


# The ONNX file under ONNX Runtime against the artifact: fp32 reproduces it; int8 layers round at
# slightly different points (ONNX divides by the scale, our kernels multiply by its inverse; the float
# parts run in float32 instead of bfloat16), so a code here and there differs by one.
MIN_COSINE = {"fp32": 0.99999, "int8": 0.999}


def compare_with_artifact(artifact: Path, onnx_path: Path) -> list[str]:
    """Run the ONNX file under ONNX Runtime on the artifact's stored example inputs and compare each
    output with the artifact's; raises AccuracyError below MIN_COSINE. [] when ORT is not installed."""
    try:
        import onnxruntime
    except ImportError:
        return ["ONNX Runtime is not installed: the export was not run (pip install onnxruntime to check it)"]
    from ...accuracy import compare_output
    from ...api import load_artifact
    from ...artifact import read_example_inputs

    model = load_artifact(artifact)
    inputs = read_example_inputs(artifact)
    want = model.run_dict(inputs)
    options = onnxruntime.SessionOptions()
    # Without VNNI, ONNX Runtime's u8 x s8 kernels sum pairs of products into 16 bits and saturate (cosine 0.998 on an
    # int8 ResNet on AVX2); this documented switch runs its exact u8 x u8 kernels there instead (no effect elsewhere).
    # docs/onnx.md tells users to set it too.
    options.add_session_config_entry("session.x64quantprecision", "1")
    session = onnxruntime.InferenceSession(str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"])
    got = session.run(list(want), {k: v.numpy() for k, v in inputs.items()})
    lines = []
    for (name, w), g in zip(want.items(), got):
        result = compare_output(name, torch.from_numpy(g), w)
        lines.append(f"ONNX Runtime vs artifact, {name}: cosine {result.cosine:.6f}, max abs error {result.max_abs_error:.3g}")
        budget = MIN_COSINE[model.manifest.dtype]
        if result.cosine < budget:
            raise AccuracyError(f"the ONNX export's output {name} differs from the artifact's (cosine {result.cosine:.6f}, "
                                f"budget {budget})", "report this model: an emitter is wrong; nothing was written")
    return lines


def export_onnx(artifact: Path, output: Path, check: bool = True) -> tuple[Path, list[str]]:
    """Write the ONNX file (checked under ONNX Runtime first when `check`); (its path, the check's lines)."""
    output = Path(output)
    check_writable(output, "-o")
    model = to_onnx_model(Path(artifact))
    with scratch_folder(output, "-o") as folder, write_errors(output, "-o"):
        partial = folder / output.name
        onnx.save(model, str(partial))
        report = compare_with_artifact(Path(artifact), partial) if check else []
        os.replace(partial, output)
    return output, report
