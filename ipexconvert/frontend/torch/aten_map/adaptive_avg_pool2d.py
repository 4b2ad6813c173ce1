"""adaptive_avg_pool2d: a one-number output size is square."""
from ._registry import Args, Converted, maps_to


@maps_to("adaptive_avg_pool2d", "aten.adaptive_avg_pool2d.default")
def to_adaptive_avg_pool2d(target: str, args: Args) -> Converted:
    size = args["output_size"]
    return [args["self"]], {"output_size": [int(s) for s in size] * (2 if len(size) == 1 else 1)}
