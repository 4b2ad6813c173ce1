"""rms_norm: weight or None, eps or None (torch's default then)."""
from ._registry import Args, Converted, maps_to


@maps_to("rms_norm", "aten.rms_norm.default")
def to_rms_norm(target: str, args: Args) -> Converted:
    eps = args.get("eps")
    return [args["input"], args.get("weight")], {"normalized_shape": [int(s) for s in args["normalized_shape"]],
                                                  "eps": None if eps is None else float(eps)}
