"""The registered quantize kernel, resolved through the registry at every ISA level this machine runs,
bit-exact with QuantizeOp.reference: float32 and bfloat16 in, uint8 and int8 out, per tensor and with
the SmoothQuant multiplier constant, contiguous and channels-last 4-D (the output keeps the layout).
Inputs of another layout than the spec's (transposed, or channels-last under a multiplier) run the
reference at run time, with identical results."""
from __future__ import annotations

import pytest
import torch

import native_ops as native
from ipexconvert.ir.opdef import get_op
from ipexconvert.ir.ops.quantize import QuantizeOp
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.runtime.kernels import NodeContext, resolve_kernel

pytestmark = pytest.mark.skipif(not native.available(), reason="ipexconvert._native is not built")
LEVELS = native.supported_levels() if native.available() else []
CL = torch.channels_last
ZERO_POINT = {"uint8": 131, "int8": 3}  # odd: see multiplier_for
SHAPES = {"2d": (3, 37), "3d": (2, 5, 33), "4d": (2, 6, 5, 7), "4d-channels-last": (2, 6, 5, 7)}


def values(shape, dtype: torch.dtype) -> torch.Tensor:
    """Beyond the int8 range (clamping), with exact halves at scale 0.25 (round half to even), and one
    value whose code at scale 0.0371, zero point 3 is 33 computed with one rounding (fmaf), 34 with two."""
    g = torch.Generator().manual_seed(len(shape))
    x = torch.randn(shape, generator=g) * 40
    x.view(-1)[::3] = (torch.arange(0, x.numel(), 3) % 200 - 100).float() * 0.125 + 0.125
    x.view(-1)[1] = 1.1315498352050781
    return x.to(dtype)


def node(x: torch.Tensor, qdtype: str, scale: float, multiplier, level: str) -> NodeContext:
    op = get_op("quantize")
    attrs = op.parse_attrs({"scale": scale, "zero_point": ZERO_POINT[qdtype], "dtype": qdtype})
    specs = (TensorSpec.of(x),) if multiplier is None else (TensorSpec.of(x), TensorSpec.of(multiplier))
    return NodeContext(op="quantize", attrs=attrs, constants=(None,) if multiplier is None else (None, multiplier),
                       input_specs=specs, output_specs=tuple(op.infer(specs, attrs)), device="cpu", isa=level)


def multiplier_for(x: torch.Tensor) -> torch.Tensor:
    """Per last-axis channel, as the quantize pass stores it: 1 / (smooth * scale), here ~1.3 to 4.

    Channel 0 meets x = 20.375 (set in x there): the exact product is 33.4999987, 33.5 in float32, so
    round(float32 product) + zp (the kernel) and round(float32(product + zp)) differ by one code."""
    g = torch.Generator().manual_seed(7)
    multiplier = 1.0 / ((torch.rand(x.shape[-1], generator=g) + 0.5) * 0.5)
    multiplier[0] = 1.6441717147827148
    x[..., 0] = 20.375
    return multiplier


REFERENCE = QuantizeOp.reference  # bound now: unaffected by the spy below


def reference(ctx: NodeContext, inputs) -> torch.Tensor:
    return REFERENCE(list(inputs), ctx.attrs, {})


@pytest.fixture
def fallbacks(monkeypatch) -> list:
    """Records each call of QuantizeOp.reference (what a kernel runs when it falls back)."""
    calls = []

    def spy(inputs, attrs, dims):
        calls.append(inputs[0].shape)
        return REFERENCE(inputs, attrs, dims)

    monkeypatch.setattr(QuantizeOp, "reference", staticmethod(spy))
    return calls


def assert_same(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got, want), f"{(got != want).sum().item()} codes differ"


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("qdtype", list(ZERO_POINT))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_per_tensor_bit_exact(dtype, qdtype, shape, level, fallbacks):
    x = values(SHAPES[shape], dtype)
    if shape.endswith("channels-last"):
        x = x.contiguous(memory_format=CL)
    for scale in (0.25, 0.0371):
        ctx = node(x, qdtype, scale, None, level)
        kernel = resolve_kernel(ctx)
        assert kernel.name == f"native:quantize@{native.kernel_level('quantize', level)}"
        got = kernel.fn([x], {})
        assert not fallbacks  # computed natively, channels-last included
        assert_same(got, reference(ctx, [x]))
        assert got.is_contiguous(memory_format=CL if shape.endswith("channels-last") else torch.contiguous_format)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("shape", ["2d", "3d", "4d"])
@pytest.mark.parametrize("qdtype", list(ZERO_POINT))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_multiplier_bit_exact(dtype, qdtype, shape, level, fallbacks):
    x = values(SHAPES[shape], dtype)
    multiplier = multiplier_for(x)
    ctx = node(x, qdtype, 0.0371, multiplier, level)
    kernel = resolve_kernel(ctx)
    assert kernel.name == f"native:quantize@{native.kernel_level('quantize_last_axis', level)}"
    assert kernel.consumed_inputs == {1}
    got = kernel.fn([x, None], {})
    assert not fallbacks
    assert_same(got, reference(ctx, [x, multiplier]))


def test_multiplier_with_channels_last_spec_runs_the_reference():
    """The multiplier runs along the last (W) axis; the NHWC view would put C there instead."""
    x = values(SHAPES["4d"], torch.float32).contiguous(memory_format=CL)
    multiplier = multiplier_for(x)
    ctx = node(x, "uint8", 0.0371, multiplier, LEVELS[-1])
    kernel = resolve_kernel(ctx)
    assert kernel.name == "reference:quantize"
    assert_same(kernel.fn([x, multiplier], {}), reference(ctx, [x, multiplier]))


@pytest.mark.parametrize("multiplied", [False, True], ids=["per-tensor", "multiplier"])
def test_other_layout_at_run_time_runs_the_reference(multiplied, fallbacks):
    """Built for a contiguous input, handed a transposed view or a channels-last tensor."""
    x = values(SHAPES["4d"], torch.float32)
    multiplier = multiplier_for(x) if multiplied else None
    ctx = node(x, "int8", 0.0371, multiplier, LEVELS[-1])
    kernel = resolve_kernel(ctx)
    assert kernel.name.startswith("native:quantize@")
    # channels-last is dense (the NHWC view serves it) only without a multiplier
    others = {"transposed": x.transpose(1, 3).contiguous().transpose(1, 3),
              "channels-last": x.contiguous(memory_format=CL)}
    for layout, other in others.items():
        got = kernel.fn([other, None], {})
        assert len(fallbacks) == (0 if layout == "channels-last" and not multiplied else 1), layout
        fallbacks.clear()
        assert_same(got, reference(ctx, [other, multiplier]))
