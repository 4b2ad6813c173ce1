"""The ONNX frontend: .onnx files import through the op table, run as artifacts, and every bad file
or unsupported op is a clear error before anything is traced."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ipexconvert  # noqa: E402
from ipexconvert.errors import UnsupportedOpError, UserInputError  # noqa: E402
from ipexconvert.frontend.base import ImportRequest, import_model  # noqa: E402
from onnx_models import make_model, mlp, mlp_reference, with_nodes  # noqa: E402


def test_mlp_imports_with_its_dynamic_batch_and_runs(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(), str(path))
    ipexconvert.optimize(path, output=tmp_path / "mlp.ipxc")
    model = ipexconvert.load_artifact(tmp_path / "mlp.ipxc")
    assert model.manifest.source.kind == "onnx" and model.manifest.source.sha256
    for batch in (1, 5, 33):
        x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
        np.testing.assert_allclose(model(x=torch.from_numpy(x)).numpy(), mlp_reference(x), rtol=1e-4, atol=1e-5)
    assert "batch" in str(model.signature)


def test_the_shape_arithmetic_stays_symbolic(tmp_path):
    """Shape -> Gather -> Concat -> Reshape becomes a reshape over the dynamic dim, not a data read."""
    imported = import_model(mlp(), ImportRequest())
    reshapes = [n for n in imported.program.graph.nodes if n.op == "reshape"]
    assert reshapes and any("batch" in str(n.attrs["shape"]) or -1 in n.attrs["shape"] for n in reshapes)
    assert imported.program.graph.dims["batch"].max >= 33


def test_input_names_become_identifiers(tmp_path):
    imported = import_model(mlp(input_name="input.1"), ImportRequest())
    assert imported.program.graph.inputs == ["input_1"]
    assert list(imported.example_inputs) == ["input_1"]


def test_unsupported_ops_are_listed_in_one_error():
    model = with_nodes([helper.make_node("Relu", ["x"], ["a"]),
                        helper.make_node("NonZero", ["a"], ["b"]),
                        helper.make_node("Frobnicate", ["b"], ["y"], domain="com.example")],
                       extra_opsets=(("com.example", 1),))
    with pytest.raises(UnsupportedOpError) as e:
        import_model(model, ImportRequest())
    assert "NonZero" in e.value.problem and "com.example.Frobnicate" in e.value.problem
    assert "Relu" not in e.value.problem


def test_attributes_an_entry_does_not_cover_name_the_node():
    model = with_nodes([helper.make_node("Dropout", ["x", "", "train"], ["y"], name="drop1")])
    model.graph.initializer.append(numpy_helper.from_array(np.array(True), "train"))
    with pytest.raises(UnsupportedOpError) as e:  # raised while tracing, reported as itself
        import_model(model, ImportRequest())
    assert "Dropout node 'drop1'" in e.value.problem and "training mode" in e.value.problem
    assert "torch.export" not in e.value.problem


def test_an_attribute_the_entry_never_reads_refuses_the_node():
    """SpaceToDepth's entry knows no `mode`: a model that sets one is refused, not run as if unset."""
    model = with_nodes([helper.make_node("Reshape", ["x", "shape"], ["r"]),
                        helper.make_node("SpaceToDepth", ["r"], ["y"], blocksize=2, mode="CRD")])
    model.graph.initializer.append(numpy_helper.from_array(np.array([1, 2, 2, 2], dtype=np.int64), "shape"))
    with pytest.raises(UnsupportedOpError, match="attribute.*mode"):
        import_model(model, ImportRequest())


def test_opsets_before_13_are_refused():
    with pytest.raises(UnsupportedOpError, match="opset 11"):
        import_model(mlp(opset=11), ImportRequest())


def test_a_file_that_is_not_onnx_is_refused(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\xffnot a protobuf at all" * 10)
    with pytest.raises(UserInputError, match="not a (readable|valid) ONNX model"):
        import_model(bad, ImportRequest())
    with pytest.raises(UserInputError, match="does not exist"):
        import_model(tmp_path / "missing.onnx", ImportRequest())


def test_an_initializer_whose_data_does_not_fit_its_dims_is_refused(tmp_path):
    """onnx.checker refuses data shorter than the dims, not longer; the import refuses it, naming the tensor."""
    model = mlp()
    weight = next(t for t in model.graph.initializer if t.name == "W")
    weight.dims[:] = [16, 4]  # 64 values declared, 128 stored
    path = tmp_path / "damaged.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(UserInputError, match="ONNX tensor 'W' holds data that does not fit its dims"):
        import_model(path, ImportRequest())


def test_a_graph_without_outputs_is_refused():
    model = mlp()
    del model.graph.output[:]
    with pytest.raises(UserInputError, match="declares no outputs"):
        import_model(model, ImportRequest())


def test_onnx_runtime_failing_to_run_the_model_is_a_clear_error():
    """The oracle's own failure (a model ONNX Runtime loads but cannot run on these inputs) is the user's error to
    see, not ONNX Runtime's exception type."""
    pytest.importorskip("onnxruntime")
    from ipexconvert.frontend.onnx import onnx_runtime
    run = onnx_runtime.runner(onnx_runtime.session(mlp()))
    assert run([torch.randn(3, 8)])[0].shape == (3, 16)
    with pytest.raises(UserInputError, match="ONNX Runtime, the reference this conversion is checked against, cannot"):
        run([torch.randn(3, 5)])  # 5 features where the Gemm takes 8


def _with_external_weights(tmp_path: Path, location: str, length: int | None = None) -> Path:
    model = mlp()
    for t in model.graph.initializer:
        if t.name == "W":
            t.ClearField("raw_data")
            t.ClearField("float_data")
            t.data_location = TensorProto.EXTERNAL
            entries = {"location": location, "offset": "0", "length": str(length if length is not None else 16 * 8 * 4)}
            for k, v in entries.items():
                t.external_data.add(key=k, value=v)
    path = tmp_path / "ext" / "model.onnx"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def test_external_data_inside_the_folder_loads(tmp_path):
    from onnx_models import W1
    path = _with_external_weights(tmp_path, "weights.bin")
    (path.parent / "weights.bin").write_bytes(W1.tobytes())
    imported = import_model(path, ImportRequest())
    x = torch.randn(3, 8)
    got = imported.eager(x=x)[0] if isinstance(imported.eager(x=x), tuple) else imported.eager(x=x)
    np.testing.assert_allclose(got.numpy(), mlp_reference(x.numpy()), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/passwd", "sub/../../outside.bin"])
def test_external_data_outside_the_folder_is_refused(tmp_path, location):
    (tmp_path / "outside.bin").write_bytes(b"\x00" * 4096)
    path = _with_external_weights(tmp_path, location)
    with pytest.raises(UserInputError, match="outside the model's folder|not a valid ONNX model"):
        import_model(path, ImportRequest())


def test_external_data_shorter_than_declared_is_refused(tmp_path):
    path = _with_external_weights(tmp_path, "weights.bin", length=16 * 8 * 4)
    (path.parent / "weights.bin").write_bytes(b"\x00" * 100)
    with pytest.raises(UserInputError, match="shorter than the model says|not a valid ONNX model"):
        import_model(path, ImportRequest())


class SmallCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


def test_a_torch_onnx_export_converts_and_matches_eager(tmp_path):
    torch.manual_seed(0)
    cnn = SmallCnn().eval()
    x = torch.randn(2, 3, 16, 16)
    path = tmp_path / "cnn.onnx"
    torch.onnx.export(cnn, (x,), str(path), input_names=["pixels"], output_names=["logits"],
                      dynamic_axes={"pixels": {0: "batch"}}, dynamo=False)
    ipexconvert.optimize(path, output=tmp_path / "cnn.ipxc")
    model = ipexconvert.load_artifact(tmp_path / "cnn.ipxc")
    assert model.signature.output_names == ["logits"]
    for batch in (1, 4):
        xb = torch.randn(batch, 3, 16, 16)
        torch.testing.assert_close(model(pixels=xb), cnn(xb), rtol=1e-4, atol=1e-4)


def test_the_oracle_is_onnx_runtime_where_installed():
    ort = pytest.importorskip("onnxruntime")
    from ipexconvert.frontend.onnx import onnx_runtime
    assert onnx_runtime.session(mlp()) is not None, f"onnxruntime {ort.__version__} refuses the fixture model"
    imported = import_model(mlp(), ImportRequest())
    assert not isinstance(imported.eager, torch.nn.Module)
    x = torch.randn(4, 8)
    np.testing.assert_allclose(imported.eager(x=x)[0].numpy(), mlp_reference(x.numpy()), rtol=1e-4, atol=1e-5)


def test_cli_optimize_reads_onnx_and_refuses_bad_files_with_exit_2(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(), str(path))
    cli = [sys.executable, "-m", "ipexconvert.cli"]
    ok = subprocess.run(cli + ["optimize", str(path), "-o", str(tmp_path / "m.ipxc"), "--no-timing"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "m.ipxc").is_file()
    bad = tmp_path / "bad.onnx"
    bad.write_text("hello")
    refused = subprocess.run(cli + ["optimize", str(bad), "-o", str(tmp_path / "b.ipxc")], capture_output=True, text=True)
    assert refused.returncode == 2 and "ONNX model" in refused.stderr + refused.stdout
    assert not (tmp_path / "b.ipxc").exists()


def test_int8_conversion_of_layers_sharing_one_bias_initializer(tmp_path):
    """torch.onnx.export stores equal initializers once (zero biases): several linears then read one
    constant, and the int8 artifact must still write each layer's own copy."""
    rng = np.random.default_rng(1)
    w1 = rng.standard_normal((8, 8)).astype(np.float32)
    w2 = rng.standard_normal((8, 8)).astype(np.float32)
    w3 = rng.standard_normal((8, 8)).astype(np.float32)
    nodes = []
    for i, (src, dst) in enumerate((("x", "r1"), ("r1", "r2"), ("r2", "r3"))):
        nodes += [helper.make_node("MatMul", [src, f"W{i + 1}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", "zero_bias"], [f"a{i}"]),
                  helper.make_node("Relu", [f"a{i}"], [dst])]
    nodes.append(helper.make_node("Identity", ["r3"], ["y"]))
    graph = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
                              [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2"),
                               numpy_helper.from_array(w3, "W3"),
                               numpy_helper.from_array(np.zeros(8, dtype=np.float32), "zero_bias")])
    path = tmp_path / "shared.onnx"
    onnx.save(make_model(graph, [helper.make_opsetid("", 17)]), str(path))
    result = ipexconvert.optimize(path, output=tmp_path / "s.ipxc", dtype="int8", calib_synthetic=8)
    model = ipexconvert.load_artifact(result.path)
    assert model.manifest.op_histogram.get("qlinear", 0) >= 2
    x = torch.randn(4, 8)
    want = x
    for w in (w1, w2, w3):
        want = torch.relu(want @ torch.from_numpy(w))
    assert torch.nn.functional.cosine_similarity(model(x=x).flatten(), want.flatten(), dim=0) > 0.99
