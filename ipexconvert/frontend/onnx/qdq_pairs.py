"""QuantizeLinear -> DequantizeLinear pairs on activations become one fake-quantize call.

A QDQ model (ONNX Runtime's or NNCF's quantizers) marks each int8 activation with a Q -> DQ pair of
one per-tensor scale and zero point. Traced as two ONNX ops' arithmetic, the pair would be a dozen
ATen calls no pass could read the scale back from; as one call of our own torch op
(frontend/torch/custom_ops.py) it is one `fake_quantize` IR node holding the scale, zero point and
code type, which an int8 conversion reads as that activation's range (quant/model_ranges.py) and an
fp32 one runs as it is.
Weight DQs (over int8 initializers) stay plain DequantizeLinear: constant folding makes them float
weights, which the int8 conversion quantizes per output channel again.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..torch import custom_ops
from .ops import OnnxNode, Unconvertible
from .values import Const, tensor

_CODE_RANGE = {torch.uint8: (0, 255), torch.int8: (-128, 127)}
_NORMAL = (float(torch.finfo(torch.float32).tiny), float(torch.finfo(torch.float32).max))  # what fake_quantize takes


def _per_tensor(value) -> Optional[list]:
    """The numbers of a one-element constant, else None."""
    return value.numbers if isinstance(value, Const) and len(value.numbers) == 1 else None


def _params(node, constants: dict) -> Optional[tuple[float, int, torch.dtype]]:
    """(scale, zero point, code dtype) of a Q or DQ node with constant per-tensor parameters."""
    inputs = list(node.input)
    if len(inputs) < 2 or any(a.name in ("block_size", "output_dtype") and a.i for a in node.attribute):
        return None
    scale = _per_tensor(constants.get(inputs[1]))
    if scale is None or constants[inputs[1]].tensor.dtype != torch.float32 or not _NORMAL[0] <= scale[0] <= _NORMAL[1]:
        return None  # an inf, zero or subnormal scale (quantizers write them for -inf masks) stays arithmetic
    if len(inputs) < 3 or not inputs[2]:
        return float(scale[0]), 0, torch.uint8
    zero = constants.get(inputs[2])
    if _per_tensor(zero) is None or zero.tensor.dtype not in _CODE_RANGE:
        return None
    return float(scale[0]), int(zero.numbers[0]), zero.tensor.dtype


def fake_quantize_pair(view: OnnxNode, inputs: list):
    """The pair's float result, x -> fake_quantize(x) (inputs: the Q node's x, scale, zero point)."""
    for name in ("axis", "saturate", "block_size", "output_dtype", "precision"):
        view.attr(name)  # checked by the pairing (per tensor, no block size, no output_dtype)
    x = tensor(inputs[0])
    if x.dtype != torch.float32:
        raise Unconvertible(f"fake-quantizing {x.dtype} (float32 activations only)")
    scale = float(inputs[1].numbers[0])
    zero = int(inputs[2].numbers[0]) if len(inputs) > 2 and inputs[2] is not None else 0
    dtype = inputs[2].tensor.dtype if len(inputs) > 2 and inputs[2] is not None else torch.uint8
    lo, hi = _CODE_RANGE[dtype]
    return custom_ops.fake_quantize(x, scale, zero, lo, hi)


def pair_fake_quantize(nodes: list, constants: dict, graph_outputs: list[str], opset: int) -> list:
    """`nodes` (the interpreter's entries: view, run, inputs, outputs, proto) with each DQ that reads a
    Q of the same per-tensor scale and zero point replaced by a fake-quantize entry over the Q's input.
    A Q whose codes nothing else reads (no other node, not a graph output) is dropped."""
    producer = {out: entry for entry in nodes for out in entry[3]}
    readers: dict[str, int] = {name: 1 for name in graph_outputs}  # a graph output is read by the caller
    for entry in nodes:
        for name in entry[2]:
            readers[name] = readers.get(name, 0) + 1
    paired: dict[int, int] = {}  # id(Q entry) -> DQs rewritten
    out = []
    for entry in nodes:
        view, run, in_names, out_names, proto = entry
        q = producer.get(in_names[0]) if proto.op_type == "DequantizeLinear" and in_names else None
        if q is None or q[4].op_type != "QuantizeLinear" or q[2][0] in constants:
            out.append(entry)
            continue
        params = _params(q[4], constants)
        if params is None or params != _params(proto, constants):
            out.append(entry)
            continue
        out.append((OnnxNode.of(q[4], opset), fake_quantize_pair, list(q[2]), out_names, proto))
        paired[id(q)] = paired.get(id(q), 0) + 1
    return [e for e in out if not (id(e) in paired and paired[id(e)] == readers.get(e[3][0], 0))]
