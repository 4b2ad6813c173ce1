"""fuse_attention: explicit matmul/softmax/matmul attention becomes one sdpa node, outputs unchanged."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir import Program
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.passes.base import PASSES, PassOptions
from pass_helpers import copy_program as _copy, run_program as _run, rel_err as _rel_err, assert_same_outputs as _assert_same_outputs, TOL


def _fuse(program: Program) -> dict[str, int]:
    return PASSES["fuse_attention"].run(program, PassOptions())


# ---- tiny-bert-eager ------------------------------------------------------------------


def _bert_inputs(batch: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 1000, (batch, seq), generator=gen)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[0, seq // 2:] = 0  # padding, so the additive mask really masks something
    return {"input_ids": ids, "attention_mask": mask}


@pytest.fixture(scope="module")
def bert_eager():
    pytest.importorskip("transformers")
    from ipexconvert.examples import get_example

    example = get_example("tiny-bert-eager")
    model = example.build()
    program = program_from_module(model, example.example_inputs(2), example.dynamic_dims, list(example.output_names))
    return model, program


@pytest.mark.parametrize("identities_removed", [False, True], ids=["with-dropout-identity", "after-remove-identity"])
def test_tiny_bert_eager_attention_becomes_sdpa(bert_eager, identities_removed):
    model, original = bert_eager
    before = _copy(original)
    if identities_removed:
        PASSES["remove_identity"].run(before, PassOptions())
    after = _copy(before)
    hist_before = before.graph.op_histogram()

    changes = _fuse(after)

    hist_after = after.graph.op_histogram()
    assert changes == {"attention_fused": 2}
    assert hist_before["softmax"] == 2 and hist_before["matmul"] == 4 and "sdpa" not in hist_before
    assert hist_after.get("sdpa") == 2
    assert "softmax" not in hist_after and "matmul" not in hist_after
    assert "mul" not in hist_after  # the two `scores * 0.25` became sdpa's scale
    assert hist_after["permute"] == hist_before["permute"] - 2  # the k^T transposes are gone
    assert hist_after["add"] == hist_before["add"] - 2  # the mask adds

    graph = after.graph
    for node in graph.nodes:
        if node.op == "sdpa":
            assert node.attrs["scale"] == pytest.approx(0.25)
            assert node.attrs["is_causal"] is False
            q, k, v, mask = (graph.values[i] for i in node.inputs)
            assert k.shape == q.shape == v.shape == ["batch", 4, "seq", 16]  # k in [.., S, E] layout
            assert mask.dtype == "float32" and mask.shape == ["batch", 1, "seq", "seq"]

    # Same outputs at the export size and at another batch and sequence length.
    for batch, seq in [(2, 16), (3, 11)]:
        inputs = _bert_inputs(batch, seq, seed=batch)
        dims = {"batch": batch, "seq": seq}
        _assert_same_outputs(before, after, inputs, dims)
        with torch.no_grad():
            reference = model(**inputs)
        got = _run(after, inputs, dims)
        assert _rel_err(got[0], reference[0]) < TOL


# ---- small attention modules ------------------------------------------------------------

HEADS, HEAD_DIM, SEQ = 2, 8, 7


def _qkv_dims(with_mask: bool) -> dict:
    batch, seq = DynamicDim(name="batch", max=8), DynamicDim(name="seq", min=2, max=64)
    dims = {n: {0: batch, 2: seq} for n in "qkv"}
    if with_mask:
        dims["mask"] = {0: batch, 3: seq}
    return dims


def _qkv_inputs(batch: int, seq: int, seed: int, with_mask: bool) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    inputs = {n: torch.randn(batch, HEADS, seq, HEAD_DIM, generator=gen) for n in "qkv"}
    if with_mask:
        mask = torch.zeros(batch, 1, 1, seq)
        mask[:, :, :, seq - 2:] = torch.finfo(torch.float32).min  # mask out the last two keys
        inputs["mask"] = mask
    return inputs


class ScaledQueryMaskedAttention(nn.Module):
    """Scale on q before the matmul, additive mask broadcast over heads and queries."""

    def forward(self, q, k, v, mask):
        q = q / math.sqrt(HEAD_DIM)
        scores = torch.matmul(q, k.transpose(-1, -2)) + mask
        return torch.matmul(torch.softmax(scores, dim=-1), v)


class ScaledScoresAttention(nn.Module):
    """Scale on the scores (div), eval-mode dropout between softmax and the second matmul."""

    def __init__(self):
        super().__init__()
        self.dropout = nn.Dropout(0.1)

    def forward(self, q, k, v):
        scores = torch.matmul(q, k.transpose(2, 3)) / 3.0
        return self.dropout(scores.softmax(dim=-1)) @ v


class ProjectedAttention(nn.Module):
    """Bart-style: `q_proj(x) * scaling` before the head split, so the scale sits behind reshape/permute."""

    def __init__(self, dim: int = HEADS * HEAD_DIM):
        super().__init__()
        torch.manual_seed(0)
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)

    def _heads(self, t):
        return t.view(t.shape[0], t.shape[1], HEADS, HEAD_DIM).transpose(1, 2)

    def forward(self, x):
        q = self._heads(self.q_proj(x) * HEAD_DIM ** -0.5)
        k, v = self._heads(self.k_proj(x)), self._heads(self.v_proj(x))
        out = torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v
        return out.transpose(1, 2).reshape(x.shape[0], x.shape[1], HEADS * HEAD_DIM)


def _check_fused(module: nn.Module, with_mask: bool, expected_scale: float) -> Program:
    dynamic = _qkv_dims(with_mask)
    before = program_from_module(module, _qkv_inputs(2, SEQ, 0, with_mask), dynamic)
    after = _copy(before)
    assert _fuse(after) == {"attention_fused": 1}
    hist = after.graph.op_histogram()
    assert hist.get("sdpa") == 1 and "softmax" not in hist and "matmul" not in hist
    assert "mul" not in hist and "div" not in hist
    (sdpa,) = [n for n in after.graph.nodes if n.op == "sdpa"]
    assert sdpa.attrs["scale"] == pytest.approx(expected_scale, rel=1e-6)
    for batch, seq in [(2, SEQ), (3, 12)]:
        _assert_same_outputs(before, after, _qkv_inputs(batch, seq, batch, with_mask), {"batch": batch, "seq": seq})
    return after


def test_scale_on_q_and_additive_mask():
    after = _check_fused(ScaledQueryMaskedAttention(), with_mask=True, expected_scale=HEAD_DIM ** -0.5)
    (sdpa,) = [n for n in after.graph.nodes if n.op == "sdpa"]
    assert sdpa.inputs == ["q", "k", "v", "mask"]


def test_scale_on_scores_and_dropout_identity():
    after = _check_fused(ScaledScoresAttention(), with_mask=False, expected_scale=1 / 3.0)
    (sdpa,) = [n for n in after.graph.nodes if n.op == "sdpa"]
    assert sdpa.inputs == ["q", "k", "v", None]
    assert "identity" not in after.graph.op_histogram()


def test_scale_behind_head_split():
    dynamic = {"x": {0: DynamicDim(name="batch", max=8), 1: DynamicDim(name="seq", min=2, max=64)}}
    module = ProjectedAttention()
    before = program_from_module(module, {"x": torch.randn(2, SEQ, HEADS * HEAD_DIM)}, dynamic)
    after = _copy(before)
    assert _fuse(after) == {"attention_fused": 1}
    (sdpa,) = [n for n in after.graph.nodes if n.op == "sdpa"]
    assert sdpa.attrs["scale"] == pytest.approx(HEAD_DIM ** -0.5, rel=1e-6)
    assert "mul" not in after.graph.op_histogram()
    for batch, seq in [(2, SEQ), (4, 10)]:
        x = torch.randn(batch, seq, HEADS * HEAD_DIM, generator=torch.Generator().manual_seed(batch))
        _assert_same_outputs(before, after, {"x": x}, {"batch": batch, "seq": seq})


# ---- patterns that must stay as they are -----------------------------------------------


class AlmostAttention(nn.Module):
    """Five near-misses side by side (one export keeps the test fast); none may become sdpa."""

    def forward(self, q, k, v, mask, kt):
        probs = torch.softmax(q @ k.transpose(-1, -2) * 0.5, dim=-1)
        probs_returned = probs @ v                                          # probs are a graph output
        scores = q @ k.transpose(-1, -2)
        scores_twice = torch.softmax(scores, dim=-1) @ v + scores.sum(dim=-1, keepdim=True)  # two readers
        over_queries = torch.softmax(q @ k.transpose(-1, -2), dim=-2) @ v   # softmax not over the keys
        mask_scaled = torch.softmax((q @ k.transpose(-1, -2) + mask) * 0.5, dim=-1) @ v  # scales the mask too
        no_permute = torch.softmax(q @ kt, dim=-1) @ v                      # k arrives as [.., E, S]
        return probs_returned, probs, scores_twice, over_queries, mask_scaled, no_permute


def test_near_misses_are_not_fused():
    dynamic = _qkv_dims(with_mask=True)
    dynamic["kt"] = {0: dynamic["k"][0], 3: dynamic["k"][2]}
    inputs = _qkv_inputs(2, SEQ, 0, with_mask=True)
    inputs["kt"] = inputs["k"].transpose(-1, -2).contiguous()
    program = program_from_module(AlmostAttention(), inputs, dynamic)
    hist = program.graph.op_histogram()
    assert hist["softmax"] == 5
    assert _fuse(program) == {"attention_fused": 0}
    assert program.graph.op_histogram() == hist


class ScalarMaskAttention(nn.Module):
    """scores + a 0-d constant: sdpa takes masks of rank 2 and up, so this stays as written."""

    def forward(self, q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2) + torch.tensor(0.5), dim=-1) @ v


def test_scalar_mask_is_not_fused():
    inputs = {n: torch.randn(1, 2, 3, 4, generator=torch.Generator().manual_seed(i)) for i, n in enumerate("qkv")}
    program = program_from_module(ScalarMaskAttention(), inputs, {})
    before = _copy(program)
    assert _fuse(program) == {"attention_fused": 0}
    _assert_same_outputs(before, program, inputs, {})


# ---- the form ONNX exports write --------------------------------------------------------------


class OnnxStyleAttention(nn.Module):
    """k^T as one permute of [b, s, h, d], sqrt-scales on both q and k, a -inf mask from a bool one,
    and the where(isnan(p), 0, p) guard after the softmax."""

    def forward(self, q_in, k_in, v_in, keep):
        b, s, _ = q_in.shape
        q = q_in.reshape(b, s, HEADS, 16).permute(0, 2, 1, 3)
        kt = k_in.reshape(b, s, HEADS, 16).permute(0, 2, 3, 1)
        v = v_in.reshape(b, s, HEADS, 16).permute(0, 2, 1, 3)
        c = 16 ** -0.25
        mask = torch.where(keep[:, None, None, :], torch.tensor(0.0), torch.tensor(float("-inf")))
        p = torch.softmax((q * c) @ (kt * c) + mask, dim=-1)
        p = torch.where(torch.isnan(p), torch.tensor(0.0), p)
        return p @ v


def test_the_onnx_export_form_becomes_sdpa_with_zeroed_masked_rows():
    g = torch.Generator().manual_seed(3)
    inputs = {n: torch.randn(2, 6, HEADS * 16, generator=g) for n in ("q_in", "k_in", "v_in")}
    keep = torch.ones(2, 6, dtype=torch.bool)
    keep[0, 4:] = False
    keep[1, :] = False  # every key of sample 1 masked: the guard makes its rows 0, not NaN
    inputs["keep"] = keep
    before = program_from_module(OnnxStyleAttention(), inputs, {})
    PASSES["remove_identity"].run(before, PassOptions())  # as in the pipeline: the constants are read directly
    after = _copy(before)
    assert _fuse(after) == {"attention_fused": 1}
    (sdpa,) = [n for n in after.graph.nodes if n.op == "sdpa"]
    assert sdpa.attrs["scale"] == pytest.approx(16 ** -0.5, rel=1e-6)
    hist = after.graph.op_histogram()
    assert "aten:aten.isnan.default" not in hist and "softmax" not in hist and "mul" not in hist
    want, got = _run(before, inputs, {}), _run(after, inputs, {})
    assert torch.equal(got[0][1], torch.zeros_like(got[0][1])) and not got[0].isnan().any()
    _assert_same_outputs(before, after, inputs, {})
    assert want[0].shape == got[0].shape


def test_fully_masked_rows_give_zero_in_every_kernel():
    """sdpa's promise (ir/ops/sdpa.py), on the reference and on the kernel the CPU backend picks (native
    attention where the CPU has it), for float and bool masks."""
    from ipexconvert.ir.opdef import get_op
    from ipexconvert.ir.ops.sdpa import SdpaAttrs
    from ipexconvert.ir import Graph, Node, Program, TensorSpec
    from ipexconvert.runtime.executor import Executor
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, HEADS, 5, 16, generator=g) for _ in range(3))
    mask = torch.zeros(2, 1, 1, 5)
    mask[1] = float("-inf")
    mask[0, ..., 3:] = float("-inf")
    for m in (mask, mask == 0):
        ref = get_op("sdpa").reference([q, k, v, m], SdpaAttrs(), {})
        assert torch.equal(ref[1], torch.zeros_like(ref[1])) and not ref[0].isnan().any()
    specs = {n: TensorSpec.of(t) for n, t in {"q": q, "k": k, "v": v, "mask": mask}.items()}
    specs["y"] = TensorSpec.of(q)
    program = Program(Graph(inputs=["q", "k", "v", "mask"], outputs=["y"], values=specs,
                            nodes=[Node(name="a", op="sdpa", inputs=["q", "k", "v", "mask"], outputs=["y"])]))
    got = Executor(program).run([q, k, v, mask], {})[0]
    torch.testing.assert_close(got, get_op("sdpa").reference([q, k, v, mask], SdpaAttrs(), {}))
