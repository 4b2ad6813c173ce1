"""flatten: merge start_dim..end_dim (torch's defaults 0 and -1)."""
from ._registry import Args, Converted, maps_to


@maps_to("flatten", "aten.flatten.using_ints")
def to_flatten(target: str, args: Args) -> Converted:
    return [args["self"]], {"start_dim": int(args.get("start_dim", 0)), "end_dim": int(args.get("end_dim", -1))}
