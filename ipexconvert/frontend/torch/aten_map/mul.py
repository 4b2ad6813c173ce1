"""mul: aten.mul.Tensor; a python-number rhs becomes the rhs_scalar attr (a number lhs leaves the call to the aten fallback)."""
from ._elementwise import to_binary
from ._registry import maps_to

maps_to("mul", "aten.mul.Tensor")(to_binary)
