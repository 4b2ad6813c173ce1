"""conv2d on the GPU: cuDNN. A convolution followed by relu, or by a residual add and relu (a ResNet
block's end), runs as one cuDNN call with the bias, add and relu fused (torch.cudnn_convolution_relu /
cudnn_convolution_add_relu); other post-op chains run in torch after F.conv2d, as in the reference.
The fused calls take the bias in the activations' dtype and want channels-last operands of one dtype."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ....ir import dtypes
from ....ir.postops import apply_post_ops
from ....runtime.kernels import Kernel, NodeContext, register_kernel


def _fused_form(post_ops) -> Optional[str]:
    kinds = [(p.kind, p.operand) for p in post_ops]
    if kinds == [("relu", None)]:
        return "relu"
    if len(kinds) == 2 and kinds[0][0] == "add" and kinds[0][1] is not None and kinds[1] == ("relu", None):
        return "add_relu"
    return None


@register_kernel("cuda", "conv2d")
def torch_cuda_cudnn_conv2d(ctx: NodeContext) -> Optional[Kernel]:
    a = ctx.attrs
    weight = ctx.constants[1]
    if weight is None or (ctx.input_specs[2] is not None and ctx.constants[2] is None):
        return None
    dtype = dtypes.to_torch(ctx.input_specs[0].dtype)
    weight = weight.to(dtype).contiguous(memory_format=torch.channels_last)
    bias = None if ctx.constants[2] is None else ctx.constants[2].to(dtype)
    args = (a.stride, a.padding, a.dilation, a.groups)
    form = _fused_form(a.post_ops)
    if form is not None and ctx.input_specs[0].memory_format == "channels_last":
        if form == "add_relu" and ctx.input_specs[a.post_ops[0].operand].dtype != ctx.input_specs[0].dtype:
            form = None
    else:
        form = None
    consumed = frozenset({1} | ({2} if bias is not None else set()))

    if form == "relu":
        def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
            return torch.cudnn_convolution_relu(inputs[0], weight, bias, *args)
    elif form == "add_relu":
        operand = a.post_ops[0].operand

        def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
            residual = inputs[operand].contiguous(memory_format=torch.channels_last)
            return torch.cudnn_convolution_add_relu(inputs[0], weight, residual, 1.0, bias, *args)
    else:
        def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
            return apply_post_ops(F.conv2d(inputs[0], weight, bias, *args), a.post_ops, inputs)

    return Kernel(run, f"torch_cuda:conv2d{'_' + form if form else ''}", consumed, fresh_output=True)
