"""fuse_post_ops: element-wise consumers fold into conv2d / linear / matmul post_ops, outputs unchanged."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir import Node, Program
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.passes.base import PASSES, PassOptions
from pass_helpers import copy_program as _copy, run_program as _run, rel_err as _rel_err, assert_same_outputs as _assert_same_outputs

BATCH = {0: DynamicDim(name="batch", max=16)}


def _fuse(program: Program) -> dict[str, int]:
    return PASSES["fuse_post_ops"].run(program, PassOptions())


def _kinds(node: Node) -> list[str]:
    return [p["kind"] for p in node.attrs["post_ops"]]


def _producing(program: Program, value: str) -> Node:
    return program.graph.producers()[value]


# ---- convolutions: activations and residual adds --------------------------------------------


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.a1, self.b1 = nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 8, 1)
        self.a2, self.b2 = nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 8, 1)
        self.c = nn.Conv2d(8, 8, 3, padding=1)
        self.gate = nn.Conv2d(8, 8, 1)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        y = F.relu(self.stem(x))
        y = F.relu(self.a1(y) + self.b1(y))      # two conv branches, a1 runs first
        b = self.b2(y)
        a = self.a2(y)
        y = F.relu(a + b)                        # two conv branches, b2 runs first
        y = torch.sigmoid(self.c(y) + y)         # residual operand is not a conv output
        y = F.silu(self.gate(y) * y)             # binary mul, then an activation after it
        return torch.tanh(self.head(y.mean(dim=(2, 3))))


def _image(batch: int, seed: int) -> dict[str, torch.Tensor]:
    return {"x": torch.randn(batch, 3, 12, 12, generator=torch.Generator().manual_seed(seed))}


def test_conv_chains_and_residual_adds():
    before = program_from_module(ConvNet(), _image(2, 0), {"x": BATCH})
    after = _copy(before)
    hist_before = before.graph.op_histogram()

    changes = _fuse(after)

    hist_after = after.graph.op_histogram()
    assert changes == {"post_ops_fused": 10, "relu": 3, "add": 3, "sigmoid": 1, "mul": 1, "silu": 1, "tanh": 1}
    assert hist_before["conv2d"] == hist_after["conv2d"] == 7
    for op in ("relu", "add", "sigmoid", "mul", "silu", "tanh"):
        assert op not in hist_after

    convs = {n.inputs[1].split(".")[0]: n for n in after.graph.nodes if n.op in ("conv2d", "linear")}
    assert _kinds(convs["stem"]) == ["relu"]
    # Residual of two conv branches: fused into the later conv, the earlier one is its operand.
    assert _kinds(convs["a1"]) == [] and _kinds(convs["b1"]) == ["add", "relu"]
    assert convs["b1"].inputs[3] == convs["a1"].outputs[0]
    assert convs["b1"].attrs["post_ops"][0]["operand"] == 3
    assert _kinds(convs["b2"]) == [] and _kinds(convs["a2"]) == ["add", "relu"]
    assert convs["a2"].inputs[3] == convs["b2"].outputs[0]
    assert _kinds(convs["c"]) == ["add", "sigmoid"]
    assert _kinds(convs["gate"]) == ["mul", "silu"]
    assert _kinds(convs["head"]) == ["tanh"]
    assert after.graph.outputs == before.graph.outputs

    for batch in (2, 5):
        _assert_same_outputs(before, after, _image(batch, batch), {"batch": batch})


# ---- linear / matmul: gelu variants, GLU, matmul + bias -----------------------------------------

DIM, HIDDEN = 16, 24


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.up = nn.Linear(DIM, HIDDEN)
        self.down = nn.Linear(HIDDEN, DIM)
        self.gate, self.proj = nn.Linear(DIM, HIDDEN, bias=False), nn.Linear(DIM, HIDDEN, bias=False)
        self.w = nn.Parameter(torch.randn(HIDDEN, DIM) * 0.2)
        self.b = nn.Parameter(torch.randn(DIM))

    def forward(self, x):
        h = F.gelu(self.up(x))                                   # exact gelu
        y = F.gelu(self.down(h), approximate="tanh") + x         # gelu_tanh, then residual add
        g = F.silu(self.gate(y)) * self.proj(y)                  # GLU: mul of two linears
        return torch.matmul(g, self.w) + self.b                  # matmul + constant bias vector


def _tokens(batch: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    return {"x": torch.randn(batch, seq, DIM, generator=torch.Generator().manual_seed(seed))}


def test_linear_and_matmul_post_ops():
    dynamic = {"x": {0: BATCH[0], 1: DynamicDim(name="seq", min=2, max=64)}}
    before = program_from_module(Mlp(), _tokens(2, 5, 0), dynamic)
    after = _copy(before)

    changes = _fuse(after)

    assert changes == {"post_ops_fused": 6, "gelu": 1, "gelu_tanh": 1, "add": 2, "silu": 1, "mul": 1}
    hist = after.graph.op_histogram()
    assert hist == {"linear": 4, "matmul": 1}
    nodes = {n.inputs[1]: n for n in after.graph.nodes}
    assert _kinds(nodes["up.weight"]) == ["gelu"]
    assert _kinds(nodes["down.weight"]) == ["gelu_tanh", "add"]
    assert _kinds(nodes["gate.weight"]) == ["silu"]
    assert _kinds(nodes["proj.weight"]) == ["mul"]  # proj runs after gate, so it takes the mul
    assert nodes["proj.weight"].inputs[3] == nodes["gate.weight"].outputs[0]
    assert _kinds(nodes["w"]) == ["add"] and nodes["w"].inputs[2] == "b"  # bias vector as an operand

    for batch, seq in [(2, 5), (3, 9)]:
        _assert_same_outputs(before, after, _tokens(batch, seq, batch), {"batch": batch, "seq": seq})


# ---- consumers that must stay separate ------------------------------------------------------


class NotFusable(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.l1, self.l2, self.l3 = nn.Linear(DIM, DIM), nn.Linear(DIM, DIM), nn.Linear(DIM, 1)
        self.l4, self.l5 = nn.Linear(DIM, DIM), nn.Linear(DIM, DIM)

    def forward(self, x):
        a = self.l1(x)
        a2 = torch.relu(a) + a          # l1's output has two readers
        b = self.l2(x)                  # l2's output is also a graph output
        b2 = torch.relu(b)
        c = self.l3(x) + x              # [.., 1] + [.., DIM] would grow l3's output
        d = self.l4(x) + 1.0            # python-number operand
        e = self.l5(x)
        late = x * 3.0                  # computed after l5: not available where l5 runs
        return a2, b, b2, c, d, e + late


def test_unfusable_consumers_are_left_alone():
    before = program_from_module(NotFusable(), {"x": torch.randn(2, DIM)}, {"x": BATCH})
    after = _copy(before)
    hist = before.graph.op_histogram()

    changes = _fuse(after)

    assert changes == {"post_ops_fused": 0}
    assert after.graph.op_histogram() == hist
    assert all(not n.attrs.get("post_ops") for n in after.graph.nodes)
    _assert_same_outputs(before, after, {"x": torch.randn(3, DIM)}, {"batch": 3})


# ---- tiny-cnn end to end, when batch norms can be folded first -------------------------------


def test_tiny_cnn_after_fold_batchnorm():
    if "fold_batchnorm" not in PASSES:
        pytest.skip("fold_batchnorm is not registered yet")
    from ipexconvert.examples import get_example

    example = get_example("tiny-cnn")
    before = program_from_module(example.build(), example.example_inputs(2), example.dynamic_dims,
                                 list(example.output_names))
    after = _copy(before)
    PASSES["fold_batchnorm"].run(after, PassOptions())
    changes = _fuse(after)

    hist = after.graph.op_histogram()
    assert "relu" not in hist and "add" not in hist  # every relu and residual add is folded
    assert changes["relu"] == 13 and changes["add"] == 4
    for batch in (2, 3):
        inputs = example.example_inputs(batch)
        _assert_same_outputs(before, after, inputs, {"batch": batch})
