"""What onednn_direct_conv2d.py and onednn_direct_qconv2d.py share: which post-ops the direct oneDNN convolution
fuses, and the kernel (channels-last output allocated here, or the residual's buffer reused)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

from .. import onednn_direct
from ._in_situ import InSitu
from ....ir.dims import same
from ....ir.postops import PostOp
from ....ir.spec import TensorSpec
from ....runtime.bound_plan import buffer
from ....runtime.kernels import Kernel


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


def check_conv_constants(ctx, kernel: str, bias_slot: int, scales_slot: Optional[int] = None) -> None:
    """The weight [O, C, kh, kw] (groups 1), the bias and the scales [O] as the specs declare them, C the
    input's channels and O the output's (onednn_direct.check_constant)."""
    x, out, weight = ctx.input_specs[0], ctx.output_specs[0], ctx.constants[1]
    out_channels, in_channels = onednn_direct.static(out.shape[1]), onednn_direct.static(x.shape[1])
    kernel_hw = list(weight.shape[2:]) if weight.dim() == 4 else [None, None]
    onednn_direct.check_constant(kernel, ctx, 1, "weight", [out_channels, in_channels, *kernel_hw])
    channels = [weight.shape[0]]
    for slot, what in ((bias_slot, "bias"), (scales_slot, "w_scales")):
        if slot is not None and ctx.input_specs[slot] is not None:
            onednn_direct.check_constant(kernel, ctx, slot, what, channels)


def spatial_out_size(h: int, w: int, attrs, kernel: tuple[int, int], clamp: bool = False) -> tuple[int, int]:
    """(oh, ow) of a conv or pooling with attrs.stride / padding / dilation (what infer() states symbolically);
    clamp: at least 0 (an input smaller than the window has no output positions; the kernel says so)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, attrs.stride, attrs.padding, attrs.dilation
    oh, ow = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    return (max(oh, 0), max(ow, 0)) if clamp else (oh, ow)


SIDE_BY_SIDE_MAX_WIDTH = 8  # output widths up to which a batch's images may run side by side (14: 1.3 x slower)


def shape_choice(conv, weight_shape: torch.Size, attrs) -> InSitu:
    """How a layer hands an input shape to oneDNN, as its first calls in the model measure faster (native/dnnl/conv.h;
    `_in_situ.py`'s blocks, keyed by the input shape): as it is, or

    - a 1x1 unpadded layer at batch 1: each image's rows folded into 2 images (`Conv::folds`; odd output rows: as
      it is both ways). Measured on the AMX Xeon VM, 2 threads, ResNet-50's bf16 1x1 layers: 256 -> 1024 at 14x14
      61 -> 35 us folded, 64 -> 256 at 56x56 75 -> 65; int8 mostly 0.7-0.95 x, a few 1.05 x (so measured, not
      assumed). A oneDNN matmul over the rows won at 7x7 on hot weights (52 -> 42 us) but lost with the weights
      streamed as in the model (129 -> 149 us; in the model 1.2-1.3 x): not offered;
    - a 1x1 unpadded layer on 2 images or more: the images' rows stacked as one image (`Conv::stacks`, the bytes as
      they are): at 7x7, batch 16, 0.77-0.82 x (bf16 and int8), batch 4 0.64; at 14x14 0.90-0.97, 56x56 1.01;
    - a larger kernel on 2 images or more whose outputs are at most SIDE_BY_SIDE_MAX_WIDTH wide: the images side by
      side as one (`Conv::side_by_side`), so oneDNN's row blocks hold more than one image's few pixels. bf16 3x3 512
      at 7x7, batch 16: 1.95 -> 1.73 ms, stride 2 from 14x14 3.10 -> 2.06, batch 4 0.52 -> 0.36; an int8 one with
      a residual 1.12 x (so measured); 1x1 layers 1.08-1.18 x and 14x14 outputs 1.3 x (not offered).

    float32 gained from neither (its convolutions split their work well): the callers offer this for bf16 and int8."""
    _, _, kh, kw = weight_shape
    pointwise = (kh, kw) == (1, 1) and tuple(attrs.padding) == (0, 0)
    ways: dict[tuple, dict] = {}  # input shape -> run()'s keywords for the second way ({}: as it is)

    def second_way(shape: torch.Size) -> dict:
        if shape not in ways:
            n, _, h, w = shape
            if len(ways) >= 64:  # many input sizes: keep the memo small
                ways.clear()
            if pointwise:
                way = ({"fold": 2} if conv.folds(2, h) else {}) if n == 1 else ({"stack": True} if conv.stacks(h) else {})
            else:
                out_w = spatial_out_size(h, w, attrs, (kh, kw))[1]
                way = {"side_by_side": True} if n >= 2 and 0 < out_w <= SIDE_BY_SIDE_MAX_WIDTH else {}
            ways[shape] = way
        return ways[shape]

    return ShapeChoice(conv.run, lambda x, out: conv.run(x, out, **second_way(x.shape)), key_of=lambda shape: shape,
                       second_way=second_way)


class ShapeChoice(InSitu):
    """shape_choice's InSitu, which also says the run() keywords its choice for a shape settled on."""

    def __init__(self, *args, second_way: Callable[[torch.Size], dict], **kwargs):
        super().__init__(*args, **kwargs)
        self.second_way = second_way

    def keywords(self, shape: torch.Size) -> Optional[dict]:
        """run()'s keywords for an input of this shape once its choice is made, else None (still measuring)."""
        chose_first = self.choices.get(shape)
        return None if chose_first is None else {} if chose_first else self.second_way(shape)


def conv_kernel(conv, weight_shape: torch.Size, attrs, out_dtype: torch.dtype, out_spec: TensorSpec,
                sum_operand: Optional[int], name: str, consumed: frozenset[int],
                residual: Callable[[torch.Tensor], torch.Tensor] = None, measure_shapes: bool = False) -> Kernel:
    """The Kernel: x to channels-last (the layout the primitive reads), output allocated
    channels-last, then the spec's layout. With a residual summed, oneDNN adds into the output
    buffer: by default it holds a copy of the residual (which may have other readers); the
    in-place variant, which the executor picks where the residual dies here, sums into the
    residual's own buffer. `residual` turns the operand into that buffer when it is not the
    output's dtype (a uint8 residual of a float output): then there is no in-place variant.
    measure_shapes: the layer measures how it hands each input shape to oneDNN (shape_choice)."""
    out_channels, _, kh, kw = weight_shape
    contiguous_out = out_spec.memory_format != "channels_last"
    choice = shape_choice(conv, weight_shape, attrs) if measure_shapes else None
    geometry: dict[torch.Size, tuple[tuple, tuple]] = {}  # x.shape -> the output's (size, channels-last strides)

    def output_geometry(shape: torch.Size) -> tuple[tuple, tuple]:
        # empty_strided with remembered strides: 2.8 us against 4.3 us for empty(memory_format=...)
        # per call at ResNet-50 sizes, and no Python size arithmetic after the first call.
        if shape not in geometry:
            if len(geometry) >= 64:  # many input sizes (e.g. any image size): keep the memo small
                geometry.clear()
            n, _, h, w = shape
            oh, ow = spatial_out_size(h, w, attrs, (kh, kw), clamp=True)  # too small: conv.run says so
            geometry[shape] = (n, out_channels, oh, ow), (oh * ow * out_channels, 1, ow * out_channels, out_channels)
        return geometry[shape]

    def launch(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        try:
            if choice is None:
                conv.run(x, out)
            else:
                choice(x.shape, x, out)
        except (ValueError, TypeError) as e:  # a tensor that does not fit the layer (onednn_direct.py, arguments)
            raise onednn_direct.refused(name, e) from None
        return out.contiguous() if contiguous_out else out

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0].contiguous(memory_format=torch.channels_last)
        if sum_operand is not None:
            out = (residual or _channels_last_copy)(inputs[sum_operand])
        else:
            size, stride = output_geometry(x.shape)
            out = torch.empty_strided(size, stride, dtype=out_dtype)
        return launch(x, out)

    def run_in_place(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        out = inputs[sum_operand]
        if not out.is_contiguous(memory_format=torch.channels_last):
            out = _channels_last_copy(out)
        return launch(inputs[0].contiguous(memory_format=torch.channels_last), out)

    def keywords_for(x: torch.Tensor) -> Optional[dict]:
        """run()'s keywords for this input as the layer's choice settled (None: not settled, or an input the
        bound call cannot take as it is)."""
        if contiguous_out or not x.is_contiguous(memory_format=torch.channels_last):
            return None
        return {} if choice is None else choice.keywords(x.shape)

    def bind(inputs: list, dims: dict[str, int]):
        x, keywords = inputs[0], keywords_for(inputs[0])
        if keywords is None or sum_operand is not None:  # (a residual would be copied in first: not one call)
            return None
        size, stride = output_geometry(x.shape)
        out = buffer(size, out_dtype, stride)
        return conv.bind(x, out, **keywords), [out]

    def bind_in_place(inputs: list, dims: dict[str, int]):
        x, out = inputs[0], inputs[sum_operand]
        keywords = keywords_for(x)
        if keywords is None or not out.is_contiguous(memory_format=torch.channels_last):
            return None
        return conv.bind(x, out, **keywords), [out]

    in_place = None if sum_operand is None or residual is not None else (sum_operand, run_in_place)
    return Kernel(run, name, consumed, fresh_output=True, in_place=in_place, keeps_nan=False, bind=bind,
                  bind_in_place=None if in_place is None else bind_in_place)


def _channels_last_copy(t: torch.Tensor) -> torch.Tensor:
    return t.clone(memory_format=torch.channels_last)
