"""layer_norm: the composite and the native op (whose mean/rstd outputs the IR op does not model)."""
from ._registry import Args, Converted, maps_to


@maps_to("layer_norm", "aten.layer_norm.default", "aten.native_layer_norm.default")
def to_layer_norm(target: str, args: Args) -> Converted:
    attrs = {"normalized_shape": [int(s) for s in args["normalized_shape"]], "eps": float(args["eps"])}
    return [args["input"], args.get("weight"), args.get("bias")], attrs
