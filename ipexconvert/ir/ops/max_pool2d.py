"""max_pool2d: 2-D max pooling (values only)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict

from ..opdef import OpDef, register_op
from ._common import NonNegative2, Positive2, expect_rank, like, require, window_output_size


class MaxPool2dAttrs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kernel_size: Positive2
    stride: Positive2
    padding: NonNegative2 = [0, 0]
    dilation: Positive2 = [1, 1]


@register_op
class MaxPool2dOp(OpDef):
    name = "max_pool2d"
    Attrs = MaxPool2dAttrs

    @classmethod
    def infer(cls, inputs, attrs):
        x = inputs[0]
        expect_rank(x, (3, 4), "the input")

        def out(size, i):
            k, s, p, d = attrs.kernel_size[i], attrs.stride[i], attrs.padding[i], attrs.dilation[i]
            require(2 * p <= k, f"padding {attrs.padding} is more than half the kernel {attrs.kernel_size} (torch refuses it)")
            size = window_output_size(size, k, s, p, d)
            require(not isinstance(size, int) or size >= 1,
                    f"the kernel {attrs.kernel_size} (dilation {attrs.dilation}) does not fit the input {x.describe()} "
                    f"padded by {attrs.padding}")
            return size

        return [like(x, [*x.shape[:-2], out(x.shape[-2], 0), out(x.shape[-1], 1)]).with_(memory_format=x.memory_format)]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        x = inputs[0]
        if not x.is_floating_point() and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last):
            # torch 2.13 refuses many uint8 channels-last inputs (e.g. 1x4x16x16) with a bogus
            # "input_depth * input_height * input_width <= max" error; a max is exact in any layout.
            y = F.max_pool2d(x.contiguous(), attrs.kernel_size, attrs.stride, attrs.padding, attrs.dilation)
            return y.contiguous(memory_format=torch.channels_last)
        return F.max_pool2d(x, attrs.kernel_size, attrs.stride, attrs.padding, attrs.dilation)
