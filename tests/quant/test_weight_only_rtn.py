"""quant/weight_only.py: round-to-nearest int8 / int4 weights. The promised arithmetic (scale formulas, round half to
even on w / scale, clamping, the +8 storage of symmetric int4, the asymmetric zero point), safe scales for zero and
tiny groups, the reconstruction error, packing, the weights that stay float, and the guard's per-layer weight error."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.ir.ops.woq_linear import dequantize, unpack_int4
from ipexconvert.quant.options import WeightOnlyOptions
from ipexconvert.quant.weight_only import pack_int4, quantize_weight, unsupported_reason, weight_error

TIES = [2.5, 3.5, -2.5, -0.5, 0.5, 1.5, -1.5, 0.0]  # exact halves: round half to even gives 2, 4, -2, -0, 0, 2, -2, 0
EVEN = [2, 4, -2, 0, 0, 2, -2, 0]


def test_int8_symmetric_per_channel_rounds_half_to_even():
    w = torch.tensor([[127.0, *TIES, -127.0], [-63.5, *TIES, 0.25]])  # row 0: scale 1; row 1: scale 0.5
    q = quantize_weight(w, 8, group_size=10)
    assert q.codes.dtype == torch.int8 and q.zero_points is None and q.bits == 8
    assert q.scales.tolist() == [[1.0], [0.5]]
    assert q.codes[0].tolist() == [127, *EVEN, -127]
    assert q.codes[1].tolist() == [-127, 5, 7, -5, -1, 1, 3, -3, 0, 0]  # w / 0.5: 5, 7, -5, -1, 1, 3, -3, 0, 0.5 -> 0


def test_int4_symmetric_codes_are_stored_plus_8():
    w = torch.tensor([[7.0, *TIES, -7.0, 6.0, -6.0, 1.0, -1.0, 0.0, 2.0]])  # 16 weights, one group, scale 1
    q = quantize_weight(w, 4, group_size=16)
    assert q.codes.dtype == torch.uint8 and q.codes.shape == (1, 8) and q.zero_points is None
    assert q.scales.tolist() == [[1.0]]
    assert (unpack_int4(q.codes).int() - 8)[0].tolist() == [7, *EVEN, -7, 6, -6, 1, -1, 0, 2]


def test_int4_asymmetric_scale_zero_point_and_ties():
    w = torch.tensor([[-3.0, 12.0, 2.5, 3.5, -2.5, 0.0, 11.5, -0.5],    # span 15: scale 1, zero 3
                      [-2.5, 12.5, 1.5, 0.5, -1.5, 0.0, 12.5, -2.5]])   # scale 1, zero round(2.5) = 2 (half to even)
    q = quantize_weight(w, 4, group_size=8, symmetric=False)
    assert q.scales.tolist() == [[1.0], [1.0]] and q.zero_points.tolist() == [[3], [2]]
    codes = unpack_int4(q.codes)
    assert codes[0].tolist() == [0, 15, 5, 7, 1, 3, 15, 3]   # round(w) + 3, clamped to 15 (11.5 -> 12 + 3)
    assert codes[1].tolist() == [0, 14, 4, 2, 0, 2, 14, 0]   # round(w) + 2, clamped to 0 (-2.5 -> -2 + 2)


def test_asymmetric_range_holds_zero():
    """A group of only positive weights: lo = 0, so the zero point is 0 and nothing clips."""
    w = torch.linspace(1.0, 16.0, 16).view(1, 16)
    q = quantize_weight(w, 4, group_size=16, symmetric=False)
    assert q.zero_points.tolist() == [[0]] and q.scales.item() == pytest.approx(16.0 / 15)
    assert (dequantize(q.codes, q.scales, q.zero_points, 4, 16) - w).abs().max() <= q.scales.item() / 2 + 1e-6


@pytest.mark.parametrize("bits, symmetric", [(8, True), (4, True), (4, False)])
def test_zero_and_tiny_groups_get_safe_scales(bits, symmetric):
    w = torch.zeros(2, 64)
    w[1, 32:] = torch.randn(32) * 1e-40  # float32 denormals
    q = quantize_weight(w, bits, group_size=32, symmetric=symmetric)
    assert torch.isfinite(q.scales).all() and (q.scales >= torch.finfo(torch.float32).tiny).all()
    assert q.scales[0].tolist() == [1.0, 1.0] and q.scales[1, 0].item() == 1.0
    back = dequantize(q.codes, q.scales, q.zero_points, bits, 32)
    assert torch.isfinite(back).all() and (back[0] == 0).all() and (back[1, :32] == 0).all()


@pytest.mark.parametrize("bits, symmetric", [(8, True), (4, True), (4, False)])
@pytest.mark.parametrize("group_size", [32, 64, 128, 256])
def test_reconstruction_is_within_half_a_step(bits, symmetric, group_size):
    g = torch.Generator().manual_seed(group_size + bits)
    w = torch.randn(24, 256, generator=g) * 0.05
    q = quantize_weight(w, bits, group_size, symmetric)
    groups = 256 // group_size
    assert q.scales.shape == (24, groups) and q.codes.shape == (24, 256 if bits == 8 else 128)
    err = (dequantize(q.codes, q.scales, q.zero_points, bits, group_size) - w).abs()
    step = q.scales.repeat_interleave(group_size, 1)
    assert (err <= step / 2 * (1 + 1e-5)).all()


def test_pack_int4_puts_even_k_in_the_low_nibble():
    codes = torch.randint(0, 16, (3, 10), dtype=torch.uint8)
    packed = pack_int4(codes)
    assert packed.shape == (3, 5) and torch.equal(packed[:, 0], codes[:, 0] | (codes[:, 1] << 4))
    assert torch.equal(unpack_int4(packed), codes)


def test_weights_that_stay_float():
    assert unsupported_reason(torch.randn(4, 96), 4, 64) == "in_features not divisible by the group size"
    assert unsupported_reason(torch.randn(4, 9), 4, 9) == "odd group size for 4-bit codes"
    assert unsupported_reason(torch.randn(4, 9), 8, 9) is None
    assert unsupported_reason(torch.tensor([[1.0, float("nan")]]), 8, 2) == "non-finite weights"
    assert unsupported_reason(torch.randn(4, 8, 2), 8, 2) == "not a 2-D float weight"
    with pytest.raises(ValueError, match="not divisible"):
        quantize_weight(torch.randn(4, 96), 4, 64)
    with pytest.raises(ValueError, match="bits must be 4 or 8"):
        quantize_weight(torch.randn(4, 64), 3, 64)
    with pytest.raises(ValueError, match="symmetric"):
        quantize_weight(torch.randn(4, 64), 8, 64, symmetric=False)


def test_options_resolve_group_sizes():
    assert WeightOnlyOptions().resolved_group_size(4, 896) == 128
    assert WeightOnlyOptions().resolved_group_size(8, 896) == 896
    assert WeightOnlyOptions(group_size="channel").resolved_group_size(4, 896) == 896
    assert WeightOnlyOptions(group_size="64").resolved_group_size(8, 896) == 64  # text from a flag
    with pytest.raises(ValueError):
        WeightOnlyOptions(group_size=48)


def test_weight_error_is_against_the_typical_weight_so_outlier_groups_show():
    """The guard's ranking: an outlier per group rounds that group's other weights to zero, which RMS(error) / mean|W|
    shows and ||error|| / ||W|| (made large by the outliers themselves) would hide."""
    w = torch.randn(64, 256, generator=torch.Generator().manual_seed(0))
    plain = weight_error(w, 4, 128)
    spiked = w.clone()
    spiked[:, ::128] *= 100.0
    assert 0.1 < plain < 0.2 and weight_error(spiked, 4, 128) > 3 * plain
    assert weight_error(w, 8, 256) < plain / 10 and weight_error(torch.zeros(4, 128), 4, 128) == 0.0
