"""add: aten.add.Tensor with alpha 1; a python-number rhs becomes the rhs_scalar attr
(a number lhs, or another alpha, leaves the call to the aten fallback)."""
from ._elementwise import to_binary
from ._registry import maps_to

maps_to("add", "aten.add.Tensor")(to_binary)
