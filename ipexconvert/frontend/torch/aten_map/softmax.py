"""softmax: in the input's dtype (a dtype change: Unconvertible)."""
from ._registry import Args, Converted, Unconvertible, maps_to


@maps_to("softmax", "aten._softmax.default", "aten.softmax.int")
def to_softmax(target: str, args: Args) -> Converted:
    if args.get("half_to_float") or args.get("dtype") is not None:
        raise Unconvertible("softmax with dtype change")
    return [args["self"]], {"dim": int(args["dim"])}
