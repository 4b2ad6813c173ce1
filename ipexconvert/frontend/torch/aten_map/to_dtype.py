"""to_dtype: _to_copy and to(dtype) calls that name a dtype (a copy without one: Unconvertible)."""
from ....ir import dtypes
from ._registry import Args, Converted, Unconvertible, maps_to


@maps_to("to_dtype", "aten._to_copy.default", "aten.to.dtype")
def to_to_dtype(target: str, args: Args) -> Converted:
    dtype = args.get("dtype")
    if dtype is None:
        raise Unconvertible("to() without a dtype")
    return [args["self"]], {"dtype": dtypes.to_name(dtype)}
