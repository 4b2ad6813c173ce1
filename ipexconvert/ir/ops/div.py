"""div: element-wise binary op with broadcasting (a python-number operand becomes an attribute)."""
import torch

from ..opdef import register_op
from ._elementwise import binary_op

DivOp = register_op(binary_op("div", torch.div))
