"""sigmoid: aten.sigmoid.default, one tensor in, no attrs."""
from ._elementwise import to_unary
from ._registry import maps_to

maps_to("sigmoid", "aten.sigmoid.default")(to_unary)
