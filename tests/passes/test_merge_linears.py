"""merge_linears: linears/qlinears reading one input become one GEMM plus last-dim slices; outputs unchanged."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ipexconvert
from ipexconvert.accuracy import flatten_outputs
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir import Program
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.ir.ops.aten import refusal_reason
from ipexconvert.passes.base import PASSES, PassOptions
from ipexconvert.quant.options import QuantOptions
from int8_pass_helpers import assert_close, planned, quantized
from pass_helpers import assert_same_outputs, copy_program

D, HEADS = 32, 4
SLICE = "aten:aten.slice.Tensor"


def _merge(program: Program) -> dict[str, int]:
    return PASSES["merge_linears"].run(program, PassOptions())


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return F.cosine_similarity(a.float().flatten(), b.float().flatten(), dim=0).item()


class Attention(nn.Module):
    """LayerNorm -> Q, K, V -> heads -> SDPA -> O: the BERT block the pass is for (K has no bias)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.ln = nn.LayerNorm(D)
        self.q, self.k, self.v, self.o = nn.Linear(D, D), nn.Linear(D, D, bias=False), nn.Linear(D, D), nn.Linear(D, D)

    def forward(self, x):
        h = self.ln(x)
        b, s, _ = h.shape
        q, k, v = (t(h).reshape(b, s, HEADS, D // HEADS).permute(0, 2, 1, 3) for t in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v).permute(0, 2, 1, 3).reshape(b, s, D)
        return self.o(a) + x


class Readers(nn.Module):
    """Slices feeding kernels that want dense memory (native softmax/layer_norm, quantize) or take
    strided input (a oneDNN linear, and its residual-add operand)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.a, self.b, self.c, self.d = nn.Linear(D, D), nn.Linear(D, 16), nn.Linear(D, D), nn.Linear(D, D)
        self.ln = nn.LayerNorm(16)

    def forward(self, x):
        a, b, c = self.a(x), self.b(x), self.c(x)
        return torch.softmax(a, -1) * 2.0, self.ln(b), self.d(c) + c


def _batches(n: int, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [{"x": torch.randn(2, 8, D, generator=g)} for _ in range(n)]


def _convert(module: nn.Module, dtype: str, tmp_path, skip=()):
    kwargs = {}
    if dtype == "int8":  # no guard: it could move one of Q/K/V to float and split the group
        kwargs = dict(calibration=_batches(6, seed=1), quant=QuantOptions(guard=False))
    name = f"{type(module).__name__}.{dtype}{'.skip' if skip else ''}.ipxc"
    result = ipexconvert.optimize(module, _batches(1)[0], dtype=dtype, output=tmp_path / name,
                                  skip_passes=list(skip), **kwargs)
    changes = {r.name: r.changes for r in result.manifest.passes}.get("merge_linears")
    return result, ipexconvert.load_artifact(result.path), changes


def _eager(module: nn.Module, batch: dict) -> list[torch.Tensor]:
    with torch.no_grad():
        return flatten_outputs(module(**batch))


@pytest.mark.parametrize("dtype,op,min_cosine", [("bf16", "linear", 0.999), ("int8", "qlinear", 0.99)])
def test_qkv_become_one_gemm_and_three_slices(dtype, op, min_cosine, tmp_path):
    module = Attention().eval()
    merged, model, changes = _convert(module, dtype, tmp_path)
    separate, reference, skipped = _convert(module, dtype, tmp_path, skip=["merge_linears"])

    assert changes == {"groups_merged": 1, "linears_merged": 3} and skipped is None
    hist, hist_before = merged.manifest.op_histogram, separate.manifest.op_histogram
    assert hist_before[op] == 4 and SLICE not in hist_before
    assert hist[op] == 2 and hist[SLICE] == 3  # QKV + O
    for batch in _batches(3, seed=5):
        got, want, apart = model.run_list([batch["x"]]), _eager(module, batch), reference.run_list([batch["x"]])
        assert _cosine(got[0], want[0]) > min_cosine
        assert _cosine(got[0], apart[0]) > 0.9999  # same math, one GEMM instead of three


@pytest.mark.parametrize("dtype,min_cosine", [("bf16", 0.999), ("int8", 0.99)])
def test_slices_feed_dense_and_strided_readers(dtype, min_cosine, tmp_path):
    module = Readers().eval()
    _, model, changes = _convert(module, dtype, tmp_path)
    _, reference, _ = _convert(module, dtype, tmp_path, skip=["merge_linears"])

    assert changes["groups_merged"] == 1 and changes["linears_merged"] == 3
    batch = _batches(1, seed=9)[0]
    for got, want, apart in zip(model.run_list([batch["x"]]), _eager(module, batch), reference.run_list([batch["x"]]),
                                strict=True):
        assert got.is_contiguous() and _cosine(got, want) > min_cosine and _cosine(got, apart) > 0.9999


# ---- the pass on its own: float32 programs through the reference, exact up to rounding ----------


def _program(module: nn.Module, inputs: dict[str, torch.Tensor]) -> Program:
    dims = {next(iter(inputs)): {0: DynamicDim(name="batch", max=8)}}  # the first input's batch
    program = program_from_module(module.eval(), inputs, dims)
    PASSES["fuse_post_ops"].run(program, PassOptions())
    return program


class Branches(nn.Module):
    """gelu(l1), gelu(l2) and a bias-less l3 share x: l1 and l2 merge; relu(l4) and l5 do not match them."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.l1, self.l2 = nn.Linear(D, 8), nn.Linear(D, 24, bias=False)
        self.l3 = nn.Linear(D, 16)
        self.l4, self.l5 = nn.Linear(16, 16), nn.Linear(16, 8)

    def forward(self, x):
        h = self.l3(x)
        y = torch.cat([F.gelu(self.l1(x)), F.gelu(self.l2(x))], -1)
        return y.sum(-1, keepdim=True) * h, torch.relu(self.l4(h)), self.l5(h).mean(-1)


def test_same_post_ops_merge_and_different_ones_do_not():
    before = _program(Branches(), {"x": torch.randn(2, 5, D)})
    after = copy_program(before)

    assert _merge(after) == {"groups_merged": 1, "linears_merged": 2}

    hist = after.graph.op_histogram()
    assert hist["linear"] == 4 and hist[SLICE] == 2  # l1+l2, l3, l4, l5
    merged = next(n for n in after.graph.nodes if n.op == "linear" and after.graph.values[n.outputs[0]].shape[-1] == 32)
    assert merged.attrs["post_ops"] == [{"kind": "gelu", "operand": None}]
    bias = after.weights[merged.inputs[2]]
    assert bias.shape == (32,) and torch.equal(bias[8:], torch.zeros(24))  # l2 had none
    slices = [n for n in after.graph.nodes if n.attrs.get("target") == "aten.slice.Tensor"]
    assert [n.attrs["args"][1:] for n in slices] == [[-1, 0, 8], [-1, 8, 32]]
    assert refusal_reason("aten.slice.Tensor") is None
    assert after.graph.outputs == before.graph.outputs
    for batch in (2, 3):
        assert_same_outputs(before, after, {"x": torch.randn(batch, 5, D)}, {"batch": batch})


class NotMergeable(nn.Module):
    """Five linears on x, each with a reason to stay alone; without that reason `plain` would merge with it."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.plain, self.out, self.r, self.g = (nn.Linear(D, D) for _ in range(4))

    def forward(self, x, w):
        runtime = F.linear(x, w)          # a weight that is an input, not a constant
        out = self.out(x)                 # a graph output
        r = torch.relu(self.r(x))         # post-op relu
        g = F.gelu(self.g(x))             # post-op gelu
        return runtime * 2.0, out, r * 3.0, g * 3.0, self.plain(x) * 3.0


def test_non_constant_weight_graph_output_and_different_post_ops_stay_alone():
    before = _program(NotMergeable(), {"x": torch.randn(2, D), "w": torch.randn(D, D)})
    kinds = sorted(str([p["kind"] for p in n.attrs["post_ops"]]) for n in before.graph.nodes if n.op == "linear")
    assert kinds == ["['gelu']", "['relu']", "[]", "[]", "[]"]  # the scalar muls stay separate nodes
    after = copy_program(before)

    assert _merge(after) == {"groups_merged": 0, "linears_merged": 0}
    assert after.graph == before.graph


def test_a_single_linear_is_left_alone():
    before = _program(nn.Sequential(nn.Linear(D, D), nn.ReLU(), nn.Linear(D, 4)), {"input": torch.randn(2, D)})
    after = copy_program(before)
    assert _merge(after) == {"groups_merged": 0, "linears_merged": 0}
    assert after.graph == before.graph


# ---- int8: qlinears with a float output merge, requantized (uint8) ones do not -------------------


def test_qlinear_qkv_merge_with_concatenated_scales():
    before, quantization, data = planned(Attention(), (2, 8, D))
    program, _ = quantized(before, quantization)
    PASSES["fold_requantize"].run(program, PassOptions(dtype="int8"))
    scales = [program.weights[n.inputs[2]] for n in program.graph.nodes if n.op == "qlinear"][:3]
    after = copy.deepcopy(program)

    assert _merge(after) == {"groups_merged": 1, "linears_merged": 3}

    merged = next(n for n in after.graph.nodes if n.op == "qlinear")
    assert after.graph.values[merged.outputs[0]].shape[-1] == 3 * D
    assert torch.equal(after.weights[merged.inputs[2]], torch.cat(scales))
    assert_close(after, program, data, tol=1e-5)  # same int8 math, one GEMM
    assert_close(after, before, data)


class Chained(nn.Module):
    """l1 and l2 share x and each feeds only another linear: fold_requantize makes them output uint8.
    l2 is a copy of l1, so both requantize with the same output scale and only the uint8 output keeps them apart."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.l1, self.l2, self.l3, self.l4 = (nn.Linear(D, D) for _ in range(4))
        self.l2.load_state_dict(self.l1.state_dict())

    def forward(self, x):
        return self.l3(self.l1(x)), self.l4(self.l2(x))


def test_requantized_qlinears_do_not_merge():
    before, quantization, data = planned(Chained(), (2, 8, D))
    program, _ = quantized(before, quantization)
    float_outputs = copy.deepcopy(program)
    assert PASSES["fold_requantize"].run(program, PassOptions(dtype="int8"))["requantize_folded"] == 2

    assert _merge(program) == {"groups_merged": 0, "linears_merged": 0}
    # Without the folding the same two layers output float and do merge.
    assert _merge(float_outputs) == {"groups_merged": 1, "linears_merged": 2}
    assert_close(float_outputs, before, data)
