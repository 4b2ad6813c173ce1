"""sdpa: scaled_dot_product_attention without dropout (dropout: Unconvertible)."""
from ._registry import Args, Converted, Unconvertible, maps_to


@maps_to("sdpa", "aten.scaled_dot_product_attention.default")
def to_sdpa(target: str, args: Args) -> Converted:
    if args.get("dropout_p", 0.0):
        raise Unconvertible("attention dropout")
    scale = args.get("scale")
    attrs = {"scale": None if scale is None else float(scale), "is_causal": bool(args.get("is_causal", False)),
             "enable_gqa": bool(args.get("enable_gqa", False))}
    return [args["query"], args["key"], args["value"], args.get("attn_mask")], attrs
