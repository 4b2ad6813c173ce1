"""reshape: view, reshape and _unsafe_view (sizes may be symbolic: export.py stores them as expressions)."""
from ._registry import Args, Converted, maps_to


@maps_to("reshape", "aten.view.default", "aten.reshape.default", "aten._unsafe_view.default")
def to_reshape(target: str, args: Args) -> Converted:
    size = args["shape"] if target == "aten.reshape.default" else args["size"]  # the schemas name it differently
    return [args["self"]], {"shape": list(size)}
