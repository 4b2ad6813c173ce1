"""embedding -> Gather along axis 0."""
from ._registry import emits


@emits("embedding")
def embedding(b, node) -> None:
    weight, ids = node.inputs[:2]
    b.node("Gather", [weight, ids], node.outputs, axis=0)
