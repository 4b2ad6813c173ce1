"""relu: element-wise activation."""
import torch

from ..opdef import register_op
from ._elementwise import unary_op

ReluOp = register_op(unary_op("relu", torch.relu))
