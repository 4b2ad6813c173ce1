"""linear: input, weight and bias (None when the layer has none)."""
from ._registry import Args, Converted, maps_to


@maps_to("linear", "aten.linear.default")
def to_linear(target: str, args: Args) -> Converted:
    return [args["input"], args["weight"], args.get("bias")], {}
