"""add: element-wise binary op with broadcasting (a python-number operand becomes an attribute)."""
import torch

from ..opdef import register_op
from ._elementwise import binary_op

AddOp = register_op(binary_op("add", torch.add))
