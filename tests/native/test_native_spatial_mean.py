"""The spatial_mean kernel (global average pooling) at every ISA level this machine runs, against
torch's adaptive_avg_pool2d(x, 1): float32 and bfloat16, NCHW-contiguous and channels-last inputs,
channel counts around the kernel's 256-channel block, one pixel and odd pixel counts; the
registered adaptive_avg_pool2d kernel and its fallbacks; errors."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import native_ops as native
from ipexconvert.ir.opdef import get_op
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.runtime.kernels import NodeContext, resolve_kernel
from native_cases import THRESHOLDS, normalised_error

pytestmark = pytest.mark.skipif(not native.available(), reason="ipexconvert._native is not built")
LEVELS = native.supported_levels() if native.available() else []
CL = torch.channels_last
SHAPES = [(2, 3, 5, 7), (1, 1, 1, 1), (2, 257, 3, 3), (1, 600, 1, 5), (3, 2048, 7, 7), (2, 16, 17, 19)]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_matches_torch(level, dtype, layout):
    g = torch.Generator().manual_seed(len(LEVELS))
    for shape in SHAPES:
        x = (torch.randn(shape, generator=g) * 3 + 1).to(dtype)
        if layout == "channels_last":
            x = x.contiguous(memory_format=CL)
        got = native.spatial_mean(x, max_isa=level, threads=2)
        want = F.adaptive_avg_pool2d(x, 1)
        assert got.shape == want.shape and got.dtype == dtype
        err = normalised_error(got, want)
        assert err <= THRESHOLDS[dtype], f"{shape} {layout} {dtype} at {level}: {err:.3g}"
        if dtype == torch.bfloat16:  # both round the float32 mean once: nearly all equal bit for bit
            same = (got.view(torch.int16) == want.view(torch.int16)).float().mean().item()
            assert same >= 0.9, f"{shape} {layout} at {level}: {same:.1%} bit-identical"


def test_kernel_has_per_level_builds():
    built = native.kernel_levels("spatial_mean")
    assert built[0] == "generic" and "avx2" in built and "avx512" in built


def test_errors():
    with pytest.raises(ValueError, match="4-D"):
        native.spatial_mean(torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match="neither contiguous nor channels-last"):
        native.spatial_mean(torch.randn(2, 3, 4, 5).transpose(1, 2))
    with pytest.raises(ValueError, match="no pixels"):
        native.spatial_mean(torch.randn(2, 3, 0, 5))
    with pytest.raises(ValueError, match=r"out \[2, 4\] must be \[2, 3\]"):
        native.raw.spatial_mean(torch.randn(2, 3, 4, 5), False, torch.empty(2, 4), None, 1)
    with pytest.raises(ValueError, match="out has dtype"):
        native.raw.spatial_mean(torch.randn(2, 3, 4, 5), False, torch.empty(2, 3, dtype=torch.bfloat16), None, 1)


@pytest.mark.parametrize("level", LEVELS)
def test_registered_kernel_and_fallbacks(level):
    x = torch.randn(2, 64, 7, 7).bfloat16().contiguous(memory_format=CL)
    op = get_op("adaptive_avg_pool2d")
    attrs = op.parse_attrs({"output_size": [1, 1]})
    specs = (TensorSpec.of(x),)
    ctx = NodeContext(op="adaptive_avg_pool2d", attrs=attrs, constants=(None,), input_specs=specs,
                      output_specs=tuple(op.infer(specs, attrs)), device="cpu", isa=level)
    kernel = resolve_kernel(ctx)
    assert kernel.name.startswith("native:adaptive_avg_pool2d@") and kernel.fresh_output
    for layout in (x, x.contiguous(), x.transpose(2, 3)):  # channels-last, NCHW, strided (the reference)
        got, want = kernel.fn([layout], {}), F.adaptive_avg_pool2d(layout, 1)
        assert got.shape == want.shape and normalised_error(got, want) <= THRESHOLDS[torch.bfloat16]
    # Other output sizes are not this kernel's.
    attrs2 = op.parse_attrs({"output_size": [2, 2]})
    ctx2 = NodeContext(op="adaptive_avg_pool2d", attrs=attrs2, constants=(None,), input_specs=specs,
                       output_specs=tuple(op.infer(specs, attrs2)), device="cpu", isa=level)
    assert resolve_kernel(ctx2).name == "reference:adaptive_avg_pool2d"
