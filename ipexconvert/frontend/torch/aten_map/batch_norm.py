"""batch_norm: inference-mode batch norm (training mode: Unconvertible)."""
from ._registry import Args, Converted, Unconvertible, maps_to


@maps_to("batch_norm", "aten._native_batch_norm_legit_no_training.default", "aten.batch_norm.default")
def to_batch_norm(target: str, args: Args) -> Converted:
    if target == "aten.batch_norm.default" and args["training"]:
        raise Unconvertible("training-mode batch norm")
    return [args["input"], args["weight"], args["bias"], args["running_mean"], args["running_var"]], {"eps": float(args["eps"])}
