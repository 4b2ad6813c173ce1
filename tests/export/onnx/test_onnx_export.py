"""ipexconvert export: fp32 artifacts, and int8 ones as QDQ, as ONNX that ONNX Runtime (and our own
ONNX reader) run to the artifact's outputs, dynamic dims kept; what cannot be exported is refused
before anything is written."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

onnx = pytest.importorskip("onnx")
import ipexconvert  # noqa: E402
from ipexconvert.artifact import read_artifact  # noqa: E402
from ipexconvert.errors import UnsupportedOpError, UserInputError  # noqa: E402
from ipexconvert.export.onnx import export_onnx  # noqa: E402
from ipexconvert.frontend.onnx.module import OnnxGraphModule  # noqa: E402


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a.flatten().double(), b.flatten().double(), dim=0))


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("export")
    made = {}
    for name in ("tiny-cnn", "tiny-bert"):
        made[name] = ipexconvert.optimize(f"example:{name}", dtype="fp32", output=folder / f"{name}.ipxc").path
    return folder, made


CASES = {
    "tiny-cnn": lambda: {"pixel_values": torch.randn(3, 3, 64, 64)},
    "tiny-bert": lambda: {"input_ids": torch.randint(0, 100, (3, 11)),
                          "attention_mask": torch.tensor([[1] * 11, [1] * 5 + [0] * 6, [1] * 11])},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_export_runs_to_the_artifacts_outputs_at_other_sizes(artifacts, name):
    folder, made = artifacts
    path, report = export_onnx(made[name], folder / f"{name}.onnx", check=False)
    model = onnx.load(str(path))
    assert any(d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim)  # dynamic dims kept
    feeds = CASES[name]()  # batch 3 (and seq 11): not the conversion's example sizes
    want = ipexconvert.load_artifact(made[name])(**feeds)
    want = list(want) if isinstance(want, tuple) else [want]
    reader = OnnxGraphModule(model, 17)  # our ONNX reader, checked against ONNX's node tests
    got = reader(**feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape and _cosine(g, w) > 0.99999


@pytest.mark.parametrize("name", sorted(CASES))
def test_onnx_runtime_runs_the_export(artifacts, name):
    ort = pytest.importorskip("onnxruntime")
    folder, made = artifacts
    path, report = export_onnx(made[name], folder / f"{name}.ort.onnx", check=True)
    assert report and all("cosine 1.000000" in line or "cosine 0.99999" in line for line in report)
    feeds = CASES[name]()
    want = ipexconvert.load_artifact(made[name])(**feeds)
    want = list(want) if isinstance(want, tuple) else [want]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = [torch.from_numpy(g) for g in session.run(None, {k: v.numpy() for k, v in feeds.items()})]
    for g, w in zip(got, want):
        assert g.shape == w.shape and _cosine(g, w) > 0.99999


def test_an_export_imports_back_to_the_same_outputs(artifacts):
    folder, made = artifacts
    path, _ = export_onnx(made["tiny-cnn"], folder / "again.onnx", check=False)
    again = ipexconvert.optimize(path, output=folder / "again.ipxc").path
    x = torch.randn(2, 3, 64, 64)
    torch.testing.assert_close(ipexconvert.load_artifact(again)(pixel_values=x),
                               ipexconvert.load_artifact(made["tiny-cnn"])(pixel_values=x), rtol=1e-4, atol=1e-5)


class CumulativeSum(torch.nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1) * 2


def test_ops_without_an_emitter_are_listed_and_nothing_is_written(tmp_path):
    art = ipexconvert.optimize(CumulativeSum(), {"x": torch.randn(2, 5)}, output=tmp_path / "c.ipxc").path
    with pytest.raises(UnsupportedOpError, match="aten:aten.cumsum.default"):
        export_onnx(art, tmp_path / "c.onnx")
    assert not (tmp_path / "c.onnx").exists()


def test_cli_export_and_its_refusals(artifacts, tmp_path):
    folder, made = artifacts
    cli = [sys.executable, "-m", "ipexconvert.cli"]
    ok = subprocess.run(cli + ["export", str(made["tiny-cnn"]), "-o", str(tmp_path / "m.onnx")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "wrote" in ok.stdout and (tmp_path / "m.onnx").is_file()
    bf16 = ipexconvert.optimize("example:tiny-cnn", dtype="bf16", output=tmp_path / "b.ipxc").path
    refused = subprocess.run(cli + ["export", str(bf16), "-o", str(tmp_path / "b.onnx")], capture_output=True, text=True)
    assert refused.returncode == 2 and "bf16 artifact" in refused.stderr + refused.stdout
    assert not (tmp_path / "b.onnx").exists()
    with pytest.raises(UserInputError):
        export_onnx(bf16, tmp_path / "b2.onnx")


@pytest.fixture(scope="module")
def int8_artifacts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("export-int8")
    made = {}
    for name in ("tiny-cnn", "tiny-bert"):
        made[name] = ipexconvert.optimize(f"example:{name}", dtype="int8", calib_synthetic=8,
                                          output=folder / f"{name}.int8.ipxc").path
    return folder, made


@pytest.mark.parametrize("name", sorted(CASES))
def test_int8_exports_as_qdq_with_the_calibrated_scales(int8_artifacts, name):
    folder, made = int8_artifacts
    path, _ = export_onnx(made[name], folder / f"{name}.int8.onnx", check=False)
    model = onnx.load(str(path))
    ops = {n.op_type for n in model.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    int8_weights = [t for t in model.graph.initializer if t.data_type == onnx.TensorProto.INT8 and len(t.dims) >= 2]
    assert int8_weights  # weights stay int8 codes with their per-channel scales
    feeds = CASES[name]()
    want = ipexconvert.load_artifact(made[name])(**feeds)
    want = list(want) if isinstance(want, tuple) else [want]
    got = OnnxGraphModule(model, 17)(**feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape and _cosine(g, w) > 0.999


def test_onnx_runtime_runs_the_int8_export(int8_artifacts):
    ort = pytest.importorskip("onnxruntime")
    folder, made = int8_artifacts
    path, report = export_onnx(made["tiny-bert"], folder / "tb.ort.int8.onnx", check=True)
    assert len(report) == 2
    feeds = CASES["tiny-bert"]()
    want = ipexconvert.load_artifact(made["tiny-bert"])(**feeds)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = [torch.from_numpy(g) for g in session.run(None, {k: v.numpy() for k, v in feeds.items()})]
    for g, w in zip(got, want):
        assert _cosine(g, w) > 0.999


def test_check_compares_an_artifact_with_its_onnx_export(int8_artifacts, tmp_path):
    pytest.importorskip("onnxruntime")
    folder, made = int8_artifacts
    cli = [sys.executable, "-m", "ipexconvert.cli"]
    exported, _ = export_onnx(made["tiny-cnn"], tmp_path / "cnn.int8.onnx", check=False)
    ok = subprocess.run(cli + ["check", str(made["tiny-cnn"]), "--reference", str(exported), "--json"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # The export with its float biases tripled: a regression the check must report.
    model = onnx.load(str(exported))
    for t in model.graph.initializer:
        if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 1 and t.dims[0] > 1:
            t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t) * 3, t.name))
    other_onnx = tmp_path / "other.onnx"
    onnx.save(model, str(other_onnx))
    bad = subprocess.run(cli + ["check", str(made["tiny-cnn"]), "--reference", str(other_onnx)], capture_output=True, text=True)
    assert bad.returncode == 1 and "REGRESSION" in bad.stdout
    wrong = subprocess.run(cli + ["check", str(made["tiny-bert"]), "--reference", str(exported)], capture_output=True, text=True)
    assert wrong.returncode == 2 and "input" in wrong.stdout + wrong.stderr


class _ResidualNet(torch.nn.Module):
    """An identity-shortcut block (int8_residual keeps its residual in uint8), pooling and a classifier."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.a = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.b = torch.nn.Conv2d(16, 16, 1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        h = torch.relu(self.stem(x))
        y = torch.relu(self.b(torch.relu(self.a(h))) + h)
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))


def test_int8_export_is_all_integer_kernels_under_onnx_runtime(tmp_path):
    """Every int8 conv reaches ONNX Runtime's integer convolution: a residual sum through a Q/DQ pair at a
    range derived from the output's, a float output through its calibrated range, the classifier as a Gemm
    with an int32 bias (QGemm); and the export still matches the artifact."""
    ort = pytest.importorskip("onnxruntime")
    art = ipexconvert.optimize(_ResidualNet(), {"x": torch.randn(2, 3, 16, 16)}, dtype="int8", calib_synthetic=6,
                               output=tmp_path / "r.ipxc").path
    _, program = read_artifact(art)
    convs = [n for n in program.graph.nodes if n.op == "qconv2d"]
    assert any(n.attrs.get("accum_scale") for n in convs)  # the residual is uint8 codes
    path, report = export_onnx(art, tmp_path / "r.onnx", check=True)
    assert report
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "r.opt.onnx")
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    ops = [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]
    assert ops.count("QLinearConv") == len(convs), ops
    assert "QGemm" in ops and not {"Conv", "FusedConv", "Gemm", "MatMul"} & set(ops), ops


class _Subsample(torch.nn.Module):
    def forward(self, x):
        return x[:, :, ::2, 1::2] * 2


def test_a_two_dim_subsampling_is_one_slice(tmp_path):
    art = ipexconvert.optimize(_Subsample(), {"x": torch.randn(2, 3, 8, 9)}, output=tmp_path / "s.ipxc").path
    path, _ = export_onnx(art, tmp_path / "s.onnx", check=False)
    slices = [n for n in onnx.load(str(path)).graph.node if n.op_type == "Slice"]
    assert len(slices) == 1
    x = torch.randn(2, 3, 8, 9)
    got = OnnxGraphModule(onnx.load(str(path)), 17)(x=x)[0]
    torch.testing.assert_close(got, x[:, :, ::2, 1::2] * 2)


class _MaskedAttention(torch.nn.Module):
    def forward(self, q, k, v, keep):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep) * 2


@pytest.mark.parametrize("additive", [False, True])
def test_fully_masked_rows_export_as_zero(tmp_path, additive):
    """sdpa promises 0 for a query row whose every key is masked; the export gives the same, bool or -inf mask."""
    ort = pytest.importorskip("onnxruntime")
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    keep = torch.rand(2, 1, 5, 6) > 0.3
    keep[0, 0, 2] = False  # one fully masked row
    keep[..., 0] |= torch.arange(5).view(1, 1, 5) != 2  # every other row keeps a key
    mask = torch.zeros(keep.shape).masked_fill(~keep, float("-inf")) if additive else keep
    k, v = torch.randn(2, 3, 6, 4), torch.randn(2, 3, 6, 4)
    inputs = {"q": q, "k": k, "v": v, "keep": mask}
    art = ipexconvert.optimize(_MaskedAttention(), inputs, output=tmp_path / "a.ipxc").path
    path, _ = export_onnx(art, tmp_path / "a.onnx", check=True)
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {n: t.numpy() for n, t in inputs.items()})[0]
    want = ipexconvert.load_artifact(art)(**inputs)
    assert torch.equal(torch.from_numpy(got)[0, :, 2], torch.zeros(3, 4))
    torch.testing.assert_close(torch.from_numpy(got), want, rtol=1e-5, atol=1e-5)


class _SwiGlu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.gate, self.up = torch.nn.Linear(8, 12, bias=False), torch.nn.Linear(8, 12, bias=False)

    def forward(self, x):
        return torch.nn.functional.silu(self.gate(x)) * self.up(x)


@pytest.mark.parametrize("halves", [True, False])
def test_silu_mul_exports_with_its_gate_and_up(tmp_path, halves):
    """silu_mul of two inputs, and of one whose last dim holds gate then up (merge_linears before fuse_swiglu)."""
    passes = ["merge_linears", "fuse_swiglu"] if halves else ["fuse_swiglu"]
    x = torch.randn(2, 3, 8)
    art = ipexconvert.optimize(_SwiGlu().eval(), {"x": x}, passes=passes, output=tmp_path / "g.ipxc").path
    (node,) = [n for n in ipexconvert.load_artifact(art).graph.nodes if n.op == "silu_mul"]
    assert len(node.inputs) == (1 if halves else 2)
    path, _ = export_onnx(art, tmp_path / "g.onnx", check=False)
    got = OnnxGraphModule(onnx.load(str(path)), 17)(x=x)[0]
    torch.testing.assert_close(got, _SwiGlu().eval()(x), rtol=1e-5, atol=1e-5)
