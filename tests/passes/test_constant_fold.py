"""constant_fold: constant-only nodes are evaluated at conversion time; dynamic ones stay."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from ipexconvert.examples import get_example
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir import DimRange, Graph, Node, Program, TensorSpec
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.passes.base import PASSES, PassOptions
from pass_helpers import copy_program as _copy, run_program as _run, rel_err as _rel_err, assert_same_outputs as _assert_same

BATCH = {0: DynamicDim(name="batch", max=16)}


def _fold(program: Program) -> dict[str, int]:
    return PASSES["constant_fold"].run(program, PassOptions())


def _assert_constants_consistent(program: Program) -> None:
    """Every constant has a tensor whose dtype/shape its spec states."""
    graph = program.graph
    assert set(graph.constants) == set(program.weights)
    for name in graph.constants:
        spec, tensor = graph.values[name], program.weights[name]
        assert spec.dtype == TensorSpec.of(tensor).dtype and spec.shape == list(tensor.shape), name
        assert tensor.is_contiguous(), name  # safetensors stores dense tensors


class Folding(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.w = nn.Parameter(torch.randn(8, 8))
        self.register_buffer("log_scale", torch.randn(8) * 0.1)
        self.register_buffer("row", torch.randn(1, 1024))

    def forward(self, x):
        w = self.w.t() * 2.0 + 1.0                       # permute, mul, add of a constant: folded
        scale = torch.exp(self.log_scale)                # aten fallback on a constant: folded
        offset = torch.arange(8, dtype=torch.float32)    # no inputs, static args: folded
        rows = torch.arange(x.shape[0]).unsqueeze(1)     # arange up to a dynamic dim: must stay
        y = (x @ w) * scale + offset + rows
        big = self.row.expand(512, 1024) * x.mean()      # 2 MiB expand of a 4 KiB constant: must stay
        return y, big


@pytest.fixture(scope="module")
def folding_program() -> Program:
    x = torch.randn(4, 8)
    return program_from_module(Folding(), {"x": x}, {"x": BATCH})


def test_folds_constant_subgraphs_and_keeps_numerics(folding_program):
    before = folding_program
    after = _copy(before)
    hist_before = before.graph.op_histogram()
    changes = _fold(after)
    hist = after.graph.op_histogram()

    # permute, mul, add (weight), exp, arange(8): five nodes folded.
    assert changes["nodes_folded"] == 5
    assert sum(hist.values()) == sum(hist_before.values()) - 5
    assert hist.get("permute", 0) == 0 and "aten:aten.exp.default" not in hist
    # The dynamic arange and the large expand stay ops.
    assert hist["aten:aten.arange.start_step"] == 1
    assert hist["aten:aten.expand.default"] == 1
    # The raw weight is no longer read: only its folded form is stored.
    assert "w" not in after.weights
    _assert_constants_consistent(after)
    for batch in (4, 7):  # 7: a batch size other than the traced one
        _assert_same(before, after, {"x": torch.randn(batch, 8)}, {"batch": batch})


def test_is_idempotent(folding_program):
    program = _copy(folding_program)
    _fold(program)
    assert _fold(program)["nodes_folded"] == 0


def _tiny_graph(nodes: list[Node], values: dict[str, TensorSpec], outputs: list[str], weights: dict) -> Program:
    graph = Graph(inputs=["x"], outputs=outputs, nodes=nodes, values=values, constants=list(weights),
                  dims={"batch": DimRange(min=1, max=8)})
    return Program(graph, weights)


def test_leaves_symbolic_reshape_and_graph_outputs():
    weights = {"c": torch.arange(8, dtype=torch.float32)}
    values = {
        "x": TensorSpec(dtype="float32", shape=["batch", 8]),
        "c": TensorSpec.of(weights["c"]),
        "r": TensorSpec(dtype="float32", shape=["batch", "8//batch"]),
        "neg": TensorSpec(dtype="float32", shape=[8]),
        "y": TensorSpec(dtype="float32", shape=["batch", 8]),
    }
    nodes = [
        # Reshape of a constant to a shape naming a dynamic dim: its value depends on the run.
        Node(name="r", op="reshape", inputs=["c"], outputs=["r"], attrs={"shape": ["batch", -1]}),
        # A constant-only node that writes a graph output stays a node.
        Node(name="neg", op="mul", inputs=["c"], outputs=["neg"], attrs={"rhs_scalar": -1.0}),
        Node(name="y", op="add", inputs=["x", "c"], outputs=["y"]),
    ]
    program = _tiny_graph(nodes, values, ["y", "r", "neg"], weights)
    assert _fold(program)["nodes_folded"] == 0
    assert [n.name for n in program.graph.nodes] == ["r", "neg", "y"]
    out = _run(program, {"x": torch.zeros(2, 8)}, {"batch": 2})
    assert out[1].shape == (2, 4)


def test_folds_chain_under_existing_names():
    weights = {"c": torch.full((4,), 2.0)}
    values = {
        "x": TensorSpec(dtype="float32", shape=["batch", 4]),
        "c": TensorSpec.of(weights["c"]),
        "sq": TensorSpec(dtype="float32", shape=[4]),
        "half": TensorSpec(dtype="float32", shape=[4]),
        "y": TensorSpec(dtype="float32", shape=["batch", 4]),
    }
    nodes = [
        Node(name="sq", op="mul", inputs=["c", "c"], outputs=["sq"]),
        Node(name="half", op="mul", inputs=["sq"], outputs=["half"], attrs={"rhs_scalar": 0.5}),
        Node(name="y", op="add", inputs=["x", "half"], outputs=["y"]),
    ]
    program = _tiny_graph(nodes, values, ["y"], weights)
    assert _fold(program)["nodes_folded"] == 2
    # Readers keep reading the same value name, now a constant.
    assert program.graph.nodes[0].inputs == ["x", "half"]
    assert "half" in program.graph.constants and "sq" not in program.weights
    assert torch.equal(program.weights["half"], torch.full((4,), 2.0))
    _assert_constants_consistent(program)


def test_tiny_bert_folds_static_parts_only():
    example = get_example("tiny-bert")
    inputs = example.example_inputs(2)
    before = program_from_module(example.build(), inputs, example.dynamic_dims, list(example.output_names))
    after = _copy(before)
    changes = _fold(after)
    hist_before, hist = before.graph.op_histogram(), after.graph.op_histogram()
    # The token-type expand and the scalar bool full are constant; position/mask ops depend on batch/seq.
    assert changes["nodes_folded"] == 2
    assert hist["aten:aten.expand.default"] == hist_before["aten:aten.expand.default"] - 1
    assert "aten:aten.full.default" not in hist
    assert hist["aten:aten.arange.start_step"] == hist_before["aten:aten.arange.start_step"]
    _assert_constants_consistent(after)
    for batch, seq in ((2, 16), (3, 9)):
        feed = {k: v[:, :seq].repeat(2, 1)[:batch] for k, v in example.example_inputs(2).items()}
        _assert_same(before, after, feed, {"batch": batch, "seq": seq})


def test_a_large_dtype_widening_folds():
    """A QDQ model's int8 weight dequantized (to_dtype then mul by the scale) grows 4x, past the growth limit
    an expand is held to; no more elements than its input, it folds, and the layers see float weights."""
    weights = {"w": torch.randint(-127, 128, (1024, 1024), dtype=torch.int8), "s": torch.full((1024, 1), 0.01)}
    values = {
        "x": TensorSpec(dtype="float32", shape=["batch", 1024]),
        "w": TensorSpec.of(weights["w"]), "s": TensorSpec.of(weights["s"]),
        "wf": TensorSpec(dtype="float32", shape=[1024, 1024]),
        "wd": TensorSpec(dtype="float32", shape=[1024, 1024]),
        "y": TensorSpec(dtype="float32", shape=["batch", 1024]),
    }
    nodes = [
        Node(name="wf", op="to_dtype", inputs=["w"], outputs=["wf"], attrs={"dtype": "float32"}),
        Node(name="wd", op="mul", inputs=["wf", "s"], outputs=["wd"]),
        Node(name="y", op="linear", inputs=["x", "wd"], outputs=["y"]),
    ]
    program = _tiny_graph(nodes, values, ["y"], weights)
    assert _fold(program)["nodes_folded"] == 2
    assert [n.op for n in program.graph.nodes] == ["linear"]
    assert torch.equal(program.weights["wd"], weights["w"].float() * 0.01)
