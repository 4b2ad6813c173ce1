"""ir/validate.py: each node checked against its op at load (arity, shape rule, post-op operands, output budget),
on small hand-built graphs; and every graph the converter writes for the tiny examples passes it."""
from __future__ import annotations

import typing
from typing import Optional

import pytest
import torch
import torch.nn.functional as F

import ipexconvert
from ipexconvert.artifact import read_artifact
from ipexconvert.errors import ArtifactError
from ipexconvert.ir import OPSET, Graph, Node, TensorSpec, dtypes, get_op
from ipexconvert.ir.graph import check_graph
from ipexconvert.ir.ops._common import DtypeName, FloatDtypeName
from ipexconvert.ir.ops.aten_allowlist import MAX_TENSOR_BYTES_ENV
from ipexconvert.ir.spec import DimRange
from ipexconvert.ir.validate import NodeError, check_nodes


# torch.export of transformers' Llama on torch < 2.13 (seen: 2.11 on the GPU machine's host) stops at a
# guard its solver cannot prove (min(32*seq, 64*seq) == 32*seq), and conversion fails with that message
# (a UserInputError): a limit of the older exporter, noted in docs/architecture.md.
LLAMA_EXPORTS = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                   reason="torch.export < 2.13 cannot prove a guard in transformers' Llama")


def spec(shape, dtype="float32", memory_format="contiguous") -> TensorSpec:
    return TensorSpec(dtype=dtype, shape=list(shape), memory_format=memory_format)


def graph(nodes: list[Node], values: dict[str, TensorSpec], inputs: list[str], constants: list[str] = (),
          dims: Optional[dict[str, tuple[int, int]]] = None) -> Graph:
    outputs = [nodes[-1].outputs[0]]
    return Graph(inputs=inputs, outputs=outputs, nodes=nodes, values=values, constants=list(constants),
                 dims={k: DimRange(min=lo, max=hi) for k, (lo, hi) in (dims or {}).items()})


def check(g: Graph) -> None:
    check_graph(g)  # the structural checks first, as the loader runs them
    check_nodes(g)


def refused(g: Graph, *fragments: str) -> NodeError:
    with pytest.raises(NodeError) as info:
        check(g)
    for fragment in fragments:
        assert fragment in info.value.problem, info.value.problem
    return info.value


def conv_graph(x=("batch", 3, 16, 16), w=(8, 3, 3, 3), bias: Optional[tuple] = (8,), out=("batch", 8, 16, 16),
               attrs=None, extra: Optional[dict[str, TensorSpec]] = None, inputs_of=None) -> Graph:
    values = {"x": spec(x), "w": spec(w), "y": spec(out)}
    node_inputs = ["x", "w", None]
    constants = ["w"]
    if bias is not None:
        values["b"] = spec(bias)
        node_inputs[2] = "b"
        constants.append("b")
    inputs = ["x"]
    for name, s in (extra or {}).items():
        values[name] = s
        inputs.append(name)
        node_inputs.append(name)
    node = Node(name="conv", op="conv2d", inputs=inputs_of(node_inputs) if inputs_of else node_inputs, outputs=["y"],
                attrs=attrs if attrs is not None else {"padding": [1, 1]})
    return graph([node], values, inputs, constants, dims={"batch": (1, 64)})


# ---- declarations ----------------------------------------------------------------------------------------------------


def test_dtype_literals_are_the_ir_dtype_names():
    assert set(typing.get_args(DtypeName)) == set(dtypes._BY_NAME)
    assert set(typing.get_args(FloatDtypeName)) == dtypes.FLOAT_DTYPES


@pytest.mark.parametrize("name", sorted(OPSET))
def test_ops_with_post_ops_take_operands_after_their_own_inputs(name: str):
    op = get_op(name)
    has_post_ops = "post_ops" in op.Attrs.model_fields
    assert op.arity.post_op_operands == has_post_ops
    if has_post_ops:
        assert op.arity.max is not None and op.arity.min == op.arity.max  # a fixed count: x, weight, [scales,] bias


# ---- a consistent graph passes -----------------------------------------------------------------------------------------


def test_a_consistent_conv_with_symbolic_batch_passes():
    check(conv_graph())


def test_memory_formats_are_not_compared():
    """A layout is how a kernel stores a value: channels_last where the rule says contiguous is accepted."""
    g = conv_graph()
    g.values["y"] = spec(("batch", 8, 16, 16), memory_format="channels_last")
    check(g)


# ---- arity -----------------------------------------------------------------------------------------------------------


def test_a_missing_bias_slot_is_refused():
    refused(conv_graph(inputs_of=lambda ins: ins[:2]), "node conv (conv2d)", "reads 2 inputs", "takes 3")


def test_a_missing_weight_is_refused():
    g = conv_graph()
    g.nodes[0].inputs[1] = None
    g.constants.remove("w")
    g.values.pop("w")
    refused(g, "node conv (conv2d)", "has no input 1")


def test_an_unused_extra_input_is_refused():
    refused(conv_graph(extra={"r": spec(("batch", 8, 16, 16))}), "input(s) [3]", "neither the op nor a post-op")


def test_a_post_op_operand_pointing_at_the_weight_is_refused():
    g = conv_graph(attrs={"padding": [1, 1], "post_ops": [{"kind": "mul", "operand": 1}]})
    refused(g, "node conv (conv2d)", "post-op operand 1", "own 3 inputs")


def test_a_post_op_operand_that_grows_the_output_is_refused():
    g = conv_graph(attrs={"padding": [1, 1], "post_ops": [{"kind": "add", "operand": 3}]},
                   extra={"r": spec(("batch", 8, 16, 32))})
    refused(g, "add post-op", "does not broadcast to the output")


def test_a_post_op_operand_that_broadcasts_passes():
    check(conv_graph(attrs={"padding": [1, 1], "post_ops": [{"kind": "add", "operand": 3}]}, extra={"r": spec((8, 1, 1))}))


def test_binary_op_arity_follows_its_scalar_attrs():
    values = {"a": spec(["n"]), "b": spec(["n"]), "y": spec(["n"])}
    scalar = Node(name="add", op="add", inputs=["a", "b"], outputs=["y"], attrs={"rhs_scalar": 2.0})
    refused(graph([scalar], values, ["a", "b"], dims={"n": (1, 8)}), "reads 2 inputs", "takes 1")
    both = Node(name="add", op="add", inputs=["a"], outputs=["y"], attrs={"rhs_scalar": 2.0, "lhs_scalar": 1.0})
    with pytest.raises(ArtifactError, match="both set"):
        check(graph([both], values, ["a", "b"], dims={"n": (1, 8)}))


# ---- shape rules -----------------------------------------------------------------------------------------------------


def test_a_declared_output_the_op_does_not_make_is_refused():
    refused(conv_graph(out=("batch", 8, 15, 16)), "node conv (conv2d)", "declares output y as float32[batchx8x15x16]",
            "float32[batchx8x16x16]")


def test_a_declared_dtype_the_op_does_not_make_is_refused():
    g = conv_graph()
    g.values["y"] = spec(("batch", 8, 16, 16), "bfloat16")
    refused(g, "declares output y as bfloat16")


def test_a_symbolic_dim_of_the_wrong_name_is_refused():
    g = conv_graph()
    g.dims["other"] = DimRange(min=1, max=4)
    g.values["x2"] = spec(("other",))
    g.inputs.append("x2")
    g.values["y"] = spec(("other", 8, 16, 16))
    refused(g, "declares output y as float32[otherx8x16x16]")


@pytest.mark.parametrize("attrs, weight", [({"groups": 2}, (8, 3, 3, 3)), ({"groups": 2**31}, (8, 3, 3, 3)),
                                           ({}, (8, 4, 3, 3)), ({"dilation": [20, 20]}, (8, 3, 3, 3))])
def test_a_conv_whose_weight_or_attrs_do_not_fit_the_input_is_refused(attrs, weight):
    refused(conv_graph(w=weight, attrs=attrs), "node conv (conv2d) cannot be run on its inputs")


def test_a_bias_of_the_wrong_length_is_refused():
    refused(conv_graph(bias=(1,)), "the bias is float32[1], not of shape [8]")


def test_a_reshape_that_changes_the_element_count_is_refused():
    values = {"x": spec(["batch", 12]), "y": spec(["batch", 5])}
    node = Node(name="r", op="reshape", inputs=["x"], outputs=["y"], attrs={"shape": ["batch", 5]})
    refused(graph([node], values, ["x"], dims={"batch": (1, 8)}), "changes the element count")


@pytest.mark.parametrize("a, b", [((5,), (5,)), ((5,), (2, 5, 3)), ((2, 4, 5), (5,)), ((7, 1, 4, 5), (3, 5, 2))])
def test_matmul_rule_matches_torch_for_every_rank(a, b):
    (out,) = get_op("matmul").infer([spec(a), spec(b)], get_op("matmul").parse_attrs({}))
    assert out.shape == list(torch.matmul(torch.zeros(a), torch.zeros(b)).shape)


def test_matmul_of_mismatched_inner_sizes_is_refused():
    values = {"a": spec([2, 3]), "b": spec([4, 5]), "y": spec([2, 5])}
    node = Node(name="mm", op="matmul", inputs=["a", "b"], outputs=["y"])
    refused(graph([node], values, ["a", "b"]), "inner sizes differ")


def test_sdpa_mask_that_does_not_broadcast_is_refused():
    q = spec(["batch", 2, "seq", 8])
    values = {"q": q, "k": q, "v": q, "m": spec([64]), "y": q}
    node = Node(name="attn", op="sdpa", inputs=["q", "k", "v", "m"], outputs=["y"])
    refused(graph([node], values, ["q", "k", "v", "m"], dims={"batch": (1, 4), "seq": (2, 64)}),
            "the mask float32[64] does not broadcast")


def test_an_aten_node_is_compared_at_a_sample_point_of_symbolic_dims():
    """slice(x, 1, 0, seq) is [batch, seq]; declared [batch, batch] it is refused where the two sizes differ."""
    attrs = {"target": "aten.slice.Tensor", "args": [{"$in": 0}, 1, 0, {"$sym": "seq"}]}
    values = {"x": spec(["batch", "seq"]), "y": spec(["batch", "seq"])}
    node = Node(name="s", op="aten", inputs=["x"], outputs=["y"], attrs=attrs)
    g = graph([node], values, ["x"], dims={"batch": (1, 8), "seq": (2, 64)})
    check(g)
    g.values["y"] = spec(["batch", "batch"])
    refused(g, "node s (aten) declares output y as float32[batchxbatch]", "at batch=3, seq=5")


def test_an_aten_node_reading_an_input_no_argument_names_is_refused():
    attrs = {"target": "aten.neg.default", "args": [{"$in": 0}]}
    values = {"x": spec([3]), "z": spec([3]), "y": spec([3])}
    node = Node(name="n", op="aten", inputs=["x", "z"], outputs=["y"], attrs=attrs)
    refused(graph([node], values, ["x", "z"]), "reads 2 inputs, but aten takes 1")


@pytest.mark.parametrize("op, field, value", [("to_dtype", "dtype", " "), ("to_dtype", "dtype", "complex64"),
                                              ("attention_mask", "dtype", "int8"), ("quantize", "dtype", "float32"),
                                              ("qlinear", "output_dtype", "save"), ("qconv2d", "output_dtype", "int16")])
def test_dtype_names_in_attrs_are_validated(op, field, value):
    attrs = {"x_scale": 1.0} if op in ("qlinear", "qconv2d") else {"scale": 1.0} if op == "quantize" else {}
    with pytest.raises(ValueError):
        get_op(op).parse_attrs({**attrs, field: value})


def test_int8_output_dtype_reaches_torch_through_the_dtype_table():
    from ipexconvert.ir.ops._quant import OutputQuant, finish

    y = finish(torch.ones(2, 3), [], [], OutputQuant(output_dtype="bfloat16"))
    assert y.dtype == torch.bfloat16


# ---- output budget ---------------------------------------------------------------------------------------------------


def _huge_padding_graph(batch_min: int) -> Graph:
    """A consistent conv whose padding makes the output [batch, 8, 200014, 200014]: 1.3 TB per sample in float32."""
    attrs = {"padding": [100000, 100000]}
    (out,) = get_op("conv2d").infer([spec(("batch", 3, 16, 16)), spec((8, 3, 3, 3)), spec((8,))],
                                    get_op("conv2d").parse_attrs(attrs))
    g = conv_graph(attrs=attrs, out=out.shape)
    g.dims["batch"] = DimRange(min=batch_min, max=64)
    return g


def test_an_output_over_the_budget_for_the_smallest_call_is_refused_at_load():
    error = refused(_huge_padding_graph(1), "node conv (conv2d) makes y of shape [1, 8, 200014, 200014]",
                    "for the smallest inputs", "limit per tensor")
    assert MAX_TENSOR_BYTES_ENV in error.fix


def test_the_budget_follows_the_environment(monkeypatch):
    monkeypatch.setenv(MAX_TENSOR_BYTES_ENV, str(8 * 16 * 16 * 4 - 1))  # one byte less than y at batch 1
    refused(conv_graph(), "node conv (conv2d) makes y of shape [1, 8, 16, 16] (8192 bytes)")
    monkeypatch.setenv(MAX_TENSOR_BYTES_ENV, str(8 * 16 * 16 * 4))
    check(conv_graph())


def test_outputs_that_grow_only_with_the_callers_sizes_are_not_refused(monkeypatch):
    """At the dims' max y is 64 times its size at the min: a call that large is the caller's choice (see
    ir/validate.py: a causal LM's logits at the max batch and length are many GB)."""
    monkeypatch.setenv(MAX_TENSOR_BYTES_ENV, str(8 * 16 * 16 * 4 * 2))
    check(conv_graph())


def test_a_size_that_is_negative_at_the_dims_min_is_refused():
    values = {"x": spec(["seq"]), "y": spec(["seq - 4"])}
    attrs = {"target": "aten.slice.Tensor", "args": [{"$in": 0}, 0, 4, {"$sym": "seq"}]}
    node = Node(name="s", op="aten", inputs=["x"], outputs=["y"], attrs=attrs)
    refused(graph([node], values, ["x"], dims={"seq": (2, 64)}), "node s (aten)", "no size")


# ---- what the converter writes passes ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("validate")
    return lambda name, dtype: ipexconvert.optimize(
        f"example:{name}", dtype=dtype, output=folder / f"{name}.{dtype}.ipxc",
        **({"calib_synthetic": 4} if dtype == "int8" else {})).path


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "int8"])
@pytest.mark.parametrize("name", ["tiny-cnn", "tiny-bert", "tiny-bert-eager", pytest.param("tiny-llama", marks=LLAMA_EXPORTS)])
def test_every_converted_tiny_example_passes_the_node_checks(converted, name, dtype):
    """optimize loads what it wrote (so a refusal fails the conversion); checked here once more, explicitly, with
    the count of nodes checked so a check that silently did nothing would show."""
    _, program = read_artifact(converted(name, dtype))
    assert len(program.graph.nodes) > 5
    check_nodes(program.graph)


def test_conv_reference_agrees_with_the_rule_on_a_post_op_operand_broadcast():
    """The broadcast an accepted operand makes is the one the reference computes."""
    x, w, r = torch.randn(2, 3, 16, 16), torch.randn(8, 3, 3, 3), torch.randn(8, 1, 1)
    op = get_op("conv2d")
    attrs = op.parse_attrs({"padding": [1, 1], "post_ops": [{"kind": "add", "operand": 3}]})
    y = op.reference([x, w, None, r], attrs, {})
    assert torch.allclose(y, F.conv2d(x, w, None, 1, 1) + r)
