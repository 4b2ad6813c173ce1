"""tanh: aten.tanh.default, one tensor in, no attrs."""
from ._elementwise import to_unary
from ._registry import maps_to

maps_to("tanh", "aten.tanh.default")(to_unary)
