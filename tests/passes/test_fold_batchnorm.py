"""fold_batchnorm: BN after conv2d / linear folds into its weights; BN that cannot fold stays."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from ipexconvert.examples import get_example
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir import Program
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.passes.base import PASSES, PassOptions
from pass_helpers import copy_program as _copy, run_program as _run, rel_err as _rel_err, assert_same_outputs as _assert_same

BATCH = {0: DynamicDim(name="batch", max=16)}


def _fold(program: Program) -> dict[str, int]:
    return PASSES["fold_batchnorm"].run(program, PassOptions())


def _randomise_bn(module: nn.Module, seed: int = 0) -> nn.Module:
    """Non-trivial running statistics and affine parameters, so a wrong fold shows."""
    gen = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=gen))
            m.running_var.copy_(torch.rand(n, generator=gen) * 2 + 0.1)
            if m.affine:
                m.weight.data.copy_(torch.randn(n, generator=gen))
                m.bias.data.copy_(torch.randn(n, generator=gen))
    return module.eval()


def _convert(module: nn.Module, **inputs: torch.Tensor) -> Program:
    return program_from_module(_randomise_bn(module), inputs, {name: BATCH for name in inputs})


class Foldable(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)        # no bias: the fold creates one
        self.bn = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=True)  # depthwise, with bias
        self.bn_dw = nn.BatchNorm2d(8, eps=1e-3)
        self.fc = nn.Linear(8, 6)
        self.bn_fc = nn.BatchNorm1d(6)
        self.plain = nn.Conv2d(3, 4, 1)
        self.bn_plain = nn.BatchNorm2d(4, affine=False)                # no gamma/beta

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = self.bn_dw(self.dw(y))
        logits = self.bn_fc(self.fc(y.mean((2, 3))))
        return logits, self.bn_plain(self.plain(x))                   # a BN that writes a graph output


def test_folds_conv_and_linear_batchnorm():
    before = _convert(Foldable(), x=torch.randn(2, 3, 8, 8))
    after = _copy(before)
    assert before.graph.op_histogram()["batch_norm"] == 4
    assert _fold(after) == {"batchnorm_folded": 4}
    hist = after.graph.op_histogram()
    assert "batch_norm" not in hist and hist["conv2d"] == 3 and hist["linear"] == 1
    # Output names survive, and every conv/linear now has a constant bias.
    assert after.graph.outputs == before.graph.outputs
    for node in after.graph.nodes:
        if node.op in ("conv2d", "linear"):
            assert after.is_constant(node.inputs[1]) and after.is_constant(node.inputs[2])
    # Running stats are gone from the artifact.
    assert not any("running_" in name for name in after.weights)
    for batch in (2, 5):
        _assert_same(before, after, {"x": torch.randn(batch, 3, 8, 8)}, {"batch": batch})


def test_fold_math_matches_float64_reference():
    """The folded weight equals W * gamma / sqrt(var + eps), computed independently."""
    module = _randomise_bn(nn.Sequential(nn.Conv2d(2, 3, 1, bias=False), nn.BatchNorm2d(3)))
    program = program_from_module(module, {"input": torch.randn(2, 2, 4, 4)}, {"input": BATCH})
    _fold(program)
    conv = next(n for n in program.graph.nodes if n.op == "conv2d")
    bn = module[1]
    scale = bn.weight.double() / torch.sqrt(bn.running_var.double() + bn.eps)
    expected_w = (module[0].weight.double() * scale[:, None, None, None]).float()
    expected_b = (bn.bias.double() - bn.running_mean.double() * scale).float()
    assert torch.equal(program.weights[conv.inputs[1]], expected_w)
    assert torch.equal(program.weights[conv.inputs[2]], expected_b)


class Unfoldable(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.bn_in = nn.BatchNorm2d(3)
        self.fc = nn.Linear(4, 4)
        self.bn_seq = nn.BatchNorm1d(4)  # as many channels as the linear has features: only the rank tells

    def forward(self, x, tokens):
        c = self.conv(self.bn_in(x))           # BN on a graph input: nothing to fold into
        y = self.bn(c) + c                     # conv output has two readers: folding would change c
        t = self.bn_seq(self.fc(tokens))       # BN1d over dim 1 of [N, 4, 4]: not the linear's features
        return y, t


def test_leaves_batchnorm_it_cannot_fold():
    before = _convert(Unfoldable(), x=torch.randn(2, 3, 6, 6), tokens=torch.randn(2, 4, 4))
    after = _copy(before)
    assert _fold(after) == {"batchnorm_folded": 0}
    assert after.graph.model_dump() == before.graph.model_dump()
    feed = {"x": torch.randn(3, 3, 6, 6), "tokens": torch.randn(3, 4, 4)}
    _assert_same(before, after, feed, {"batch": 3})


def test_skips_conv_with_post_ops():
    program = _convert(nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4)), input=torch.randn(2, 3, 4, 4))
    conv = next(n for n in program.graph.nodes if n.op == "conv2d")
    conv.attrs["post_ops"] = [{"kind": "relu"}]  # bn(relu(conv)) is not a conv any more
    assert _fold(program) == {"batchnorm_folded": 0}
    assert program.graph.op_histogram()["batch_norm"] == 1


class SharedConv(nn.Module):
    """One conv weight read by two convs, each followed by its own BN."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn_a, self.bn_b = nn.BatchNorm2d(4), nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn_a(self.conv(x)) + self.bn_b(self.conv(x * 2.0))


def test_shared_weights_get_their_own_folded_copy():
    before = _convert(SharedConv(), x=torch.randn(2, 3, 5, 5))
    after = _copy(before)
    assert _fold(after) == {"batchnorm_folded": 2}
    convs = [n for n in after.graph.nodes if n.op == "conv2d"]
    assert convs[0].inputs[1] != convs[1].inputs[1]  # not one tensor scaled twice
    _assert_same(before, after, {"x": torch.randn(4, 3, 5, 5)}, {"batch": 4})


@pytest.mark.parametrize("batch", [3])
def test_tiny_cnn(batch):
    example = get_example("tiny-cnn")
    before = program_from_module(example.build(), example.example_inputs(2), example.dynamic_dims,
                                 list(example.output_names))
    after = _copy(before)
    assert _fold(after) == {"batchnorm_folded": 17}
    assert "batch_norm" not in after.graph.op_histogram()
    assert len(after.weights) < len(before.weights)
    _assert_same(before, after, example.example_inputs(batch), {"batch": batch})
