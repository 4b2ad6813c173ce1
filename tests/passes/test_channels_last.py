"""channels_last: conv chains run channels-last, specs say so, callers still get contiguous outputs."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from ipexconvert.examples import get_example
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir import Program
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.passes.base import PASSES, PassOptions
from pass_helpers import copy_program as _copy, run_program as _run, run_traced as _run_traced, rel_err as _rel_err, TOL

BATCH = {0: DynamicDim(name="batch", max=16)}
CL = torch.channels_last


def _to_cl(program: Program) -> dict[str, int]:
    return PASSES["channels_last"].run(program, PassOptions())


def _strictly_cl(t: torch.Tensor) -> bool:
    return t.dim() == 4 and t.is_contiguous(memory_format=CL) and not t.is_contiguous()


def _assert_layouts_match_specs(program: Program, seen: dict[str, torch.Tensor]) -> int:
    """Every 4-D value is laid out as its spec says; returns how many were really channels-last."""
    really_cl = 0
    for name, tensor in seen.items():
        spec = program.graph.values[name]
        if tensor.dim() != 4:
            continue
        if spec.memory_format == "channels_last":
            assert tensor.is_contiguous(memory_format=CL), f"{name}: spec channels_last, tensor is not"
            really_cl += _strictly_cl(tensor)
        else:
            assert not _strictly_cl(tensor), f"{name}: spec contiguous, tensor is channels_last"
    return really_cl


def _assert_same(before: Program, after: Program, inputs: dict[str, torch.Tensor], dims: dict[str, int]):
    expected = _run(before, inputs, dims)
    got, seen = _run_traced(after, inputs, dims)
    for e, g in zip(expected, got, strict=True):
        assert g.shape == e.shape and _rel_err(g, e) < TOL
        assert g.is_contiguous(), "callers get contiguous outputs"
    return seen


@pytest.fixture(scope="module")
def tiny_cnn() -> tuple[Program, object]:
    example = get_example("tiny-cnn")
    program = program_from_module(example.build(), example.example_inputs(2), example.dynamic_dims,
                                  list(example.output_names))
    PASSES["fold_batchnorm"].run(program, PassOptions())  # the pipeline folds BN first
    return program, example


def test_tiny_cnn_runs_channels_last(tiny_cnn):
    before, example = tiny_cnn
    after = _copy(before)
    changes = _to_cl(after)
    assert changes == {"conv_weights_channels_last": 17, "layout_conversions_inserted": 1}
    graph = after.graph
    assert graph.op_histogram()["to_memory_format"] == 1
    first = graph.nodes[0]
    assert first.op == "to_memory_format" and first.inputs == ["pixel_values"]
    for node in graph.nodes:
        if node.op == "conv2d":
            assert graph.values[node.inputs[1]].memory_format == "channels_last"
            assert graph.values[node.outputs[0]].memory_format == "channels_last"
            assert after.weights[node.inputs[1]].is_contiguous()  # stored dense; converted at load
    # The control: before the pass, nothing is channels-last at run time.
    inputs = example.example_inputs(3)
    _, seen_before = _run_traced(before, inputs, {"batch": 3})
    assert _assert_layouts_match_specs(before, seen_before) == 0
    seen = _assert_same(before, after, inputs, {"batch": 3})
    # Every conv, relu, add and the max-pool really produced channels-last tensors.
    assert _assert_layouts_match_specs(after, seen) >= 17 + 13 + 4 + 1


class Mixed(nn.Module):
    """Residual adds in both operand orders, a non-commutative sub, layout-unknown ops, a 4-D output."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = nn.Conv2d(4, 4, 3, padding=1)
        self.b = nn.Conv2d(4, 4, 1)
        self.scale = nn.Parameter(torch.rand(1, 4, 1, 1) + 0.5)

    def forward(self, x):
        y = x + torch.relu(self.a(x))       # contiguous + channels-last: operands get swapped
        z = self.b(y) * self.scale          # broadcast constant behind a channels-last value
        w = self.scale - z                  # non-commutative, broadcast first operand: torch gives channels-last
        s = torch.softmax(z, dim=1)         # no layout rule: gets a contiguous input
        t = z.transpose(2, 3).abs()         # a permute, and an aten fallback that would keep channels-last
        pooled = torch.flatten(nn.functional.adaptive_avg_pool2d(z, 1), 1)  # 2-D: no conversion needed
        return z, w + s + t + x, pooled


def test_mixed_graph_specs_match_runtime_layouts():
    x = torch.randn(2, 4, 6, 6)
    before = program_from_module(Mixed(), {"x": x}, {"x": BATCH})
    after = _copy(before)
    changes = _to_cl(after)
    graph = after.graph
    assert changes["conv_weights_channels_last"] == 2
    # The entry conversion of x, and one contiguous copy of z shared by the sub, softmax and
    # permute readers and the 4-D graph output z.
    assert changes["layout_conversions_inserted"] == graph.op_histogram()["to_memory_format"] == 2
    producers = graph.producers()
    out_z = graph.outputs[0]
    assert producers[out_z].op == "to_memory_format" and producers[out_z].attrs == {"memory_format": "contiguous"}
    assert graph.values[producers[out_z].inputs[0]].memory_format == "channels_last"
    add = next(n for n in graph.nodes if n.op == "add" and graph.values[n.outputs[0]].rank == 4)
    assert graph.values[add.inputs[0]].memory_format == "channels_last"  # swapped to lead
    for batch in (2, 5):
        seen = _assert_same(before, after, {"x": torch.randn(batch, 4, 6, 6)}, {"batch": batch})
        assert _assert_layouts_match_specs(after, seen) >= 4
        assert _strictly_cl(seen[producers[out_z].inputs[0]])  # z itself ran channels-last


def test_no_conv_means_no_change():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    before = program_from_module(model, {"input": torch.randn(2, 4)}, {"input": BATCH})
    after = _copy(before)
    assert _to_cl(after) == {"conv_weights_channels_last": 0, "layout_conversions_inserted": 0}
    assert after.graph.model_dump() == before.graph.model_dump()


def test_second_run_changes_nothing(tiny_cnn):
    program = _copy(tiny_cnn[0])
    _to_cl(program)
    snapshot = program.graph.model_dump()
    assert _to_cl(program) == {"conv_weights_channels_last": 0, "layout_conversions_inserted": 0}
    assert program.graph.model_dump() == snapshot
