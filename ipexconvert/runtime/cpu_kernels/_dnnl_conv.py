"""What conv2d_dnnl.py and qconv2d_dnnl.py share: which post-ops the direct oneDNN convolution
fuses, and the run function (channels-last output allocated here, residual copied into it)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

from ...ir.dims import same
from ...ir.postops import PostOp
from ...ir.spec import TensorSpec


@dataclass(frozen=True)
class ConvPostOps:
    relu: bool = False
    sum_operand: Optional[int] = None  # input slot of the residual summed into the output


def fusable(post_ops: list[PostOp], operand_ok: Callable[[int], bool]) -> Optional[ConvPostOps]:
    """[], [relu], [add], [add, relu] (the add's operand shaped like the output): what the primitive fuses."""
    kinds = [p.kind for p in post_ops]
    if kinds in ([], ["relu"]):
        return ConvPostOps(relu=bool(kinds))
    if kinds in (["add"], ["add", "relu"]) and post_ops[0].operand is not None and operand_ok(post_ops[0].operand):
        return ConvPostOps(relu=len(kinds) == 2, sum_operand=post_ops[0].operand)
    return None


def same_shape(a: TensorSpec, b: TensorSpec) -> bool:
    return a.rank == b.rank and all(same(x, y) for x, y in zip(a.shape, b.shape))


def spatial_out_size(h: int, w: int, attrs, kernel: tuple[int, int]) -> tuple[int, int]:
    """(oh, ow) of a conv or pooling with attrs.stride / padding / dilation (what infer() states symbolically)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, attrs.stride, attrs.padding, attrs.dilation
    return (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1


def conv_run(conv, weight_shape: torch.Size, attrs, out_dtype: torch.dtype, out_spec: TensorSpec,
             sum_operand: Optional[int], residual: Callable[[torch.Tensor], torch.Tensor] = None):
    """The kernel function: x to channels-last (the layout the primitive reads), output allocated
    channels-last (holding a copy of the residual when one is summed: oneDNN adds into the output,
    and the residual may have other readers), then the spec's layout. `residual` turns the operand
    into that copy when a plain clone will not do (a uint8 residual of a float output)."""
    residual = residual or (lambda t: t.clone(memory_format=torch.channels_last))
    out_channels, _, kh, kw = weight_shape
    contiguous_out = out_spec.memory_format != "channels_last"

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0].contiguous(memory_format=torch.channels_last)
        n, _, h, w = x.shape
        oh, ow = spatial_out_size(h, w, attrs, (kh, kw))
        if sum_operand is None:
            out = torch.empty((n, out_channels, oh, ow), dtype=out_dtype, memory_format=torch.channels_last)
        else:
            out = residual(inputs[sum_operand])
        conv.run(x, out)
        return out.contiguous() if contiguous_out else out

    return run
