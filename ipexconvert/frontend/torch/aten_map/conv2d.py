"""conv2d: 2-D convolutions with numeric padding (transposed ones, string padding and strides of
other than 2 dims: Unconvertible)."""
from __future__ import annotations

from ._registry import Args, Converted, Unconvertible, maps_to


def _pair(v) -> list[int]:
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * 2 if len(v) == 1 else v


@maps_to("conv2d", "aten.conv2d.default", "aten.convolution.default")
def to_conv2d(target: str, args: Args) -> Converted:
    if target == "aten.convolution.default" and (args["transposed"] or any(args["output_padding"])):
        raise Unconvertible("transposed convolution")
    if isinstance(args["padding"], str):
        raise Unconvertible("string padding")
    weight = getattr(args["weight"], "meta", {}).get("val")
    if len(_pair(args["stride"])) != 2 or weight is None or weight.dim() != 4:
        raise Unconvertible("not 2-D")  # conv1d's one-element stride would pass _pair: the weight's rank decides
    attrs = {
        "stride": _pair(args["stride"]),
        "padding": _pair(args["padding"]),
        "dilation": _pair(args["dilation"]),
        "groups": int(args["groups"]),
    }
    return [args["input"], args["weight"], args.get("bias")], attrs
