"""Re-hashed hostile artifacts whose nodes do not fit their ops (fuzz/reproducers.py, one edit per root cause):
refused at load (ir/validate.py) with an ArtifactError naming the node, its op and the mismatch, instead of
reaching a kernel (segfault in MKL's linear, oneDNN errors, 640 GB allocations, IndexError/TypeError/...)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import pytest
import torch

import ipexconvert
from ipexconvert.errors import ArtifactError
from ipexconvert.ir import TensorSpec, get_op

from security_helpers import load_in_child, node_of, read_parts, rewrite_artifact


@pytest.fixture(scope="module")
def int8_artifacts(security_artifacts) -> dict[str, Path]:
    paths = {}
    for name in ("tiny-cnn", "tiny-bert"):
        paths[name] = security_artifacts / f"{name}.int8-nodes.ipxc"
        if not paths[name].exists():
            ipexconvert.optimize(f"example:{name}", dtype="int8", output=paths[name], calib_synthetic=4)
    return paths


# ---- edits (each gets the graph JSON, and the tensors where it changes one) ----------------------------------------------


def _producer(graph: dict, value: str) -> dict:
    return next(n for n in graph["nodes"] if value in n["outputs"])


def _conv(graph: dict) -> dict:
    return node_of(graph, "conv2d")


def _drop_input(op: str, index: int, where=lambda n: True):
    def edit(graph: dict) -> None:  # (an edit that returned the popped name would replace the graph with it)
        del node_of(graph, op, where)["inputs"][index]
    return edit


def _set_input(op: str, index: int, value, where=lambda n: True):
    return lambda graph: node_of(graph, op, where)["inputs"].__setitem__(index, value)


def _set_attr(op: str, key: str, value, where=lambda n: True):
    return lambda graph: node_of(graph, op, where)["attrs"].__setitem__(key, value)


def _huge_padding(graph: dict) -> None:
    """padding 100000 with the output spec made to match: a consistent graph, refused by the output budget."""
    conv = _conv(graph)
    conv["attrs"]["padding"] = [100000, 100000]
    op = get_op("conv2d")
    specs = [None if v is None else TensorSpec.model_validate(graph["values"][v]) for v in conv["inputs"][:3]]
    (out,) = op.infer(specs, op.parse_attrs(conv["attrs"]))
    graph["values"][conv["outputs"][0]]["shape"] = out.shape


def _post_op_on_weight(graph: dict) -> None:
    _conv(graph)["attrs"]["post_ops"].append({"kind": "mul", "operand": 1})


def _linear_reads_activation(graph: dict) -> None:
    node_of(graph, "linear")["inputs"][1] = _conv(graph)["outputs"][0]


def _conv_becomes_embedding(graph: dict) -> None:
    conv = node_of(graph, "conv2d", lambda n: n is not _conv(graph))
    conv["op"], conv["attrs"] = "embedding", {}


def _sdpa_mask_1d(graph: dict) -> None:
    node_of(graph, "sdpa")["inputs"][3] = "bert.encoder.layer.0.output.LayerNorm.bias"


def _aten_size_of_the_wrong_dim(graph: dict) -> None:
    """slice(position_ids, 1, 0, seq) made slice(.., batch): its output, declared [1, seq], would be [1, batch]."""
    node = node_of(graph, "aten", lambda n: n["attrs"]["target"] == "aten.slice.Tensor")
    node["attrs"]["args"][3] = {"$sym": "batch"}


def _qconv_output_int8_into_cat(graph: dict) -> None:
    cat = node_of(graph, "aten", lambda n: n["attrs"]["target"] == "aten.cat.default")
    qconv = next(_producer(graph, v) for v in cat["inputs"] if _producer(graph, v)["op"] == "qconv2d")
    qconv["attrs"]["output_dtype"] = "int8"


def _cat_along_minus_batch(graph: dict) -> None:
    """cat(.., dim=-batch): at the loader's sample point of the dims it joins the declared dim, at another batch
    another one, so the next kernel would get a shape its node does not declare."""
    node_of(graph, "aten", lambda n: n["attrs"]["target"] == "aten.cat.default")["attrs"]["args"][1] = {"$sym": "-batch"}


class _resize_constant:
    """The constant `pick(graph)` names, cut to `shape` in the file and in the graph: a consistent file whose
    weight does not fit its node."""

    def __init__(self, pick: Callable[[dict], str], shape: list[int]):
        self.pick, self.shape = pick, shape

    def rewrite(self, src: Path, dst: Path) -> Path:
        name = self.pick(read_parts(src)[1])

        def graph_edit(graph: dict) -> None:
            graph["values"][name]["shape"] = self.shape

        def tensor_edit(tensors: dict) -> None:
            tensors[name] = tensors[name].reshape(-1)[:math.prod(self.shape)].reshape(self.shape).clone()

        return rewrite_artifact(src, dst, edit_graph=graph_edit, edit_tensors=tensor_edit)


def _linear_bias(graph: dict) -> str:
    return node_of(graph, "linear", lambda n: n["inputs"][2] is not None)["inputs"][2]


def _quantize_multiplier(graph: dict) -> str:
    readers = [n for n in graph["nodes"] if n["op"] in ("quantize", "add_layer_norm", "sdpa")
               and len(n["inputs"]) > (1 if n["op"] == "quantize" else 4) and n["inputs"][-1] is not None]
    return readers[0]["inputs"][-1]


# case -> (source, graph edit or _resize_constant, fragments the problem must hold)
CASES: dict[str, tuple] = {
    "conv2d_input_dropped": ("cnn", _drop_input("conv2d", 2), ["(conv2d)", "reads 2 inputs, but conv2d takes 3"]),
    "conv2d_groups_2pow31": ("cnn", _set_attr("conv2d", "groups", 2**31), ["(conv2d)", "does not fit the weight"]),
    "conv2d_huge_padding": ("cnn", _huge_padding, ["(conv2d) makes", "limit per tensor"]),
    "conv2d_huge_padding_only_attrs": ("cnn", _set_attr("conv2d", "padding", [100000, 100000]),
                                       ["(conv2d) declares output"]),
    "avg_pool_input_none": ("cnn", _set_input("adaptive_avg_pool2d", 0, None), ["(adaptive_avg_pool2d) has no input 0"]),
    "reshape_shape_empty": ("cnn", _set_attr("reshape", "shape", []), ["(reshape)"]),
    "post_op_operand_is_weight": ("cnn", _post_op_on_weight, ["(conv2d) has a post-op operand 1"]),
    "linear_weight_is_activation": ("cnn", _linear_reads_activation, ["(linear) cannot be run on its inputs", "rank 2"]),
    "embedding_weight_4d": ("cnn", _conv_becomes_embedding, ["(embedding) reads 3 inputs, but embedding takes 2"]),
    "mkl_linear_bias_len0": ("bert", _resize_constant(_linear_bias, [0]), ["(linear)", "the bias is float32[0]"]),
    "mkl_linear_bias_len1": ("bert", _resize_constant(_linear_bias, [1]), ["(linear)", "the bias is float32[1]"]),
    "linear_input_dropped": ("bert", _drop_input("linear", 1), ["(linear) reads 2 inputs"]),
    "embedding_indices_none": ("bert", _set_input("embedding", 1, None), ["(embedding) has no input 1"]),
    "permute_perm_32768": ("bert", _set_attr("permute", "perm", [0, 2, 1, 32768]), ["(permute)", "is not an order"]),
    "to_dtype_unknown": ("bert", _set_attr("to_dtype", "dtype", " "), ["(to_dtype) cannot be run"]),
    "layer_norm_weight_len1": ("bert", _resize_constant(lambda g: "bert.encoder.layer.0.attention.output.LayerNorm.weight",
                                                        [1]), ["(add_layer_norm)", "the weight is float32[1]"]),
    "sdpa_mask_1d": ("bert", _sdpa_mask_1d, ["(sdpa)", "the mask float32[64] does not broadcast"]),
    "aten_size_of_the_wrong_dim": ("bert", _aten_size_of_the_wrong_dim, ["(aten) declares output", "[1xseq]"]),
    "qconv2d_input_dropped": ("cnn-int8", _drop_input("qconv2d", 3), ["(qconv2d) reads 3 inputs, but qconv2d takes 4"]),
    "qconv2d_groups_3": ("cnn-int8", _set_attr("qconv2d", "groups", 3), ["(qconv2d)", "does not fit the weight"]),
    # fuzz seed 61: a 1x1 kernel makes any dilation fit the shapes; int8_gemm's conv geometry refused it mid-run
    "qconv2d_dilation_2pow31": ("cnn-int8", _set_attr("qconv2d", "dilation", [2**31, 1]),
                                ["(qconv2d) cannot be run", "less than or equal to 1048576"]),
    # fuzz seed 62: a uint8 input's zero point of -1 reached int8_gemm, which refused it mid-run
    "qconv2d_x_zero_point_minus_1": ("cnn-int8", _set_attr("qconv2d", "x_zero_point", -1),
                                     ["(qconv2d) cannot be run", "x_zero_point -1 is not a code of the input"]),
    "qlinear_x_zero_point_minus_1": ("bert-int8", _set_attr("qlinear", "x_zero_point", -1),
                                     ["(qlinear) cannot be run", "x_zero_point -1 is not a code of the input"]),
    "max_pool2d_stride_2pow40": ("cnn", _set_attr("max_pool2d", "stride", [2**40, 1]), ["(max_pool2d) cannot be run"]),
    "qlinear_output_dtype_getattr": ("bert-int8", _set_attr("qlinear", "output_dtype", "save"), ["(qlinear) cannot be run"]),
    "quantize_multiplier_len0": ("bert-int8", _resize_constant(_quantize_multiplier, [0]), ["multiplier"]),
    "concat_int8_with_uint8": ("cnn-int8", _qconv_output_int8_into_cat, ["(qconv2d) declares output", "int8"]),
    # fuzz seed 65: loads (right at the sample point), refused when run at batch 1 (qconv2d's own ValueError before)
    "aten_cat_dim_minus_batch": ("cnn-int8", _cat_along_minus_batch,
                                 ["(aten.cat.default) made outputs of shapes", "where the artifact declares"]),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory, tiny_cnn_artifact, tiny_bert_artifact, int8_artifacts):
    """Every case (and each unedited source, re-hashed) loaded in one child process: name -> result."""
    folder = tmp_path_factory.mktemp("node-consistency")
    sources = {"cnn": tiny_cnn_artifact, "bert": tiny_bert_artifact, "cnn-int8": int8_artifacts["tiny-cnn"],
               "bert-int8": int8_artifacts["tiny-bert"]}
    paths = {f"control-{name}": rewrite_artifact(src, folder / f"control-{name}.ipxc") for name, src in sources.items()}
    for case, (source, edit, _) in CASES.items():
        dst = folder / f"{case}.ipxc"
        paths[case] = (edit.rewrite(sources[source], dst) if isinstance(edit, _resize_constant)
                       else rewrite_artifact(sources[source], dst, edit_graph=edit))
    return dict(zip(paths, load_in_child(*paths.values(), timeout=600)))


def test_unedited_rewrites_load_and_run(results):
    for name, result in results.items():
        if name.startswith("control-"):
            assert result["result"] == "ran", (name, result)


@pytest.mark.parametrize("case", list(CASES))
def test_a_node_that_does_not_fit_its_op_is_refused_at_load(results, case):
    result = results[case]
    assert result["result"] == "artifact_error", result
    for fragment in CASES[case][2]:
        assert fragment in result["problem"], (fragment, result["problem"])
    assert "node " in result["problem"], result  # names the node


def test_the_edited_constants_really_changed(tiny_bert_artifact, tmp_path):
    """The constant edits above hit a linear's bias (so the refusal is about the bias, not a missing tensor)."""
    out = _resize_constant(_linear_bias, [1]).rewrite(tiny_bert_artifact, tmp_path / "b.ipxc")
    _, graph, tensors, _ = read_parts(out)
    assert tensors[_linear_bias(graph)].shape == (1,)


# ---- defence in depth: MKL's linear checks its own operands ---------------------------------------------------------------


def _mkl_linear_kernel(weight: torch.Tensor, bias):
    from ipexconvert.backends.cpu.isa import selected_isa
    from ipexconvert.backends.cpu.kernels.linear import torch_mkl_linear
    from ipexconvert.runtime.kernels import NodeContext

    specs = (TensorSpec(dtype="float32", shape=[6, weight.shape[1]]), TensorSpec.of(weight),
             None if bias is None else TensorSpec.of(bias))
    ctx = NodeContext(op="linear", attrs=get_op("linear").parse_attrs({}), constants=(None, weight, bias),
                      input_specs=specs, output_specs=(TensorSpec(dtype="float32", shape=[6, weight.shape[0]]),),
                      device="cpu", isa=selected_isa())
    return torch_mkl_linear(ctx)


@pytest.fixture
def mkl(monkeypatch):
    from ipexconvert.backends.cpu.self_check import torch_ops as probe

    monkeypatch.setenv("IPEXCONVERT_MKL_FP32", "1")
    if probe.op_for("mkl._mkl_linear", "float32") is None:
        pytest.skip("torch.ops.mkl._mkl_linear is not usable on this machine (probe), so torch_mkl_linear never runs here")


@pytest.mark.parametrize("bias_len", [0, 1, 63])
def test_mkl_linear_refuses_a_bias_that_does_not_fit_its_weight(mkl, bias_len):
    with pytest.raises(ArtifactError, match=rf"a bias of shape \[{bias_len}\] for a weight \[64, 32\]"):
        _mkl_linear_kernel(torch.randn(64, 32), torch.randn(bias_len))


def test_mkl_linear_refuses_an_input_of_other_features_on_every_call(mkl):
    weight, bias = torch.randn(64, 32), torch.randn(64)
    kernel = _mkl_linear_kernel(weight, bias)
    assert kernel is not None and kernel.name == "torch_mkl:linear"
    x = torch.randn(6, 32)
    torch.testing.assert_close(kernel.fn([x], {}), torch.nn.functional.linear(x, weight, bias), rtol=1e-4, atol=1e-4)
    for bad in (torch.randn(6, 16), torch.randn(6, 33), torch.randn(32), torch.randn(6, 32, dtype=torch.float64)):
        with pytest.raises(ArtifactError, match="MKL cannot run"):
            kernel.fn([bad], {})
