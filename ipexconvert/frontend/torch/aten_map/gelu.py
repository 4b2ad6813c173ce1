"""gelu: exact or tanh-approximated, as the call says."""
from ._registry import Args, Converted, maps_to


@maps_to("gelu", "aten.gelu.default")
def to_gelu(target: str, args: Args) -> Converted:
    return [args["self"]], {"approximate": args.get("approximate", "none")}
