"""matmul: torch.matmul and the 2-D/3-D products it is made of (mm, bmm name the rhs mat2)."""
from ._registry import Args, Converted, maps_to


@maps_to("matmul", "aten.matmul.default", "aten.bmm.default", "aten.mm.default")
def to_matmul(target: str, args: Args) -> Converted:
    return [args["self"], args.get("other", args.get("mat2"))], {}
