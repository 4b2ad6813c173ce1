"""The GPU backend's load-time rewrite (backends/cuda/epilogues.py), checked on the CPU: a merged q/k/v projection
(prologue_woq_linear or woq_linear) read only by a rope_kv_write joins it as one woq_linear_rope_kv_write node, and
the fused program computes the same outputs (the internal op's reference against the two ops'); a projection also
read elsewhere, one with int8 activations or post-ops, and a program without Triton stay as they are. The GPU
kernel of the op is in the kernel oracle and tests/backends/cuda/test_cuda_decode.py."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.backends.cuda import epilogues
from ipexconvert.ir import Graph, Node, Program
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.ir.validate import check_nodes
from ipexconvert.runtime.executor import Executor

K, HEADS, KV_HEADS, D, CAPACITY = 256, 4, 2, 64, 8
N = (HEADS + 2 * KV_HEADS) * D


def _program(prologue: bool = True, activations: str = "float", also_output: bool = False) -> tuple[Program, dict]:
    g = torch.Generator().manual_seed(5)
    weights = {"codes": torch.randint(0, 256, (N, K // 2), dtype=torch.uint8, generator=g),
               "scales": torch.rand(N, K // 128, generator=g) * 0.02, "bias": torch.randn(N, generator=g),
               "norm_w": torch.rand(K, generator=g) + 0.5}
    inputs = {"x": torch.randn(1, 1, K, generator=g), "cos": torch.randn(1, 1, 1, D, generator=g),
              "sin": torch.randn(1, 1, 1, D, generator=g),
              "cache_k": torch.randn(1, KV_HEADS, CAPACITY, D, generator=g),
              "cache_v": torch.randn(1, KV_HEADS, CAPACITY, D, generator=g), "position": torch.tensor(3)}
    woq = {"bits": 4, "group_size": 128, "activations": activations}
    if prologue:
        projection = Node(name="qkv", op="prologue_woq_linear", inputs=["x", "codes", "scales", None, "bias", "norm_w"],
                          outputs=["qkv_out"], attrs={**woq, "prologue": "rms_norm", "eps": 1e-6})
    else:
        projection = Node(name="qkv", op="woq_linear", inputs=["x", "codes", "scales", None, "bias"],
                          outputs=["qkv_out"], attrs=woq)
    rope = Node(name="rope", op="rope_kv_write", inputs=["qkv_out", "cos", "sin", "cache_k", "cache_v", "position"],
                outputs=["q", "k_out", "v_out"])
    values = {name: TensorSpec.of(t) for name, t in {**weights, **inputs}.items()}
    values.update(qkv_out=TensorSpec(dtype="float32", shape=[1, 1, N]),
                  q=TensorSpec(dtype="float32", shape=[1, HEADS, 1, D]),
                  k_out=values["cache_k"], v_out=values["cache_v"])
    outputs = ["q", "k_out", "v_out"] + (["qkv_out"] if also_output else [])
    graph = Graph(inputs=list(inputs), outputs=outputs, nodes=[projection, rope], values=values,
                  constants=list(weights))
    return Program(graph, weights), inputs


@pytest.fixture
def with_triton(monkeypatch):
    monkeypatch.setattr(epilogues, "triton_missing", lambda level: None)  # (CI has no Triton: the rewrite alone)


@pytest.mark.parametrize("prologue", [True, False], ids=["rms_norm-prologue", "plain-projection"])
def test_a_merged_projection_read_only_by_rope_kv_write_joins_it(prologue, with_triton):
    program, inputs = _program(prologue)
    fused = epilogues.fuse_rope_epilogues(program, "sm_90")
    assert [(n.name, n.op) for n in fused.graph.nodes] == [("rope", "woq_linear_rope_kv_write")]
    node = fused.graph.nodes[0]
    assert node.inputs == ["x", "codes", "scales", None, "bias", "norm_w" if prologue else None, "cos", "sin",
                           "cache_k", "cache_v", "position"]
    assert node.outputs == ["q", "k_out", "v_out"] and node.attrs["prologue"] == ("rms_norm" if prologue else None)
    assert "qkv_out" not in fused.graph.values
    assert [n.op for n in program.graph.nodes][0] != "woq_linear_rope_kv_write"  # the original is untouched
    check_nodes(fused.graph)
    order = list(program.graph.inputs)
    with torch.inference_mode():
        want = Executor(program).run([inputs[n].clone() for n in order], {})
        got = Executor(fused).run([inputs[n].clone() for n in order], {})
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert (g - w).abs().max() <= 1e-5 * w.abs().max()


@pytest.mark.parametrize("kind", ["also-a-graph-output", "int8-activations"])
def test_a_projection_the_fused_kernel_cannot_take_stays(kind, with_triton):
    program, _ = _program(also_output=kind == "also-a-graph-output",
                          activations="int8" if kind == "int8-activations" else "float")
    assert epilogues.fuse_rope_epilogues(program, "sm_90") is program


def test_without_triton_nothing_is_joined(monkeypatch):
    monkeypatch.setattr(epilogues, "triton_missing", lambda level: "Triton is not installed")
    program, _ = _program()
    assert epilogues.fuse_rope_epilogues(program, "sm_90") is program
