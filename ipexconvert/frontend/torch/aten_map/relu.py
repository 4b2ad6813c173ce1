"""relu: aten.relu.default, one tensor in, no attrs."""
from ._elementwise import to_unary
from ._registry import maps_to

maps_to("relu", "aten.relu.default")(to_unary)
