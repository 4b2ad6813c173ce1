"""matmul_to_linear: x @ constant W (+ constant bias) becomes linear with that bias, outputs unchanged."""
from __future__ import annotations

import torch
from torch import nn

from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.passes.base import PASSES, PassOptions
from pass_helpers import assert_same_outputs, copy_program


class MatMulAdds(nn.Module):
    """What ONNX exports of nn.Linear look like: MatMul by a [in, out] weight, then Add of the bias."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w1 = nn.Parameter(torch.randn(8, 16, generator=g))
        self.b1 = nn.Parameter(torch.randn(16, generator=g))
        self.w2 = nn.Parameter(torch.randn(16, 4, generator=g))
        self.b2 = nn.Parameter(torch.randn(4, generator=g))
        self.other = nn.Parameter(torch.randn(3, 4, generator=g))

    def forward(self, x):
        h = self.b1 + x @ self.w1           # bias first
        y = (h @ self.w2) + self.b2          # bias second
        z = (h @ self.w2) + self.other       # a [3, 4] constant is not a bias
        return y, z


def test_matmul_plus_bias_becomes_linear_with_bias():
    x = torch.randn(3, 8)
    before = program_from_module(MatMulAdds(), {"x": x}, {})
    after = copy_program(before)
    changes = PASSES["matmul_to_linear"].run(after, PassOptions())
    assert changes == {"matmul_to_linear": 3, "biases_absorbed": 2}
    hist = after.graph.op_histogram()
    assert hist["linear"] == 3 and "matmul" not in hist and hist.get("add") == 1
    biased = [n for n in after.graph.nodes if n.op == "linear" and n.inputs[2] is not None]
    assert len(biased) == 2
    assert after.graph.outputs == before.graph.outputs  # an output keeps its name
    assert_same_outputs(before, after, {"x": x}, {})


class Conv1DLike(nn.Module):
    """GPT-2's Conv1D: torch.addmm(bias, x, weight [in, out]) on the flattened rows, then a relu."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.weight = nn.Parameter(torch.randn(8, 6, generator=g))
        self.bias = nn.Parameter(torch.randn(6, generator=g))

    def forward(self, x):
        return torch.relu(torch.addmm(self.bias, x.reshape(-1, 8), self.weight))


def test_addmm_becomes_linear_with_its_bias():
    x = torch.randn(5, 8)
    before = program_from_module(Conv1DLike(), {"x": x}, {})
    assert [n.op for n in before.graph.nodes if n.op == "matmul"] == ["matmul"]  # addmm maps to matmul + add post-op
    after = copy_program(before)
    changes = PASSES["matmul_to_linear"].run(after, PassOptions())
    assert changes == {"matmul_to_linear": 1, "biases_absorbed": 1}
    linear = next(n for n in after.graph.nodes if n.op == "linear")
    assert linear.inputs[2] is not None and linear.attrs["post_ops"] == [] and len(linear.inputs) == 3
    assert_same_outputs(before, after, {"x": x}, {})
