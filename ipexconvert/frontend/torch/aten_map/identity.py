"""identity: calls that only copy or alias at inference (clone, detach, eval-mode dropout ...;
training-mode dropout: Unconvertible)."""
from ._registry import Args, Converted, Unconvertible, maps_to


@maps_to("identity", "aten.clone.default", "aten.alias.default", "aten.dropout.default",
         "aten.contiguous.default", "aten.detach.default", "aten.lift_fresh_copy.default")
def to_identity(target: str, args: Args) -> Converted:
    if target == "aten.dropout.default" and args.get("train"):
        raise Unconvertible("training-mode dropout")
    return [args.get("self", args.get("input"))], {}
