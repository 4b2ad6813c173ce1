"""sdpa: scaled_dot_product_attention without dropout (dropout: Unconvertible).

torch broadcasts the batch dims of q, k and v: k and v with one head beside a query of many (multi-query
attention written without `enable_gqa`, as Falcon does) is grouped-query attention with one kv head, and is
recorded as that, so every kernel reads the one head for all query heads."""
from ._registry import Args, Converted, Unconvertible, maps_to


def _heads(node) -> object:
    """Dim 1 of a 4-D tensor argument as traced (an int, or a symbol), None when unknown."""
    value = getattr(node, "meta", {}).get("val")
    shape = getattr(value, "shape", None)
    return shape[1] if shape is not None and len(shape) == 4 else None


def _one_shared_kv_head(args: Args) -> bool:
    q, k, v = (_heads(args[name]) for name in ("query", "key", "value"))
    return k == 1 and v == 1 and q is not None and not (isinstance(q, int) and q == 1)


@maps_to("sdpa", "aten.scaled_dot_product_attention.default")
def to_sdpa(target: str, args: Args) -> Converted:
    if args.get("dropout_p", 0.0):
        raise Unconvertible("attention dropout")
    scale = args.get("scale")
    attrs = {"scale": None if scale is None else float(scale), "is_causal": bool(args.get("is_causal", False)),
             "enable_gqa": bool(args.get("enable_gqa", False)) or _one_shared_kv_head(args)}
    return [args["query"], args["key"], args["value"], args.get("attn_mask")], attrs
