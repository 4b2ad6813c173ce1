"""silu: element-wise activation."""
import torch

from ..opdef import register_op
from ._elementwise import unary_op

SiluOp = register_op(unary_op("silu", torch.nn.functional.silu))
