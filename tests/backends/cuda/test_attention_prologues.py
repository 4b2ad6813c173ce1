"""The GPU backend's load-time rewrite (backends/cuda/attention_prologues.py), checked on the CPU: an attention whose
heads, merged (permute, reshape), only an output projection (woq_linear) reads joins it as one sdpa_woq_linear node,
and the fused program computes the same output (the internal op's reference against the four ops'); an attention
also read elsewhere, a permute that does not move the heads last, a projection of int8 activations, a quantizing
attention and a program without Triton stay as they are. The GPU kernel of the op is in the kernel oracle and
benchmarks/gpu_interpreted.py."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.backends.cuda import attention_prologues
from ipexconvert.ir import Graph, Node, Program
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.ir.validate import check_nodes
from ipexconvert.runtime.executor import Executor

HEADS, KV_HEADS, D, KEYS, N = 4, 2, 64, 40, 48
K = HEADS * D


def _program(kind: str = "fusable") -> tuple[Program, dict]:
    g = torch.Generator().manual_seed(7)
    weights = {"codes": torch.randint(0, 256, (N, K // 2), dtype=torch.uint8, generator=g),
               "scales": torch.rand(N, K // 128, generator=g) * 0.02}
    inputs = {"q": torch.randn(1, HEADS, 1, D, generator=g), "k": torch.randn(1, KV_HEADS, KEYS, D, generator=g),
              "v": torch.randn(1, KV_HEADS, KEYS, D, generator=g), "mask": torch.randn(1, 1, 1, KEYS, generator=g),
              "residual": torch.randn(1, 1, N, generator=g)}
    sdpa_attrs = {"enable_gqa": True}
    if kind == "quantizing-attention":
        sdpa_attrs["quantize"] = {"scale": 0.1, "zero_point": 0, "dtype": "int8"}
    perm = [0, 1, 2, 3] if kind == "heads-not-moved" else [0, 2, 1, 3]
    nodes = [Node(name="attn", op="sdpa", inputs=["q", "k", "v", "mask"], outputs=["heads"], attrs=sdpa_attrs),
             Node(name="move", op="permute", inputs=["heads"], outputs=["moved"], attrs={"perm": perm}),
             Node(name="merge", op="reshape", inputs=["moved"], outputs=["merged"], attrs={"shape": [1, 1, K]}),
             Node(name="o_proj", op="woq_linear", inputs=["merged", "codes", "scales", None, None, "residual"],
                  outputs=["out"],
                  attrs={"bits": 4, "group_size": 128, "post_ops": [{"kind": "add", "operand": 5}],
                         "activations": "int8" if kind == "int8-activations" else "float"})]
    values = {name: TensorSpec.of(t) for name, t in {**weights, **inputs}.items()}
    heads_dtype = "int8" if kind == "quantizing-attention" else "float32"
    moved_shape = [1, HEADS, 1, D] if kind == "heads-not-moved" else [1, 1, HEADS, D]
    values.update(heads=TensorSpec(dtype=heads_dtype, shape=[1, HEADS, 1, D]),
                  moved=TensorSpec(dtype=heads_dtype, shape=moved_shape),
                  merged=TensorSpec(dtype=heads_dtype, shape=[1, 1, K]),
                  out=TensorSpec(dtype="float32", shape=[1, 1, N]))
    outputs = ["out"] + (["heads"] if kind == "attention-also-an-output" else [])
    graph = Graph(inputs=list(inputs), outputs=outputs, nodes=nodes, values=values, constants=list(weights))
    return Program(graph, weights), inputs


@pytest.fixture
def with_triton(monkeypatch):
    monkeypatch.setattr(attention_prologues, "triton_missing", lambda level: None)  # (CI has no Triton)


def test_an_attention_read_only_by_its_output_projection_joins_it(with_triton):
    program, inputs = _program()
    fused = attention_prologues.fuse_attention_prologues(program, "sm_90")
    assert [(n.name, n.op) for n in fused.graph.nodes] == [("o_proj", "sdpa_woq_linear")]
    node = fused.graph.nodes[0]
    assert node.inputs == ["q", "k", "v", "mask", "codes", "scales", None, None, "residual"]
    assert node.attrs["attention"] == {"enable_gqa": True} and node.attrs["post_ops"] == [{"kind": "add", "operand": 8}]
    assert not {"heads", "moved", "merged"} & set(fused.graph.values)
    assert [n.op for n in program.graph.nodes][0] == "sdpa"  # the original is untouched
    check_nodes(fused.graph)
    order = list(program.graph.inputs)
    with torch.inference_mode():
        want, = Executor(program).run([inputs[n] for n in order], {})
        got, = Executor(fused).run([inputs[n] for n in order], {})
    assert got.shape == want.shape and got.dtype == want.dtype
    assert (got - want).abs().max() <= 1e-5 * want.abs().max()


@pytest.mark.parametrize("kind", ["attention-also-an-output", "heads-not-moved", "int8-activations",
                                  "quantizing-attention"])
def test_a_pair_the_fused_kernel_cannot_take_stays(kind, with_triton):
    program, _ = _program(kind)
    assert attention_prologues.fuse_attention_prologues(program, "sm_90") is program


def test_without_triton_nothing_is_joined(monkeypatch):
    monkeypatch.setattr(attention_prologues, "triton_missing", lambda level: "Triton is not installed")
    program, _ = _program()
    assert attention_prologues.fuse_attention_prologues(program, "sm_90") is program
