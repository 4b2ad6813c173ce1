"""tanh: element-wise activation."""
import torch

from ..opdef import register_op
from ._elementwise import unary_op

TanhOp = register_op(unary_op("tanh", torch.tanh))
