"""to_bf16: bf16 compute inside, float32 at the edges, and specs that state what really runs."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from ipexconvert.examples import get_example
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir import Program
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.passes.base import PASSES, PassOptions
from pass_helpers import copy_program as _copy, run_traced as _run_traced, TOL

REL_TOL, MIN_COSINE = 3e-2, 0.999  # bf16 against the fp32 eager model
BATCH = {0: DynamicDim(name="batch", max=16)}


def _assert_close_to_eager(got: torch.Tensor, expected: torch.Tensor) -> None:
    assert got.dtype == torch.float32 and got.shape == expected.shape
    rel = ((got - expected).abs().max() / expected.abs().max()).item()
    cosine = nn.functional.cosine_similarity(got.flatten().double(), expected.flatten().double(), dim=0).item()
    assert rel < REL_TOL and cosine > MIN_COSINE, (rel, cosine)


def _assert_specs_match_runtime(program: Program, seen: dict[str, torch.Tensor]) -> None:
    for name, tensor in seen.items():
        assert program.graph.values[name].dtype == str(tensor.dtype).removeprefix("torch."), name


def _to_bf16(program: Program) -> dict[str, int]:
    return PASSES["to_bf16"].run(program, PassOptions(dtype="bf16"))


def _eager(module: nn.Module, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        out = module(**inputs)
    return out if isinstance(out, tuple) else (out,)


def _check_runs(program: Program, module: nn.Module, inputs: dict, dims: dict) -> dict[str, torch.Tensor]:
    outputs, seen = _run_traced(program, inputs, dims)
    for got, expected in zip(outputs, _eager(module, inputs), strict=True):
        _assert_close_to_eager(got, expected)
    _assert_specs_match_runtime(program, seen)
    return seen


def _example(name: str, passes: list[str]):
    example = get_example(name)
    module = example.build()
    program = program_from_module(module, example.example_inputs(2), example.dynamic_dims,
                                  list(example.output_names))
    for p in passes:
        PASSES[p].run(program, PassOptions())
    return example, module, program


@pytest.fixture(scope="module")
def tiny_cnn():
    return _example("tiny-cnn", ["fold_batchnorm", "channels_last"])


def test_tiny_cnn_bf16(tiny_cnn):
    example, module, program = tiny_cnn
    program = _copy(program)
    conv_weights = {n.inputs[1] for n in program.graph.nodes if n.op == "conv2d"}
    changes = _to_bf16(program)
    graph = program.graph
    # 17 conv weights + 17 folded biases + fc weight and bias; one cast in, one cast out.
    assert changes == {"weights_to_bf16": 36, "casts_inserted": 2}
    assert graph.op_histogram()["to_dtype"] == 2
    for name in conv_weights:
        assert program.weights[name].dtype == torch.bfloat16
        assert graph.values[name].memory_format == "channels_last"  # the layout mark survives
    assert graph.values["pixel_values"].dtype == "float32" and graph.values["logits"].dtype == "float32"
    for batch in (3, 5):
        seen = _check_runs(program, module, example.example_inputs(batch), {"batch": batch})
        convs = [n.outputs[0] for n in graph.nodes if n.op == "conv2d"]
        assert all(seen[v].dtype == torch.bfloat16 for v in convs)


def test_tiny_bert_bf16():
    example, module, program = _example("tiny-bert", ["remove_identity", "constant_fold"])
    int_constants = {c: program.weights[c].dtype for c in program.graph.constants
                     if not program.weights[c].is_floating_point()}
    assert int_constants  # position ids, token types, the folded bool scalar
    changes = _to_bf16(program)
    graph = program.graph
    again = _copy(program)
    assert _to_bf16(again) == {"weights_to_bf16": 0, "casts_inserted": 0}  # a second run is a no-op
    assert again.graph.model_dump() == graph.model_dump()
    assert changes["weights_to_bf16"] > 20
    assert changes["casts_inserted"] == 2  # int inputs need no entry cast; two outputs cast back
    for name, dtype in int_constants.items():
        assert program.weights[name].dtype == dtype
    for node in graph.nodes:
        if node.op == "layer_norm":  # norm parameters stay float32; the reference upcasts
            assert all(program.weights[v].dtype == torch.float32 for v in node.inputs[1:])
        if node.op in ("linear", "embedding"):
            assert program.weights[node.inputs[1 if node.op == "linear" else 0]].dtype == torch.bfloat16
    for batch, seq in ((3, 16), (5, 11)):
        tokens = example.example_inputs(batch)
        inputs = {k: v[:, :seq] for k, v in tokens.items()}
        seen = _check_runs(program, module, inputs, {"batch": batch, "seq": seq})
        hidden = [n.outputs[0] for n in graph.nodes if n.op in ("linear", "sdpa", "layer_norm", "gelu")]
        assert hidden and all(seen[v].dtype == torch.bfloat16 for v in hidden)


class Rotary(nn.Module):
    """Position angles from an int arange, a float mask from int ids, and float32 dtype arguments."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = nn.Linear(32, 32)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 32, 2).float() / 32)))

    def forward(self, x, keep):
        positions = torch.arange(x.shape[1]).float()                  # int -> float32: stays float32
        angles = positions[:, None] * self.inv_freq[None, :]
        emb = torch.cat([angles, angles], dim=-1)
        h = self.proj(x) * emb.cos() + self.proj(x).flip(-1) * emb.sin()
        penalty = (1.0 - keep.to(torch.float32))[:, :, None] * -2.0   # a float mask from int ids
        total = h.sum(dim=-1, keepdim=True, dtype=torch.float32)      # float32 dtype on a bf16 tensor
        return h + penalty + total * 0.01


def test_position_math_stays_float32_and_casts_meet_activations():
    seq = 600  # beyond 256, bf16 cannot tell neighbouring positions apart
    x = torch.randn(2, 8, 32)
    keep = torch.ones(2, 8, dtype=torch.int64)
    dims = {"x": {0: BATCH[0], 1: DynamicDim(name="seq", max=1024)},
            "keep": {0: BATCH[0], 1: DynamicDim(name="seq", max=1024)}}
    module = Rotary().eval()
    program = program_from_module(module, {"x": x, "keep": keep}, dims)
    changes = _to_bf16(program)
    graph = program.graph
    producers = graph.producers()
    cos = next(n for n in graph.nodes if n.attrs.get("target") == "aten.cos.default")
    assert graph.values[cos.outputs[0]].dtype == "float32"
    assert program.weights["inv_freq"].dtype == torch.float32
    assert program.weights["proj.weight"].dtype == torch.bfloat16
    # The sum's float32 dtype argument reads bf16 activations, so it became bf16.
    sum_node = next(n for n in graph.nodes if n.attrs.get("target", "").startswith("aten.sum"))
    assert graph.values[sum_node.outputs[0]].dtype == "bfloat16"
    assert "float32" not in str(sum_node.attrs)
    # x in, output out, and one cast each where cos, sin and the mask meet bf16 activations.
    assert changes["casts_inserted"] == 5
    casts = [n for n in graph.nodes if n.op == "to_dtype" and n.attrs["dtype"] == "bfloat16"]
    assert {producers[c.inputs[0]].op for c in casts if c.inputs[0] != "x"} <= {"aten", "mul", "add", "sub"}

    x = torch.randn(3, seq, 32)
    keep = (torch.rand(3, seq) > 0.2).long()
    _check_runs(program, module, {"x": x, "keep": keep}, {"batch": 3, "seq": seq})


def test_leaves_integer_graphs_and_second_run_alone(tiny_cnn):
    class Counter(nn.Module):
        def forward(self, ids):
            return (ids * 3 + 1).cumsum(-1)

    ids = torch.arange(8).reshape(2, 4)
    program = program_from_module(Counter(), {"ids": ids}, {"ids": BATCH})
    before = program.graph.model_dump()
    assert _to_bf16(program) == {"weights_to_bf16": 0, "casts_inserted": 0}
    assert program.graph.model_dump() == before

    cnn = _copy(tiny_cnn[2])
    _to_bf16(cnn)
    snapshot = cnn.graph.model_dump()
    assert _to_bf16(cnn) == {"weights_to_bf16": 0, "casts_inserted": 0}
    assert cnn.graph.model_dump() == snapshot
