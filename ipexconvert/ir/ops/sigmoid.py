"""sigmoid: element-wise activation."""
import torch

from ..opdef import register_op
from ._elementwise import unary_op

SigmoidOp = register_op(unary_op("sigmoid", torch.sigmoid))
