"""silu: aten.silu.default, one tensor in, no attrs."""
from ._elementwise import to_unary
from ._registry import maps_to

maps_to("silu", "aten.silu.default")(to_unary)
