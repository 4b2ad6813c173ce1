"""The to_channels_last kernel at every ISA level this machine runs, against torch: NCHW float32 or
bfloat16 in; float32/bfloat16 out equal to x.to(dtype).contiguous(channels_last) bit for bit, int8/uint8
out equal to quantize_per_tensor's codes; 3 channels (the compile-time path) and any other count
(blocks of 64 channels, pixel counts off the 64-pixel block); the registered runtime kernels for
to_memory_format and quantize(memory_format=channels_last), and their checked_fn; check_finite (NaN and infinities
found in the same pass); errors."""
from __future__ import annotations

import pytest
import torch

import native_ops as native
from ipexconvert.ir.opdef import get_op
from ipexconvert.ir.ops._quant import quantize
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.runtime.kernels import NodeContext, resolve_kernel

pytestmark = pytest.mark.skipif(not native.available(), reason="ipexconvert._native is not built")
LEVELS = native.supported_levels() if native.available() else []
CL = torch.channels_last
# [N, C, H, W]: an image batch (C = 3), one pixel, channel counts around the 64-channel block, a
# pixel count off the 64-pixel block, and enough work to be split over threads.
SHAPES = [(2, 3, 5, 7), (1, 3, 1, 1), (1, 1, 3, 3), (2, 65, 3, 5), (1, 130, 9, 11), (3, 3, 64, 66)]


def values(shape, dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(shape, generator=g) * 5
    x.view(-1)[::7] = 0.125 * (torch.arange(0, x.numel(), 7) % 41 - 20).float()  # exact halves at scale 0.25
    return x.to(dtype)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("x_dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_float_outputs_equal_torch(level, x_dtype):
    for shape in SHAPES:
        x = values(shape, x_dtype)
        for out_dtype in (torch.float32, torch.bfloat16):
            got = native.to_channels_last(x, out_dtype, max_isa=level, threads=2)
            want = x.to(out_dtype).contiguous(memory_format=CL)
            assert got.dtype == out_dtype and got.shape == x.shape and got.is_contiguous(memory_format=CL)
            assert torch.equal(got, want), f"{shape} {x_dtype} -> {out_dtype} at {level}"


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("x_dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("qdtype,zero_point", [(torch.uint8, 129), (torch.int8, -3)], ids=["uint8", "int8"])
def test_quantized_outputs_equal_the_quantize_codes(level, x_dtype, qdtype, zero_point):
    name = "uint8" if qdtype == torch.uint8 else "int8"
    for shape in SHAPES:
        x = values(shape, x_dtype)
        for scale in (0.25, 0.0371):
            got = native.to_channels_last(x, qdtype, scale=scale, zero_point=zero_point, max_isa=level, threads=2)
            want = quantize(x, scale, zero_point, name, None).contiguous(memory_format=CL)
            assert got.is_contiguous(memory_format=CL)
            assert torch.equal(got, want), f"{shape} {x_dtype} scale {scale} at {level}: {(got != want).sum()} codes differ"


def test_kernel_has_per_level_builds():
    built = native.kernel_levels("to_channels_last")
    assert built[0] == "generic" and "avx2" in built and "avx512" in built
    for level in LEVELS:
        below = [lv for lv in built if native.levels().index(lv) <= native.levels().index(level)]
        assert native.kernel_level("to_channels_last", level) == below[-1]


def test_errors():
    x = torch.randn(2, 3, 4, 5)
    with pytest.raises(ValueError, match="4-D"):
        native.to_channels_last(torch.randn(3, 4, 5))
    with pytest.raises(ValueError, match="float32 or bfloat16"):
        native.to_channels_last(x.double())
    with pytest.raises(ValueError, match="needs a scale"):
        native.to_channels_last(x, torch.uint8)
    with pytest.raises(ValueError, match="positive and finite"):
        native.to_channels_last(x, torch.uint8, scale=0.0)
    with pytest.raises(ValueError, match="outside the torch.uint8 range"):
        native.to_channels_last(x, torch.uint8, scale=0.1, zero_point=-1)
    with pytest.raises(ValueError, match="not contiguous"):
        native.to_channels_last(x.transpose(2, 3))
    with pytest.raises(ValueError, match=r"must be x \[2, 3, 4, 5\] as \[N, H, W, C\]"):
        native.raw.to_channels_last(x, torch.empty(2, 3, 4, 5), 1.0, 0, None, 1)


def context(op: str, x: torch.Tensor, level: str, **attrs) -> NodeContext:
    definition = get_op(op)
    parsed = definition.parse_attrs(attrs)
    specs = (TensorSpec.of(x),)
    return NodeContext(op=op, attrs=parsed, constants=(None,), input_specs=specs,
                       output_specs=tuple(definition.infer(specs, parsed)), device="cpu", isa=level)


@pytest.mark.parametrize("level", LEVELS)
def test_runtime_to_memory_format_runs_the_kernel_and_keeps_other_layouts(level):
    x = values((2, 3, 6, 7), torch.float32)
    kernel = resolve_kernel(context("to_memory_format", x, level, memory_format="channels_last", dtype="bfloat16"))
    assert kernel.name.startswith("native:to_memory_format@")
    want = x.bfloat16().contiguous(memory_format=CL)
    got = kernel.fn([x], {})
    assert got.is_contiguous(memory_format=CL) and torch.equal(got, want)
    # Already channels-last, or strided: the reference, same values.
    for other in (x.contiguous(memory_format=CL), x.transpose(2, 3).contiguous().transpose(2, 3)):
        got = kernel.fn([other], {})
        assert got.is_contiguous(memory_format=CL) and torch.equal(got, want)
    # Without a dtype the values stay float32.
    plain = resolve_kernel(context("to_memory_format", x, level, memory_format="channels_last"))
    assert torch.equal(plain.fn([x], {}), x.contiguous(memory_format=CL))


@pytest.mark.parametrize("level", LEVELS)
def test_runtime_quantize_lays_out_an_nchw_input_channels_last(level):
    x = values((2, 3, 6, 7), torch.float32)
    kernel = resolve_kernel(context("quantize", x, level, scale=0.0371, zero_point=129, dtype="uint8",
                                    memory_format="channels_last"))
    assert kernel.name.startswith("native:quantize@")
    want = quantize(x, 0.0371, 129, "uint8", None).contiguous(memory_format=CL)
    for layout in (x, x.contiguous(memory_format=CL), x.transpose(2, 3).contiguous().transpose(2, 3)):
        got = kernel.fn([layout], {})
        assert got.is_contiguous(memory_format=CL) and torch.equal(got, want)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("x_dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_check_finite_finds_every_nan_and_infinity(level, x_dtype):
    """check_finite says whether x holds a NaN or an infinity, wherever it sits (first or last value, a 64-pixel
    block's tail, a channel past the first 64), and the output is the unchecked one's bits either way."""
    for shape in ((2, 3, 5, 7), (1, 130, 9, 11), (3, 3, 64, 66)):
        x = values(shape, x_dtype)
        for out in (dict(dtype=torch.bfloat16), dict(dtype=torch.uint8, scale=0.25, zero_point=3)):
            plain = native.to_channels_last(x, max_isa=level, threads=2, **out)
            got, finite = native.to_channels_last(x, max_isa=level, threads=2, check_finite=True, **out)
            assert finite and torch.equal(got, plain)
            big = torch.finfo(x_dtype).max  # the largest finite value is finite
            y = x.clone()
            y.view(-1)[-1] = big
            assert native.to_channels_last(y, max_isa=level, threads=2, check_finite=True, **out)[1]
            for bad in (float("nan"), float("inf"), -float("inf")):
                for where in (0, x.numel() - 1, x.numel() // 2 + 1):
                    y = x.clone()
                    y.view(-1)[where] = bad
                    got, finite = native.to_channels_last(y, max_isa=level, threads=2, check_finite=True, **out)
                    assert not finite, (shape, bad, where)
                    want = native.to_channels_last(y, max_isa=level, threads=2, **out)
                    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)  # written all the same


@pytest.mark.parametrize("level", LEVELS)
def test_runtime_kernels_check_their_input_when_asked(level):
    """to_memory_format's and quantize(channels_last)'s checked_fn (Kernel.checked_fn: run where the kernel is an
    image's only reader) give fn's values for finite inputs in every layout, and raise NonFiniteInput for a NaN or
    an infinity in every layout; fn itself does not look."""
    from ipexconvert.runtime.kernels import NonFiniteInput

    x = values((2, 3, 6, 7), torch.float32)
    kernels = [resolve_kernel(context("to_memory_format", x, level, memory_format="channels_last", dtype="bfloat16")),
               resolve_kernel(context("quantize", x, level, scale=0.0371, zero_point=129, dtype="uint8",
                                      memory_format="channels_last"))]
    for kernel in kernels:
        assert kernel.checked_fn is not None
        for layout in (x, x.contiguous(memory_format=CL), x.transpose(2, 3).contiguous().transpose(2, 3)):
            assert torch.equal(kernel.checked_fn([layout], {}), kernel.fn([layout], {}))
        for bad in (float("nan"), float("inf")):
            y = x.clone()
            y[1, 2, 5, 6] = bad
            for layout in (y, y.contiguous(memory_format=CL), y.transpose(2, 3).contiguous().transpose(2, 3)):
                with pytest.raises(NonFiniteInput):
                    kernel.checked_fn([layout], {})
                kernel.fn([layout], {})  # no check
