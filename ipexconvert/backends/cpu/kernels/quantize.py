"""Native quantize (float32/bfloat16 -> uint8/int8), per tensor or with per-channel multipliers.

Channels-last 4-D activations are quantized through their NHWC view (element-wise, so any
dense layout works and the output keeps the input's layout, which the int8 conv wants). With
memory_format "channels_last" an NCHW input is quantized and laid out channels-last in one pass
(the to_channels_last kernel, same codes).
"""
from __future__ import annotations

import functools

import torch

from .. import native_lib
from ....ir.opdef import get_op
from ....ir.ops._quant import QTORCH
from ....runtime import kernels
from ....runtime.bound_plan import buffer
from ....runtime.kernels import Kernel, NodeContext
from . import _native, _runs_at


@kernels.register_kernel("cpu", "quantize", runs_at=_runs_at.native)
def native_quantize(ctx: NodeContext):
    """Native quantize per tensor, or quantize_last_axis with SmoothQuant's per-channel multiplier; with
    memory_format channels_last, to_channels_last in one pass."""
    x = ctx.input_specs[0]
    if ctx.device != "cpu" or not native_lib.available() or x.dtype not in _native.DTYPES or ctx.constants[0] is not None:
        return None
    a = ctx.attrs
    qdtype = QTORCH[a.dtype]
    has_multiplier = len(ctx.input_specs) > 1 and ctx.input_specs[1] is not None
    if has_multiplier and (ctx.constants[1] is None or x.memory_format != "contiguous" or a.memory_format):
        return None
    reference = get_op(ctx.op).compile(a)
    multiplier = ctx.constants[1].float().contiguous() if has_multiplier else None
    # Call the extension directly with the parameters converted once (the wrapper's checks
    # would run on every call).
    lib, isa = native_lib.raw, ctx.isa
    scale = torch.tensor([a.scale], dtype=torch.float32)
    zero_point = torch.tensor([a.zero_point], dtype=torch.int32)

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        # The multiplier runs along the last axis: the NHWC view of a channels-last x would move it.
        view = _native.dense_view(inputs[0]) if multiplier is None or inputs[0].is_contiguous() else None
        if view is None:  # the multiplier is consumed (passed as None): give the reference ours
            return reference(inputs if multiplier is None else [inputs[0], multiplier], dims)
        dense, undo = view
        q = torch.empty(dense.shape, dtype=qdtype)
        if multiplier is None:
            lib.quantize(dense, scale, zero_point, False, q, isa, torch.get_num_threads())
        else:
            lib.quantize_last_axis(dense, multiplier, a.zero_point, q, isa, torch.get_num_threads())
        return undo(q)

    def run_to_channels_last(inputs: list, dims: dict[str, int], check_finite: bool = False) -> torch.Tensor:
        x = inputs[0]
        if _native.strictly_nchw(x):  # NCHW in, channels-last codes out, one pass
            return _native.to_channels_last(x, qdtype, isa, a.scale, a.zero_point, check_finite=check_finite)
        if x.is_contiguous(memory_format=torch.channels_last):
            return run(inputs, dims)  # keeps the layout
        return reference(inputs, dims)

    def bind(inputs: list, dims: dict[str, int]):
        view = _native.dense_view(inputs[0]) if multiplier is None else None
        if view is None:
            return None
        dense, undo = view
        q = buffer(dense.shape, qdtype)
        return functools.partial(lib.quantize, dense, scale, zero_point, False, q, isa, torch.get_num_threads()), [undo(q)]

    name = _native.kernel_name("quantize", "quantize", ctx.isa)
    if a.memory_format:
        return Kernel(run_to_channels_last, name, checked_fn=_native.checked_in_the_pass(run_to_channels_last))
    return Kernel(run, name, frozenset({1}) if has_multiplier else frozenset(), bind=bind)
