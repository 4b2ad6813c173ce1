"""QDQ ONNX models: Q -> DQ pairs import as fake_quantize nodes (the float model they describe, for fp32),
and an int8 conversion takes their scales instead of calibrating (quant/model_ranges.py)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

onnx = pytest.importorskip("onnx")
import ipexconvert  # noqa: E402
from ipexconvert.artifact import read_artifact  # noqa: E402
from ipexconvert.errors import UserInputError  # noqa: E402
from ipexconvert.frontend.onnx.module import OnnxGraphModule  # noqa: E402
from ipexconvert.quant.options import QuantOptions  # noqa: E402

from onnx_models import qdq_mlp  # noqa: E402


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a.flatten().double(), b.flatten().double(), dim=0))


def _inputs(seed: int = 0) -> torch.Tensor:
    return torch.randn(6, 8, generator=torch.Generator().manual_seed(seed)) * 1.5


def test_a_qdq_pair_imports_as_one_fake_quantize_node(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(qdq_mlp(), str(path))
    art = ipexconvert.optimize(path, dtype="fp32", output=tmp_path / "m.ipxc").path
    _, program = read_artifact(art)
    fq = [n for n in program.graph.nodes if n.op == "fake_quantize"]
    assert sorted(n.attrs["scale"] for n in fq) == pytest.approx([0.015, 0.02])
    x = _inputs()
    want = OnnxGraphModule(qdq_mlp(), 17)(x=x)[0]
    torch.testing.assert_close(ipexconvert.load_artifact(art)(x=x), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("zero_point", [0, 100])
def test_int8_takes_the_models_scales_and_keeps_a_dropped_relu(tmp_path, zero_point):
    """No calibration data: the layers get the model's input scales; a range starting at 0 is a ReLU the
    quantizer removed, and float readers see it (zero point 100: nothing clamps at 0, no ReLU)."""
    model = qdq_mlp(zero_point)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    art = ipexconvert.optimize(path, dtype="int8", output=tmp_path / "m.int8.ipxc").path
    manifest, program = read_artifact(art)
    layers = [n for n in program.graph.nodes if n.op == "qlinear"]
    assert sorted(n.attrs["x_scale"] for n in layers) == pytest.approx([0.015, 0.02])
    plan = manifest.quantization
    assert plan["observer"] == "model" and "QuantizeLinear" in plan["calibration"]
    assert not plan["calibration_synthetic"]
    x = _inputs(1)
    want = OnnxGraphModule(model, 17)(x=x)[0]  # the model's own arithmetic
    got = ipexconvert.load_artifact(art)(x=x)
    assert _cosine(got, want) > 0.999
    if zero_point == 0:  # the clamp at 0 matters here: the same layers without it give another output
        w = {i.name: torch.from_numpy(onnx.numpy_helper.to_array(i).copy()) for i in model.graph.initializer}
        h = torch.nn.functional.linear(x, w["w1q"].float() * 0.01, w["b1"])
        unclamped = torch.nn.functional.linear(h, w["w2q"].float() * 0.01)
        assert _cosine(got, unclamped) < 0.99


def test_an_onnx_model_without_qdq_still_needs_calibration(tmp_path):
    from onnx_models import mlp

    path = tmp_path / "plain.onnx"
    onnx.save(mlp(), str(path))
    with pytest.raises(UserInputError, match="calibration"):
        ipexconvert.optimize(path, dtype="int8", output=tmp_path / "p.ipxc")
    assert not (tmp_path / "p.ipxc").exists()


def test_a_qdq_artifact_exports_its_pairs_back(tmp_path):
    pytest.importorskip("onnxruntime")
    from ipexconvert.export.onnx import export_onnx

    path = tmp_path / "m.onnx"
    onnx.save(qdq_mlp(), str(path))
    art = ipexconvert.optimize(path, dtype="fp32", output=tmp_path / "m.ipxc").path
    out, report = export_onnx(art, tmp_path / "back.onnx", check=True)
    ops = [n.op_type for n in onnx.load(str(out)).graph.node]
    assert ops.count("QuantizeLinear") == 2 and report


def test_onnx_runtime_quantized_cnn_converts_to_int8_with_its_scales(tmp_path):
    """A CNN quantized by ONNX Runtime's quantize_static (QDQ, per-channel weights): every conv is int8
    with an input scale the model states, and the artifact follows ONNX Runtime's reading of the model."""
    ort_quant = pytest.importorskip("onnxruntime.quantization")
    from ipexconvert.examples import get_example
    from ipexconvert.examples.onnx_export import export_example
    from ipexconvert.frontend.onnx import onnx_runtime

    example = get_example("tiny-cnn")
    fp32 = export_example("tiny-cnn", tmp_path / "cnn.onnx")
    batches = [{k: torch.randn_like(v) for k, v in example.example_inputs(1).items()} for _ in range(4)]

    class Reader(ort_quant.CalibrationDataReader):
        def __init__(self):
            self.items = iter([{k: v.numpy() for k, v in b.items()} for b in batches])

        def get_next(self):
            return next(self.items, None)

    qdq = tmp_path / "cnn.qdq.onnx"
    ort_quant.quantize_static(str(fp32), str(qdq), Reader(), quant_format=ort_quant.QuantFormat.QDQ, per_channel=True,
                              activation_type=ort_quant.QuantType.QUInt8, weight_type=ort_quant.QuantType.QInt8)
    model = onnx.load(str(qdq))
    stated = {float(onnx.numpy_helper.to_array(i)) for i in model.graph.initializer
              if i.data_type == onnx.TensorProto.FLOAT and len(i.dims) == 0}
    # Guard off: on random inputs it may move a layer of this tiny random CNN to float; here every conv must
    # come out int8 with the model's scale.
    art = ipexconvert.optimize(qdq, dtype="int8", quant=QuantOptions(guard=False), output=tmp_path / "cnn.int8.ipxc").path
    _, program = read_artifact(art)
    convs = [n for n in program.graph.nodes if n.op == "qconv2d"]
    assert convs and not [n for n in program.graph.nodes if n.op == "conv2d"]
    assert all(any(abs(n.attrs["x_scale"] - s) < 1e-9 for s in stated) for n in convs)
    session = onnx_runtime.runner(onnx_runtime.session(model))
    loaded = ipexconvert.load_artifact(art)
    for b in batches:
        assert _cosine(loaded(**b), session([b["pixel_values"]])[0]) > 0.998
