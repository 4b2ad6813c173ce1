"""quantize_weight: symmetric int8, one scale per output channel (absmax / 127), on hand-computed cases."""
from __future__ import annotations

import torch

from ipexconvert.quant.weights import quantize_weight


def test_per_channel_scales_and_codes():
    w = torch.tensor([[1.0, -0.3, 0.25],
                      [-254.0, 127.0, 63.5],
                      [0.005, 0.0, -0.02]])

    q, scales = quantize_weight(w)

    assert q.dtype == torch.int8 and scales.dtype == torch.float32 and scales.shape == (3,)
    torch.testing.assert_close(scales, torch.tensor([1 / 127, 2.0, 0.02 / 127]))
    # codes = round(w / scale), half to even: 127 / 2 = 63.5 -> 64; -0.3 * 127 = -38.1 -> -38
    assert q.tolist() == [[127, -38, 32],
                          [-127, 64, 32],
                          [32, 0, -127]]
    # Dequantized weights are within half a step of the originals, channel by channel.
    assert ((q.float() * scales[:, None] - w).abs() <= scales[:, None] / 2 + 1e-7).all()


def test_all_zero_channel_gets_a_positive_scale():
    w = torch.tensor([[0.0, 0.0], [254.0, -127.0]])

    q, scales = quantize_weight(w)

    assert scales[0] > 0 and torch.isfinite(scales).all()
    assert q[0].tolist() == [0, 0]
    assert q[1].tolist() == [127, -64]  # scale 2: -127 / 2 = -63.5 -> -64 (half to even)


def test_conv_weights_one_scale_per_output_channel():
    w = torch.zeros(2, 3, 2, 2)
    w[0, 1, 1, 0] = -254.0  # channel 0: absmax 254 (scale 2), zeros except two values
    w[0, 2, 0, 1] = 101.0
    w[1] = torch.linspace(-1, 0.5, 12).reshape(3, 2, 2)  # channel 1: absmax 1

    q, scales = quantize_weight(w)

    assert q.shape == w.shape and q.dtype == torch.int8
    torch.testing.assert_close(scales, torch.tensor([2.0, 1 / 127]))
    assert q[0, 1, 1, 0] == -127 and q[0, 2, 0, 1] == 50  # 101 / 2 = 50.5 -> 50 (half to even)
    assert int((q[0] != 0).sum()) == 2
    assert q[1].flatten()[0] == -127  # the channel's absmax maps to the end of the int8 range
    torch.testing.assert_close(q[1].float() * scales[1], w[1], atol=float(scales[1]) / 2, rtol=0)


def test_input_is_not_modified_and_bf16_is_accepted():
    w = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    before = w.clone()
    q32, s32 = quantize_weight(w)
    q16, s16 = quantize_weight(w.to(torch.bfloat16))

    assert torch.equal(w, before)
    assert s16.dtype == torch.float32 and q16.dtype == torch.int8
    assert (q16.int() - q32.int()).abs().max() <= 1  # bf16 rounding of the weights moves a code at most one step
