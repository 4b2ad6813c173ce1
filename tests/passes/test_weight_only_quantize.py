"""weight_only_quantize: linears with constant weights become woq_linear (int4 groups, int8 per channel); the LM
head (a graph output, or tied to an embedding), layers the group size does not divide and layers the accuracy guard
names (PassOptions.keep_float) stay float, counted;
post-op operands move with the node; the weight-only pipelines merge Q/K/V-style and gate/up linears first; codes given
in PassOptions.weight_codes (GPTQ / AWQ) are taken as they are, and follow the weights merge_linears concatenates."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ipexconvert.errors import UserInputError
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir import Program
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.passes import PIPELINES, pipeline_for, run_pipeline
from ipexconvert.passes.base import PASSES, PassOptions
from ipexconvert.quant.options import WeightOnlyOptions
from ipexconvert.quant.weight_only import QuantizedWeight, WeightCodes, quantize_weight
from pass_helpers import copy_program, run_program

D, V = 128, 50


class TinyLM(nn.Module):
    """embedding -> fc1 + gelu -> fc2 + residual -> odd (160 inputs: groups of 128 do not divide them) -> head."""

    def __init__(self, tied: bool = False, head_to_output: bool = True):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(V, D)
        self.fc1, self.fc2 = nn.Linear(D, 2 * D), nn.Linear(2 * D, D)
        self.odd = nn.Linear(D + 32, D)
        self.head = nn.Linear(D, V, bias=False)
        if tied:
            self.head.weight = self.embed.weight
        self.head_to_output = head_to_output

    def forward(self, ids):
        x = self.embed(ids)
        h = self.fc2(F.gelu(self.fc1(x))) + x
        h = h + self.odd(torch.cat([h, x[..., :32]], dim=-1))
        logits = self.head(h)
        return logits if self.head_to_output else logits * 2.0  # a mul: the head's output is not the graph's


def _program(module: nn.Module) -> tuple[Program, dict]:
    ids = torch.randint(0, V, (2, 5), generator=torch.Generator().manual_seed(1))
    program = program_from_module(module.eval(), {"ids": ids}, {"ids": {0: DynamicDim(name="batch", max=8)}})
    for name in ("fuse_post_ops", "dead_code"):
        PASSES[name].run(program, PassOptions())
    return program, {"ids": ids}


def _quantize(program: Program, dtype: str = "int4", **settings) -> dict[str, int]:
    options = PassOptions(dtype=dtype, weight_only=WeightOnlyOptions(**settings) if settings else None)
    return PASSES["weight_only_quantize"].run(program, options)


def _nodes(program: Program, op: str):
    return [n for n in program.graph.nodes if n.op == op]


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return F.cosine_similarity(a.double().flatten(), b.double().flatten(), dim=0).item()


def _outputs(program: Program, inputs: dict) -> list[torch.Tensor]:
    return run_program(program, inputs, {"batch": 2})


def test_int4_defaults_keep_the_lm_head_and_undivided_layers_float():
    program, inputs = _program(TinyLM())
    before = copy_program(program)
    counts = _quantize(program)
    assert counts == {"quantized": 2, "from_codes": 0, "float_lm_head": 1, "float_group_size": 1, "float_accuracy_guard": 0, "float_other": 0}
    fc1, fc2 = _nodes(program, "woq_linear")
    assert fc1.attrs == {"bits": 4, "group_size": 128, "post_ops": [{"kind": "gelu", "operand": None}]}
    assert fc2.attrs["group_size"] == 128 and fc2.attrs["post_ops"] == [{"kind": "add", "operand": 5}]
    assert fc2.inputs[5] == before.graph.nodes[[n.name for n in before.graph.nodes].index(fc2.name)].inputs[3]
    codes, scales, zero_points, bias = (program.weights.get(i) if i else None for i in fc2.inputs[1:5])
    assert codes.dtype == torch.uint8 and codes.shape == (D, D) and scales.shape == (D, 2) and zero_points is None
    assert bias.dtype == torch.float32 and bias.shape == (D,)
    assert not any(name.startswith("fc") for name in program.weights)  # the float weights are gone
    for got, want in zip(_outputs(program, inputs), _outputs(before, inputs), strict=True):
        assert got.shape == want.shape and _cosine(got, want) > 0.99


def test_group_size_lm_head_and_asymmetric_settings():
    program, inputs = _program(TinyLM())
    before = copy_program(program)
    counts = _quantize(program, group_size=32, symmetric=False, quantize_lm_head=True)
    assert counts["quantized"] == 4 and counts["float_lm_head"] == counts["float_group_size"] == 0
    for node in _nodes(program, "woq_linear"):
        assert node.attrs["group_size"] == 32 and program.weights[node.inputs[3]].dtype == torch.uint8
    for got, want in zip(_outputs(program, inputs), _outputs(before, inputs), strict=True):
        assert _cosine(got, want) > 0.99


def test_int8_activations_are_marked_on_the_int4_layers():
    program, inputs = _program(TinyLM())
    before = copy_program(program)
    counts = _quantize(program, group_size=32, activations="int8")
    assert counts["quantized"] > 0
    assert all(node.attrs["activations"] == "int8" for node in _nodes(program, "woq_linear"))
    for got, want in zip(_outputs(program, inputs), _outputs(before, inputs), strict=True):
        assert _cosine(got, want) > 0.98


def test_int8_is_per_output_channel_and_close():
    program, inputs = _program(TinyLM())
    before = copy_program(program)
    counts = _quantize(program, "int8")
    assert counts == {"quantized": 3, "from_codes": 0, "float_lm_head": 1, "float_group_size": 0, "float_accuracy_guard": 0, "float_other": 0}
    for node in _nodes(program, "woq_linear"):
        codes, scales = program.weights[node.inputs[1]], program.weights[node.inputs[2]]
        assert node.attrs["bits"] == 8 and node.attrs["group_size"] == codes.shape[1]
        assert codes.dtype == torch.int8 and scales.shape == (codes.shape[0], 1) and node.inputs[3] is None
    for got, want in zip(_outputs(program, inputs), _outputs(before, inputs), strict=True):
        assert _cosine(got, want) > 0.9999


def test_layers_the_guard_keeps_float_stay_linear_and_are_counted():
    program, inputs = _program(TinyLM())
    before = copy_program(program)
    fc1 = next(n.name for n in _nodes(program, "linear") if program.graph.values[n.inputs[1]].shape == [2 * D, D])
    counts = PASSES["weight_only_quantize"].run(program, PassOptions(dtype="int4", keep_float=frozenset({fc1})))
    assert counts == {"quantized": 1, "from_codes": 0, "float_lm_head": 1, "float_group_size": 1, "float_accuracy_guard": 1, "float_other": 0}
    kept = next(n for n in program.graph.nodes if n.name == fc1)
    assert kept.op == "linear" and program.weights[kept.inputs[1]].dtype == torch.float32
    for got, want in zip(_outputs(program, inputs), _outputs(before, inputs), strict=True):
        assert _cosine(got, want) > 0.99


@pytest.mark.parametrize("tied, lm_head_float", [(True, 1), (False, 0)])
def test_a_head_tied_to_the_embedding_stays_float(tied, lm_head_float):
    """The head's output goes through a mul, so only the shared weight marks it."""
    program, _ = _program(TinyLM(tied=tied, head_to_output=False))
    counts = _quantize(program, group_size=32)
    assert counts["float_lm_head"] == lm_head_float and counts["quantized"] == 4 - lm_head_float
    embedding = _nodes(program, "embedding")[0]
    assert program.weights[embedding.inputs[0]].dtype == torch.float32  # the table stays, whatever the head did


class SwiGLUBlock(nn.Module):
    """rms-free Llama MLP plus Q/K/V projections on one input: two merge groups for the weight-only pipeline."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.q, self.k, self.v = nn.Linear(D, D, bias=False), nn.Linear(D, 32, bias=False), nn.Linear(D, 32, bias=False)
        self.gate, self.up, self.down = (nn.Linear(D, 256, bias=False), nn.Linear(D, 256, bias=False),
                                         nn.Linear(256, D, bias=False))
        self.out = nn.Linear(D, D)

    def forward(self, x):
        a = torch.cat([self.q(x), self.k(x) * self.v(x)], dim=-1)[..., :D]
        h = x + self.down(F.silu(self.gate(a)) * self.up(a))
        return self.out(h)


def test_the_weight_only_pipeline_merges_before_quantizing():
    x = torch.randn(2, 3, D)
    program = program_from_module(SwiGLUBlock().eval(), {"x": x}, {"x": {0: DynamicDim(name="batch", max=8)}})
    before = copy_program(program)
    records = {r.name: r.changes for r in run_pipeline(program, pipeline_for("int4"), PassOptions(dtype="int4"))}
    assert records["merge_linears"] == {"groups_merged": 2, "linears_merged": 5}  # q/k/v and gate/up
    assert records["weight_only_quantize"]["quantized"] == 3 and records["weight_only_quantize"]["float_lm_head"] == 1
    assert len(_nodes(program, "woq_linear")) == 3 and len(_nodes(program, "linear")) == 1
    dims = {"batch": 2}
    (got,), (want,) = run_program(program, {"x": x}, dims), run_program(before, {"x": x}, dims)
    assert _cosine(got, want) > 0.99


def test_pipelines_and_their_checks():
    names = PIPELINES["cpu", "int4"]
    assert names.index("merge_linears") < names.index("fuse_post_ops") < names.index("weight_only_quantize")
    assert "calibrate" not in names and names[-1] == "prepack"
    assert pipeline_for("int8", weight_only=True) == names and "calibrate" in pipeline_for("int8")
    with pytest.raises(UserInputError, match="needs the weight_only_quantize pass"):
        pipeline_for("int4", skip=["weight_only_quantize"])
    with pytest.raises(UserInputError, match="only applies to --dtype int4"):
        pipeline_for("fp32", ["weight_only_quantize", "prepack"])
    with pytest.raises(UserInputError, match="does not apply to weight-only int8"):
        pipeline_for("int8", ["calibrate", "weight_only_quantize"], weight_only=True)
    with pytest.raises(UserInputError, match="applies to --dtype int4 and int8, not bf16"):
        pipeline_for("bf16", weight_only=True)


def _odd_codes(weight: torch.Tensor, bits: int, group_size: int, symmetric: bool = True) -> QuantizedWeight:
    """Valid codes unlike round-to-nearest's: RTN's with every scale doubled (what a calibrated algorithm might pick)."""
    q = quantize_weight(weight, bits, group_size, symmetric)
    return QuantizedWeight(q.codes, q.scales * 2, q.zero_points, bits, group_size)


def test_given_codes_are_taken_as_they_are_and_the_rest_rounded_to_nearest():
    program, _ = _program(TinyLM())
    linears = {program.graph.values[n.inputs[1]].shape[0]: n for n in _nodes(program, "linear")}
    fc1 = linears[2 * D]  # fc1 gets codes; fc2 is rounded to nearest
    given = _odd_codes(program.weights[fc1.inputs[1]], 4, 32, symmetric=False)
    options = PassOptions(dtype="int4", weight_only=WeightOnlyOptions(group_size=32, symmetric=False),
                          weight_codes=WeightCodes({fc1.inputs[1]: given}))
    counts = PASSES["weight_only_quantize"].run(program, options)
    assert counts["quantized"] == 3 and counts["from_codes"] == 1
    node = next(n for n in program.graph.nodes if n.name == fc1.name)
    codes, scales, zero_points = (program.weights[i] for i in node.inputs[1:4])
    assert torch.equal(codes, given.codes) and torch.equal(scales, given.scales) and torch.equal(zero_points, given.zero_points)
    other = next(n for n in _nodes(program, "woq_linear") if n.name != fc1.name)
    assert program.weights[other.inputs[2]].max() < given.scales.max()  # rounded to nearest: not the doubled scales


@pytest.mark.parametrize("settings", [{"group_size": 64}, {"group_size": 32, "symmetric": False}])
def test_codes_that_do_not_fit_the_settings_are_refused(settings):
    program, _ = _program(TinyLM())
    fc1 = next(n for n in _nodes(program, "linear") if program.graph.values[n.inputs[1]].shape == [2 * D, D])
    options = PassOptions(dtype="int4", weight_only=WeightOnlyOptions(**settings),
                          weight_codes=WeightCodes({fc1.inputs[1]: _odd_codes(program.weights[fc1.inputs[1]], 4, 32)}))
    with pytest.raises(ValueError, match="do not fit"):
        PASSES["weight_only_quantize"].run(program, options)


def test_merged_linears_take_their_members_codes_stacked():
    x = torch.randn(2, 3, D)
    program = program_from_module(SwiGLUBlock().eval(), {"x": x}, {"x": {0: DynamicDim(name="batch", max=8)}})
    weights = {n.inputs[1]: program.weights[n.inputs[1]] for n in _nodes(program, "linear")}
    given = {name: _odd_codes(w, 4, 32) for name, w in weights.items() if w.shape[1] == D and w.shape[0] != D}
    assert len(given) == 4  # k, v, gate, up (q, [D, D], has none: it merges alone with no partner of its kind)
    codes = WeightCodes(given)
    options = PassOptions(dtype="int4", weight_only=WeightOnlyOptions(group_size=32), weight_codes=codes)
    records = {r.name: r.changes for r in run_pipeline(program, pipeline_for("int4"), options)}
    assert records["merge_linears"] == {"groups_merged": 2, "linears_merged": 4}  # k/v and gate/up; q kept apart
    assert records["weight_only_quantize"]["from_codes"] == 2 and records["weight_only_quantize"]["quantized"] == 4
    by_rows: dict[int, list[QuantizedWeight]] = {}
    for name, q in given.items():  # graph order, the order merge_linears stacks them in
        by_rows.setdefault(weights[name].shape[0], []).append(q)
    merged = {sum(q.codes.shape[0] for q in qs): qs for qs in by_rows.values()}  # k/v: 64 rows, gate/up: 512
    stacked = [n for n in _nodes(program, "woq_linear") if program.weights[n.inputs[2]].shape[0] in merged]
    assert len(stacked) == 2
    for node in stacked:
        parts = merged[program.weights[node.inputs[2]].shape[0]]
        assert torch.equal(program.weights[node.inputs[1]], torch.cat([q.codes for q in parts]))
        assert torch.equal(program.weights[node.inputs[2]], torch.cat([q.scales for q in parts]))
