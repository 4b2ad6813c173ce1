"""The torch.export frontend's ATen -> IR table (frontend/torch/aten_map/).

Every entry names an op of the opset; every target the table held when it moved out of the IR
still maps to the same op; mappers build the (inputs, attrs) their IR op takes; and two small
models that call every mapped target family convert into those ops and match eager.
"""
from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

import ipexconvert
from ipexconvert.frontend.torch import custom_ops
from ipexconvert.frontend.torch.aten_map import ATEN_MAP, Unconvertible
from ipexconvert.ir import OPSET, get_op
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.ir.ops.aten import resolve_target

_GEN = torch.Generator().manual_seed(1234)

# The table when the mapping moved out of the IR op classes (ATen target -> IR op). A regression
# check: targets may be added, but none of these may stop mapping or map to another op.
MAPPED_WHEN_MOVED = {
    "aten._native_batch_norm_legit_no_training.default": "batch_norm",
    "aten._softmax.default": "softmax",
    "aten._to_copy.default": "to_dtype",
    "aten._unsafe_view.default": "reshape",
    "aten.adaptive_avg_pool2d.default": "adaptive_avg_pool2d",
    "aten.add.Tensor": "add",
    "aten.alias.default": "identity",
    "aten.batch_norm.default": "batch_norm",
    "aten.bmm.default": "matmul",
    "aten.clone.default": "identity",
    "aten.contiguous.default": "identity",
    "aten.conv2d.default": "conv2d",
    "aten.convolution.default": "conv2d",
    "aten.detach.default": "identity",
    "aten.div.Tensor": "div",
    "aten.dropout.default": "identity",
    "aten.embedding.default": "embedding",
    "aten.flatten.using_ints": "flatten",
    "aten.gelu.default": "gelu",
    "aten.layer_norm.default": "layer_norm",
    "aten.lift_fresh_copy.default": "identity",
    "aten.linear.default": "linear",
    "aten.matmul.default": "matmul",
    "aten.max_pool2d.default": "max_pool2d",
    "aten.mm.default": "matmul",
    "aten.mul.Tensor": "mul",
    "aten.native_layer_norm.default": "layer_norm",
    "aten.permute.default": "permute",
    "aten.relu.default": "relu",
    "aten.reshape.default": "reshape",
    "aten.rms_norm.default": "rms_norm",
    "aten.scaled_dot_product_attention.default": "sdpa",
    "aten.sigmoid.default": "sigmoid",
    "aten.silu.default": "silu",
    "aten.softmax.int": "softmax",
    "aten.sub.Tensor": "sub",
    "aten.t.default": "permute",
    "aten.tanh.default": "tanh",
    "aten.to.dtype": "to_dtype",
    "aten.transpose.int": "permute",
    "aten.view.default": "reshape",
}
MAPPED_OPS = sorted({m.op for m in ATEN_MAP.values()})


# ---- the table ------------------------------------------------------------------------------------------------------


def test_every_entry_names_an_op_of_the_opset():
    unknown = {target: m.op for target, m in ATEN_MAP.items() if m.op not in OPSET}
    assert not unknown, f"ATEN_MAP entries name ops the IR does not have: {unknown}"


def test_every_entry_is_an_aten_op_of_this_torch():
    """A misspelt target would never match a call (resolve_target raises ValueError for it); the
    targets outside ATen are our own ops that frontends trace to (frontend/torch/custom_ops.py)."""
    from ipexconvert.frontend.torch import custom_ops

    for target in ATEN_MAP:
        if target.startswith("ipexconvert."):
            custom_ops.resolve(target)
        else:
            resolve_target(target)


def test_targets_mapped_before_the_move_still_map_to_the_same_op():
    now = {target: ATEN_MAP[target].op for target in MAPPED_WHEN_MOVED if target in ATEN_MAP}
    assert now == MAPPED_WHEN_MOVED, {t: (op, now.get(t)) for t, op in MAPPED_WHEN_MOVED.items() if now.get(t) != op}
    assert set(MAPPED_WHEN_MOVED.values()) <= set(MAPPED_OPS)


def test_the_ir_and_the_examples_import_nothing_from_the_frontend():
    """The IR is frontend-neutral (each frontend keeps its own table) and the examples are plain data."""
    root = Path(ipexconvert.__file__).parent
    offenders = []
    for path in [*(root / "ir").rglob("*.py"), *(root / "examples").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and "frontend" in (node.module or "").split("."):
                offenders.append(f"{path.relative_to(root)}:{node.lineno}")
            if isinstance(node, ast.Import) and any("frontend" in a.name.split(".") for a in node.names):
                offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not offenders


# ---- mappers on hand-built arguments ----------------------------------------------------------------------------------


def _convert(target: str, args: dict):
    """(inputs, attrs) as the mapper builds them, after checking the IR op accepts the attrs."""
    mapper = ATEN_MAP[target]
    inputs, attrs = mapper.convert(target, args)
    get_op(mapper.op).parse_attrs(attrs)
    return inputs, attrs


def test_gelu_keeps_the_approximation():
    assert _convert("aten.gelu.default", {"self": "x", "approximate": "tanh"}) == (["x"], {"approximate": "tanh"})
    assert _convert("aten.gelu.default", {"self": "x"}) == (["x"], {"approximate": "none"})


def test_linear_with_and_without_bias():
    assert _convert("aten.linear.default", {"input": "x", "weight": "w", "bias": "b"}) == (["x", "w", "b"], {})
    assert _convert("aten.linear.default", {"input": "x", "weight": "w", "bias": None}) == (["x", "w", None], {})


def test_flatten_maps_arguments():
    assert _convert("aten.flatten.using_ints", {"self": "x", "start_dim": 1, "end_dim": -1}) == \
        (["x"], {"start_dim": 1, "end_dim": -1})


def test_transpose_becomes_a_permute_of_the_input_rank():
    x = SimpleNamespace(meta={"val": torch.empty(2, 3, 4)})  # what the mapper reads of an fx node
    assert _convert("aten.transpose.int", {"self": x, "dim0": -1, "dim1": 0}) == ([x], {"perm": [2, 1, 0]})


def test_one_key_head_beside_many_query_heads_is_grouped_query_attention():
    """torch broadcasts k and v's one head over q's heads (Falcon's multi-query attention): recorded as grouped-query
    attention, which every kernel reads one kv head for all query heads from; equal heads stay as they are."""
    def args(q_heads, kv_heads):
        node = lambda heads: SimpleNamespace(meta={"val": torch.empty(1, heads, 5, 8)})  # noqa: E731
        return {"query": node(q_heads), "key": node(kv_heads), "value": node(kv_heads)}
    assert _convert("aten.scaled_dot_product_attention.default", args(4, 1))[1]["enable_gqa"] is True
    assert _convert("aten.scaled_dot_product_attention.default", args(4, 4))[1]["enable_gqa"] is False
    assert _convert("aten.scaled_dot_product_attention.default", args(1, 1))[1]["enable_gqa"] is False


def test_multi_query_attention_model_converts_and_matches_eager(tmp_path):
    class MultiQuery(torch.nn.Module):
        def forward(self, q, kv):
            return F.scaled_dot_product_attention(q, kv, kv * 2, is_causal=True)

    q, kv = torch.randn(2, 4, 6, 8), torch.randn(2, 1, 6, 8)
    ipexconvert.optimize(MultiQuery().eval(), {"q": q, "kv": kv}, output=tmp_path / "m.ipxc")
    torch.testing.assert_close(ipexconvert.load_artifact(tmp_path / "m.ipxc")(q=q, kv=kv), MultiQuery()(q, kv))


def test_a_graph_the_loader_would_refuse_is_a_conversion_bug_and_nothing_is_written(tmp_path, monkeypatch):
    """Were the mapper to record one k/v head beside four query heads as plain sdpa, the conversion says it made
    a graph its loader refuses (exit 3: ours to fix, not a file to re-create) before writing anything."""
    from ipexconvert.errors import ConversionBugError
    from ipexconvert.frontend.torch.aten_map import sdpa

    class MultiQuery(torch.nn.Module):
        def forward(self, q, kv):
            return F.scaled_dot_product_attention(q, kv, kv)

    monkeypatch.setattr(sdpa, "_one_shared_kv_head", lambda args: False)
    with pytest.raises(ConversionBugError, match=r"made a graph that its loader refuses: node \S+ \(sdpa\)") as caught:
        ipexconvert.optimize(MultiQuery().eval(), {"q": torch.randn(1, 4, 3, 8), "kv": torch.randn(1, 1, 3, 8)},
                             output=tmp_path / "m.ipxc")
    assert caught.value.exit_code == 3 and "report it" in caught.value.fix
    assert list(tmp_path.iterdir()) == []


def test_only_2d_convolutions_become_conv2d():
    """conv1d's one-element stride list would look 2-D after pairing; the weight's rank decides."""
    def args(weight_shape):
        w = SimpleNamespace(meta={"val": torch.empty(weight_shape)})
        return {"input": "x", "weight": w, "bias": None, "stride": [1] * (len(weight_shape) - 2),
                "padding": [0] * (len(weight_shape) - 2), "dilation": [1] * (len(weight_shape) - 2),
                "transposed": False, "output_padding": [0] * (len(weight_shape) - 2), "groups": 1}
    assert _convert("aten.convolution.default", args((4, 3, 3, 3)))[1]["stride"] == [1, 1]
    for shape in [(4, 3, 3), (4, 3, 3, 3, 3)]:
        with pytest.raises(Unconvertible):
            _convert("aten.convolution.default", args(shape))


def test_conv1d_model_converts_and_matches_eager(tmp_path):
    model = torch.nn.Sequential(torch.nn.Conv1d(3, 4, 3), torch.nn.ReLU()).eval()
    x = torch.randn(2, 3, 10)
    ipexconvert.optimize(model, {"input": x}, output=tmp_path / "c.ipxc")
    torch.testing.assert_close(ipexconvert.load_artifact(tmp_path / "c.ipxc")(input=x), model(x))


def test_a_number_operand_becomes_an_attr_or_is_refused():
    assert _convert("aten.mul.Tensor", {"self": "x", "other": 0.5}) == (["x"], {"rhs_scalar": 0.5})
    with pytest.raises(Unconvertible):
        _convert("aten.sub.Tensor", {"self": 1.0, "other": "x", "alpha": 1})
    with pytest.raises(Unconvertible):
        _convert("aten.add.Tensor", {"self": "x", "other": "y", "alpha": 2})


# ---- through the frontend ---------------------------------------------------------------------------------------------
# Two small models that between them call every ATen target family the table maps. Each is
# exported once; the IR is built both from the core-ATen program (what optimize() converts) and
# from the un-decomposed export (program_from_exported also accepts that), where composite ops
# such as flatten, dropout and to(dtype) still appear.


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_GEN)


def randint(high: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=_GEN)


def _as_list(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


class _ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4, 5)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1, generator=_GEN)
            self.bn.running_var.uniform_(0.5, 2, generator=_GEN)

    def forward(self, x):
        y = F.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        y = F.adaptive_avg_pool2d(y, 1).flatten(1)
        y = custom_ops.fake_quantize(y, 0.05, 10, 0, 255)  # what a QDQ ONNX model's Q -> DQ pair traces to
        return torch.sigmoid(self.fc(y)), torch.tanh(y).to(torch.float64)


class _Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.ln = torch.nn.LayerNorm(16)
        self.rms = torch.nn.RMSNorm(16, eps=1e-6)
        self.qkv = torch.nn.Linear(16, 48)
        self.drop = torch.nn.Dropout(0.1)
        self.w = torch.nn.Parameter(torch.randn(16, 16, generator=_GEN) / 4)

    def forward(self, input_ids, attention_mask):
        h = self.ln(self.emb(input_ids))
        b, n, _ = h.shape
        qkv = self.qkv(h).view(b, n, 3, 2, 8).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        mask = attention_mask[:, None, None, :].bool()
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(b, n, 16)
        scores = torch.softmax(q @ k.transpose(-1, -2), -1)
        z = F.gelu(self.rms(a)) * 2 - 1
        z = torch.mm(self.drop(z).reshape(b * n, 16).contiguous(), self.w.t()).reshape(b, n, 16)
        return F.silu(z) / 3 + torch.bmm(z, z.transpose(1, 2)).sum(-1, keepdim=True), scores, z.clone()


def _token_dims():
    batch, seq = DynamicDim(name="batch", min=1, max=8), DynamicDim(name="seq", min=2, max=32)
    return {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}


def _conv_inputs(batch: int, size: int = 16) -> dict[str, torch.Tensor]:
    return {"x": randn(batch, 3, size, size)}


def _token_inputs(batch: int, seq: int) -> dict[str, torch.Tensor]:
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[0, -2:] = 0
    return {"input_ids": randint(50, batch, seq), "attention_mask": mask}


def _batch_dim():
    return {"x": {0: DynamicDim(name="batch", min=1, max=8)}}


FRONTEND_MODELS = {
    "convnet": (_ConvNet, lambda: _conv_inputs(2), _batch_dim, [_conv_inputs(1), _conv_inputs(5)]),
    "encoder": (_Encoder, lambda: _token_inputs(2, 6), _token_dims, [_token_inputs(1, 3), _token_inputs(3, 11)]),
}


@pytest.fixture(scope="module")
def frontend_programs():
    """name -> (eager module, {"core": program from core ATen, "raw": program from the plain export})."""
    from ipexconvert.frontend.torch.export import decompose, export_module, program_from_exported

    out = {}
    for name, (factory, example, dynamic, _) in FRONTEND_MODELS.items():
        module = factory().eval()
        ep = export_module(module, example(), dynamic())
        out[name] = (module, {"raw": program_from_exported(ep, dynamic()),
                              "core": program_from_exported(decompose(ep), dynamic())})
    return out


@pytest.mark.parametrize("op_name", MAPPED_OPS)
def test_every_mapped_op_comes_out_of_a_test_model(frontend_programs, op_name: str):
    found = {(name, kind) for name, (_, programs) in frontend_programs.items() for kind, program in programs.items()
             if any(node.op == op_name for node in program.graph.nodes)}
    assert found, f"no test model converts into a {op_name} node; extend FRONTEND_MODELS"


@pytest.mark.parametrize("kind", ["core", "raw"])
def test_no_mapped_target_falls_back_to_aten(frontend_programs, kind: str):
    """Every call to a target in ATEN_MAP became its IR op, not a generic aten node."""
    for name, (_, programs) in frontend_programs.items():
        fallbacks = {n.attrs["target"] for n in programs[kind].graph.nodes if n.op == "aten"}
        assert not fallbacks & set(ATEN_MAP), (name, fallbacks)


def _bind_dims(program, inputs: dict[str, torch.Tensor]) -> dict[str, int]:
    bound = {}
    for name in program.graph.inputs:
        for size, dim in zip(inputs[name].shape, program.graph.values[name].shape):
            if isinstance(dim, str):
                bound[dim] = size
    return bound


@pytest.mark.parametrize("kind", ["core", "raw"])
@pytest.mark.parametrize("model", sorted(FRONTEND_MODELS))
def test_frontend_program_matches_eager_at_other_sizes(frontend_programs, model: str, kind: str):
    from ipexconvert.runtime.executor import Executor

    module, programs = frontend_programs[model]
    program = programs[kind]
    executor = Executor(program)
    for inputs in FRONTEND_MODELS[model][3]:
        got = executor.run([inputs[n] for n in program.graph.inputs], _bind_dims(program, inputs))
        with torch.no_grad():
            want = _as_list(module(**inputs))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)
