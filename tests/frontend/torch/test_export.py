"""torch.export -> IR: dynamic dims become named shapes, converted programs match eager at
several sizes, unsupported ops fail with an error naming them, outputs get the requested names."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ipexconvert.errors import UnsupportedOpError, UserInputError
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir import DimRange
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.runtime.executor import Executor

BATCH = DynamicDim(name="batch", min=1, max=8)
SEQ = DynamicDim(name="seq", min=2, max=32)


def run(program, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """Execute a converted program, binding named dims from the input shapes."""
    dims: dict[str, int] = {}
    for name in program.graph.inputs:
        for size, dim in zip(inputs[name].shape, program.graph.values[name].shape):
            if isinstance(dim, str):
                dims[dim] = size
    return Executor(program).run([inputs[n] for n in program.graph.inputs], dims)


def eager(module, inputs) -> list[torch.Tensor]:
    with torch.no_grad():
        out = module(**inputs)
    return list(out) if isinstance(out, tuple) else [out]


def assert_matches_eager(program, module, inputs, atol=1e-5, rtol=1e-4):
    got, want = run(program, inputs), eager(module, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, atol=atol, rtol=rtol)


class TokenMixer(nn.Module):
    """x [batch, seq, 16] and a per-example scale [batch, 1]; flattens batch*seq on the way."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = nn.Linear(16, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x, scale):
        b, s, _ = x.shape
        flat = self.proj(x).reshape(b * s, 8)
        y = self.norm(torch.relu(flat)).reshape(b, s, 8)
        return y * scale[:, :, None], y.mean(1)


def _mixer_inputs(batch: int, seq: int) -> dict[str, torch.Tensor]:
    return {"x": torch.randn(batch, seq, 16), "scale": torch.rand(batch, 1) + 0.5}


MIXER_DYNAMIC = {"x": {0: BATCH, 1: SEQ}, "scale": {0: BATCH}}


@pytest.fixture(scope="module")
def mixer():
    module = TokenMixer().eval()
    program = program_from_module(module, _mixer_inputs(2, 5), MIXER_DYNAMIC, output_names=["mixed", "pooled"])
    return module, program


def test_input_shapes_carry_the_declared_dim_names(mixer):
    _, program = mixer
    values = program.graph.values
    assert values["x"].shape == ["batch", "seq", 16]
    assert values["scale"].shape == ["batch", 1]


def test_inputs_sharing_a_dim_name_share_the_symbol(mixer):
    """x and scale both declare "batch": the graph has one batch dim, not one per input."""
    _, program = mixer
    assert set(program.graph.dims) == {"batch", "seq"}


def test_dim_ranges_are_the_declared_ones(mixer):
    _, program = mixer
    assert program.graph.dims["batch"] == DimRange(min=1, max=8)
    assert program.graph.dims["seq"] == DimRange(min=2, max=32)


def test_intermediate_and_output_shapes_are_expressions_over_dim_names(mixer):
    _, program = mixer
    values = program.graph.values
    flat = [v.shape for k, v in values.items() if k not in program.graph.constants and len(v.shape) == 2
            and isinstance(v.shape[0], str) and "*" in v.shape[0]]
    assert flat, "the reshape to batch*seq should show up as a symbolic product"
    assert all(set(s[0].replace(" ", "").split("*")) == {"batch", "seq"} for s in flat)
    assert values["mixed"].shape == ["batch", "seq", 8]
    assert values["pooled"].shape == ["batch", 8]


def test_output_names_come_out_as_requested(mixer):
    _, program = mixer
    assert program.graph.outputs == ["mixed", "pooled"]
    assert {"mixed", "pooled"} <= set(program.graph.values)


@pytest.mark.parametrize("batch, seq", [(1, 2), (2, 5), (3, 7), (8, 32)])
def test_converted_program_matches_eager_at_several_sizes(mixer, batch, seq):
    module, program = mixer
    assert_matches_eager(program, module, _mixer_inputs(batch, seq))


def test_size_one_example_still_gives_a_dynamic_dim():
    """torch.export would specialise a size-1 example; the frontend traces with size 2 instead."""
    module = nn.Linear(4, 3).eval()
    program = program_from_module(module, {"input": torch.randn(1, 4)}, {"input": {0: BATCH}})
    assert program.graph.values[program.graph.inputs[0]].shape == ["batch", 4]
    assert_matches_eager(program, module, {"input": torch.randn(5, 4)})


def test_undeclared_dims_stay_static():
    module = nn.Linear(4, 3).eval()
    program = program_from_module(module, {"input": torch.randn(2, 4)}, {})
    assert program.graph.values["input"].shape == [2, 4]
    assert program.graph.dims == {}


# ---- outputs ----------------------------------------------------------------------------------------------------


class PassThrough(nn.Module):
    def forward(self, x):
        y = x + 1
        return x, y, y


def test_default_output_names_when_none_requested():
    program = program_from_module(nn.ReLU(), {"input": torch.randn(2, 3)}, {})
    assert program.graph.outputs == ["output"]


def test_wrong_number_of_output_names_falls_back_to_numbered_names():
    program = program_from_module(PassThrough(), {"x": torch.randn(2, 3)}, {}, output_names=["only_one"])
    assert program.graph.outputs == ["output_0", "output_1", "output_2"]


def test_input_and_duplicate_outputs_get_their_own_named_values():
    module = PassThrough()
    program = program_from_module(module, {"x": torch.randn(2, 3)}, {}, output_names=["same", "plus", "plus_again"])
    assert program.graph.outputs == ["same", "plus", "plus_again"]
    assert len(set(program.graph.outputs)) == 3
    assert "x" in program.graph.inputs  # the input keeps its own name
    assert_matches_eager(program, module, {"x": torch.randn(2, 3)})


def test_output_named_like_an_input_does_not_clobber_it():
    class Double(nn.Module):
        def forward(self, x):
            return x * 2

    program = program_from_module(Double(), {"x": torch.randn(3)}, {}, output_names=["x"])
    assert program.graph.inputs == ["x"]
    assert program.graph.outputs == ["x_out"]
    assert_matches_eager(program, Double(), {"x": torch.randn(3)})


# ---- ops outside the opset -----------------------------------------------------------------------------------------


@torch.library.custom_op("ipxtest::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _twice_fake(x):
    return torch.empty_like(x)


class CallsCustomOp(nn.Module):
    def forward(self, x):
        return twice(x) + 1


class CallsRandLike(nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x)


class MutatesBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x):
        self.calls.add_(1)
        return x + self.calls


class MutatesInput(nn.Module):
    def forward(self, x):
        x.mul_(2)
        return x + 1


def test_custom_library_op_is_refused_naming_the_op_and_line():
    with pytest.raises(UnsupportedOpError) as info:
        program_from_module(CallsCustomOp(), {"x": torch.randn(2, 3)}, {})
    message = str(info.value)
    assert "ipxtest.twice" in message
    assert "not an ATen op" in message
    assert "test_export.py" in message  # the model line that called it
    assert info.value.fix


def test_random_op_is_refused_naming_the_op():
    with pytest.raises(UnsupportedOpError, match=r"aten\.rand_like\.default.*random"):
        program_from_module(CallsRandLike(), {"x": torch.randn(2, 3)}, {})


@pytest.mark.parametrize("module, kind", [(MutatesBuffer(), "BUFFER_MUTATION"), (MutatesInput(), "USER_INPUT_MUTATION")])
def test_in_place_mutation_surviving_export_is_refused(module, kind):
    with pytest.raises(UnsupportedOpError, match=kind) as info:
        program_from_module(module, {"x": torch.randn(2, 3)}, {})
    assert "does not update" in info.value.fix


def test_export_failure_is_a_user_input_error():
    with pytest.raises(UserInputError, match="torch.export could not capture") as info:
        program_from_module(nn.ReLU(), {"not_the_argument_name": torch.randn(2)}, {})
    assert "example inputs" in info.value.fix


# ---- calls the opset cannot model still convert correctly ------------------------------------------------------------


class Awkward(nn.Module):
    """Calls whose ATen mapper refuses them (Unconvertible): they must decompose or fall back to core ATen, not fail."""

    def forward(self, x):
        a = torch.add(x, x, alpha=2)  # alpha != 1
        b = F.softmax(x, -1, dtype=torch.float64)  # softmax with a dtype change
        c = F.max_pool2d(x, 3, 2, ceil_mode=True)  # ceil-mode pooling
        d = torch.cumsum(x, 1)  # no opset op at all
        return a, b, c, d


def test_calls_outside_the_opset_fall_back_to_core_aten_and_match_eager():
    module = Awkward()
    program = program_from_module(module, {"x": torch.randn(2, 3, 7, 7)}, {"x": {0: BATCH}})
    fallbacks = {n.attrs["target"] for n in program.graph.nodes if n.op == "aten"}
    assert "aten.cumsum.default" in fallbacks
    assert not fallbacks & {"aten.softmax.int", "aten.max_pool2d.default"}  # non-core: must never be stored
    for batch in (1, 4):
        assert_matches_eager(program, module, {"x": torch.randn(batch, 3, 7, 7)})


def test_softmax_with_float32_dtype_on_bf16_input_converts():
    """The common `softmax(scores, dim=-1, dtype=torch.float32)` of HF attention code."""

    class Softmax32(nn.Module):
        def forward(self, scores):
            return F.softmax(scores, dim=-1, dtype=torch.float32)

    scores = torch.randn(2, 5).bfloat16()
    program = program_from_module(Softmax32(), {"scores": scores}, {})
    assert "softmax" in {n.op for n in program.graph.nodes}
    assert_matches_eager(program, Softmax32(), {"scores": scores})
