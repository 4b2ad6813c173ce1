"""The direct oneDNN layers' self-check (backends/cpu/onednn_direct.py runs it once, before the first
layer is used): a small int8 and float convolution and an int8 linear against the op references. Below
VNNI only the float convolution is checked: the int8 layers do not run there (oneDNN's u8*s8 products
saturate, off by ~100 codes measured at avx2)."""
from __future__ import annotations

import torch


def check_layers(raw, int8: bool) -> None:
    """Raises ValueError naming the first layer whose result is off (raw: the loaded ipexconvert._dnnl)."""
    _check_convolutions(raw, int8)
    if int8:
        _check_int8_linear(raw)


def _check_convolutions(raw, int8: bool) -> None:
    """A 3x3 stride-2 int8 conv with a uint8 residual sum and relu into uint8 (when int8 runs at
    this ISA level), and a float conv."""
    from ....ir.ops._quant import dequantize

    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (2, 8, 9, 7), dtype=torch.uint8, generator=g).contiguous(memory_format=torch.channels_last)
    bias = torch.randn(12, generator=g)
    if int8:
        _check_int8_convolution(raw, x, bias, g)
    xf = dequantize(x, 0.05, 7).contiguous(memory_format=torch.channels_last)
    wf = torch.randn(12, 8, 3, 3, generator=g)
    want_f = torch.nn.functional.conv2d(xf, wf, bias, (2, 1), (1, 0)).relu()
    conv = raw.Conv(wf, None, bias, (2, 1), (1, 0), (1, 1), "float32", "float32", relu=True)
    got_f = torch.empty_like(want_f, memory_format=torch.channels_last)
    conv.run(xf, got_f)
    error = ((got_f - want_f).abs().max() / want_f.abs().max()).item()
    if error > 1e-4:
        raise ValueError(f"float32 convolution relative error {error:.2e}")


def _check_int8_convolution(raw, x: torch.Tensor, bias: torch.Tensor, g: torch.Generator) -> None:
    from ....ir.ops.qconv2d import QConv2dOp

    w = torch.randint(-127, 128, (12, 8, 3, 3), dtype=torch.int8, generator=g)
    scales = torch.rand(12, generator=g) * 0.01 + 0.002
    attrs = QConv2dOp.parse_attrs({"x_scale": 0.05, "x_zero_point": 7, "stride": [2, 2], "padding": [1, 1],
                                   "output_dtype": "uint8", "output_scale": 0.1, "output_zero_point": 5,
                                   "accum_scale": 0.08, "accum_zero_point": 3,
                                   "post_ops": [{"kind": "add", "operand": 4}, {"kind": "relu"}]})
    accum = torch.randint(0, 256, (2, 12, 5, 4), dtype=torch.uint8, generator=g).contiguous(
        memory_format=torch.channels_last)
    want = QConv2dOp.reference([x, w, scales, bias, accum], attrs, {})
    conv = raw.Conv(w, scales, bias, (2, 2), (1, 1), (1, 1), "uint8", "uint8", relu=True, sum=True,
                    sum_scale=0.08, sum_zero_point=3, x_scale=0.05, x_zero_point=7, y_scale=0.1,
                    y_zero_point=5)
    got = accum.clone(memory_format=torch.channels_last)
    conv.run(x, got)
    worst = (got.int() - want.int()).abs().max().item()
    if worst > 1:
        raise ValueError(f"int8 convolution off by {worst} codes")



def _check_int8_linear(raw) -> None:
    """A qlinear with gelu and a per-feature multiplier (fold_requantize's SmoothQuant form) into uint8."""
    from ....ir.ops.qlinear import QLinearOp

    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 256, (2, 3, 40), dtype=torch.uint8, generator=g)
    w = torch.randint(-127, 128, (24, 40), dtype=torch.int8, generator=g)
    scales, bias = torch.rand(24, generator=g) * 0.01 + 0.002, torch.randn(24, generator=g)
    multiplier = 10 / (torch.rand(24, generator=g) + 0.5)  # 1 / (smoothing factor * output scale 0.1)
    attrs = QLinearOp.parse_attrs({"x_scale": 0.05, "x_zero_point": 9, "output_dtype": "uint8", "output_scale": 1.0,
                                   "output_zero_point": 4, "post_ops": [{"kind": "gelu"}, {"kind": "mul", "operand": 4}]})
    want = QLinearOp.reference([x, w, scales, bias, multiplier], attrs, {})
    linear = raw.Linear(w, scales, bias, "uint8", "uint8", post_op="gelu", multiplier=multiplier, x_scale=0.05,
                        x_zero_point=9, y_scale=1.0, y_zero_point=4)
    got = torch.empty_like(want)
    linear.run(x, got)
    worst = (got.int() - want.int()).abs().max().item()
    if worst > 1:
        raise ValueError(f"int8 linear off by {worst} codes")
