"""embedding: the table and the ids (padding_idx and scale_grad_by_freq only matter to training)."""
from ._registry import Args, Converted, maps_to


@maps_to("embedding", "aten.embedding.default")
def to_embedding(target: str, args: Args) -> Converted:
    return [args["weight"], args["indices"]], {}
