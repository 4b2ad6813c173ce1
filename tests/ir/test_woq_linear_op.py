"""woq_linear's shape rule refuses every inconsistent combination of codes, scales, zero points, bias, bits and
group size before a kernel could read them (artifacts are untrusted), and its reference is dequantize-then-linear
in float32. (Its reference against eager torch and its symbolic rule: tests/ir/test_ops.py.)"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from pydantic import ValidationError

from ipexconvert.ir import Graph, Node, TensorSpec, get_op
from ipexconvert.ir.graph import check_graph
from ipexconvert.ir.opdef import SpecError
from ipexconvert.ir.ops.woq_linear import dequantize, round_rows_to_int8, unpack_int4
from ipexconvert.ir.spec import DimRange
from ipexconvert.ir.validate import NodeError, check_nodes

OP = get_op("woq_linear")


def spec(shape, dtype="float32") -> TensorSpec:
    return TensorSpec(dtype=dtype, shape=list(shape))


def infer(x, codes, scales, zero_points=None, bias=None, bits=4, group_size=32):
    return OP.infer([x, codes, scales, zero_points, bias], OP.parse_attrs({"bits": bits, "group_size": group_size}))


def test_accepts_the_formats():
    (out,) = infer(spec(["batch", "seq", 64]), spec([48, 32], "uint8"), spec([48, 2]), spec([48, 2], "uint8"), spec([48]))
    assert out == spec(["batch", "seq", 48])
    (out,) = infer(spec([3, 64], "bfloat16"), spec([48, 64], "int8"), spec([48, 1]), bits=8, group_size=64)
    assert out == spec([3, 48], "bfloat16")


@pytest.mark.parametrize("args, message", [
    (dict(codes=spec([48, 32], "int8")), "4-bit codes is"),
    (dict(codes=spec([48, 64], "uint8"), bits=8, group_size=64), "8-bit codes is"),
    (dict(codes=spec([48, 2, 16], "uint8")), "not of rank 2"),
    (dict(codes=spec(["n", 32], "uint8")), "must be fixed integers"),
    (dict(codes=spec([0, 32], "uint8"), scales=spec([0, 2])), "empty"),
    (dict(group_size=48), "does not divide the 64 input features"),
    (dict(x=spec([2, 30]), codes=spec([48, 15], "uint8"), scales=spec([48, 6]), group_size=5), "odd"),
    (dict(scales=spec([48, 3])), "not \\[48, 2\\]"),
    (dict(scales=spec([48, 2], "bfloat16")), "the scales is"),
    (dict(scales=spec([48, "g"])), "must be fixed integers"),
    (dict(zero_points=spec([48, 2], "int8")), "the zero points is"),
    (dict(zero_points=spec([48, 1], "uint8")), "the zero points are"),
    (dict(codes=spec([48, 64], "int8"), bits=8, zero_points=spec([48, 2], "uint8")), "4-bit codes only"),
    (dict(bias=spec([47])), "the bias is"),
    (dict(bias=spec([48], "bfloat16")), "the bias is"),
    (dict(x=spec([2, 63])), "does not have the weight's 64 input features"),
    (dict(x=spec([2, "k"])), "does not have the weight's 64 input features"),
    (dict(x=spec([2, 64], "int64")), "the input is"),
])
def test_refuses_inconsistent_inputs(args, message):
    base = dict(x=spec([2, 64]), codes=spec([48, 32], "uint8"), scales=spec([48, 2]), zero_points=None, bias=None,
                bits=4, group_size=32)
    with pytest.raises(SpecError, match=message):
        infer(**{**base, **args})


@pytest.mark.parametrize("attrs", [{"bits": 2, "group_size": 32}, {"bits": 4, "group_size": 0}, {"bits": 4},
                                   {"bits": 4, "group_size": 32, "scheme": "gptq"}])
def test_refuses_bad_attrs(attrs):
    with pytest.raises(ValidationError):
        OP.parse_attrs(attrs)


def test_a_graph_with_a_bad_node_is_refused_at_load():
    values = {"x": spec(["batch", 64]), "q": spec([48, 32], "uint8"), "s": spec([48, 3]), "y": spec(["batch", 48])}
    node = Node(name="proj", op="woq_linear", inputs=["x", "q", "s", None, None], outputs=["y"],
                attrs={"bits": 4, "group_size": 32})
    graph = Graph(inputs=["x"], outputs=["y"], nodes=[node], values=values, constants=["q", "s"],
                  dims={"batch": DimRange(min=1, max=8)})
    check_graph(graph)
    with pytest.raises(NodeError, match="woq_linear"):
        check_nodes(graph)


def test_reference_is_dequantize_then_float32_linear():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 16, generator=g)
    codes = torch.randint(0, 256, (5, 8), generator=g, dtype=torch.uint8)
    scales = torch.rand(5, 2, generator=g)
    zero = torch.randint(0, 16, (5, 2), generator=g, dtype=torch.uint8)
    q = unpack_int4(codes)
    assert torch.equal(q[:, 0], codes[:, 0] & 15) and torch.equal(q[:, 1], codes[:, 0] >> 4)
    w = (q.float() - zero.float().repeat_interleave(8, 1)) * scales.repeat_interleave(8, 1)
    assert torch.equal(dequantize(codes, scales, zero, 4, 8), w)
    assert torch.equal(dequantize(codes, scales, None, 4, 8), (q.float() - 8) * scales.repeat_interleave(8, 1))
    got = OP.reference([x, codes, scales, zero, None], OP.parse_attrs({"bits": 4, "group_size": 8}), {})
    assert torch.equal(got, F.linear(x, w))


def test_int8_activations_round_each_row_half_to_even_then_compute():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 16, generator=g)
    x[1] = 0.0  # a row of zeros: scale 1, all codes 0
    x[2, :2] = torch.tensor([127.0, 0.5])  # xs = 1 exactly: 0.5 is a tie, rounded to even (0)
    codes = torch.randint(0, 256, (5, 8), generator=g, dtype=torch.uint8)
    scales = torch.rand(5, 1, generator=g)
    rows = round_rows_to_int8(x)
    assert torch.equal(rows[1], torch.zeros(16)) and rows[2, 1] == 0.0
    assert torch.equal(rows[2, 2:], x[2, 2:].round())  # xs = 127 / 127: the other values to their nearest integer
    attrs = OP.parse_attrs({"bits": 4, "group_size": 16, "activations": "int8"})
    got = OP.reference([x, codes, scales, None, None], attrs, {})
    assert torch.equal(got, F.linear(rows, dequantize(codes, scales, None, 4, 16)))
    int8_codes = torch.randint(-127, 128, (5, 16), generator=g, dtype=torch.int8)  # 8-bit weights round x the same way
    attrs8 = OP.parse_attrs({"bits": 8, "group_size": 16, "activations": "int8"})
    assert OP.infer([spec([2, 16]), spec([5, 16], "int8"), spec([5, 1]), None, None], attrs8)[0].shape == [2, 5]
    got8 = OP.reference([x, int8_codes, scales, None, None], attrs8, {})
    assert torch.equal(got8, F.linear(rows, dequantize(int8_codes, scales, None, 8, 16)))
