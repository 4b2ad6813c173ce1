"""The GPU backend's load-time rewrite of a decoder's bf16 linear layers (backends/cuda/float_projections.py), checked
on the CPU: each becomes a woq_linear of 16-bit codes (the weight itself, one scale of 1.0 a row, the bias in float32,
post-op operands moved past the scales and zero points), the joins after it take the layers as they take int4 ones
(the q/k/v projection with its norm and rope_kv_write, the down projection with its SiLU gate), the outputs match the
unrewritten program to bf16 rounding, layers it cannot take and programs without a cache stay, and an artifact holding
such a node is refused (it is made at load only). The GPU kernel is in the kernel oracle (bits 16 cases)."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.backends.cuda import epilogues, float_projections
from ipexconvert.backends.cuda.kernels.woq_linear import float_rows
from ipexconvert.backends.cuda.prologues import fuse_prologues
from ipexconvert.errors import ArtifactError
from ipexconvert.ir import Graph, Node, Program, get_op
from ipexconvert.ir.graph import check_graph
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.ir.validate import check_nodes
from ipexconvert.runtime.executor import Executor
from ipexconvert.runtime.kernels import NodeContext

K, HEADS, KV_HEADS, D, CAPACITY, HIDDEN = 256, 4, 2, 64, 8, 96
N = (HEADS + 2 * KV_HEADS) * D
BF16 = torch.bfloat16


def _program(with_cache: bool = True) -> tuple[Program, dict]:
    g = torch.Generator().manual_seed(7)
    weights = {"w_qkv": (torch.randn(N, K, generator=g) * 0.05).to(BF16),
               "b_qkv": torch.randn(N, generator=g).to(BF16),
               "norm_w": (torch.rand(K, generator=g) + 0.5).to(BF16),
               "w_down": (torch.randn(K, HIDDEN, generator=g) * 0.1).to(BF16),
               "w_odd": (torch.randn(16, 15, generator=g) * 0.1).to(BF16)}
    inputs = {"x": torch.randn(1, 1, K, generator=g).to(BF16), "cos": torch.randn(1, 1, 1, D, generator=g).to(BF16),
              "sin": torch.randn(1, 1, 1, D, generator=g).to(BF16),
              "cache_k": torch.randn(1, KV_HEADS, CAPACITY, D, generator=g).to(BF16),
              "cache_v": torch.randn(1, KV_HEADS, CAPACITY, D, generator=g).to(BF16), "position": torch.tensor(3),
              "gate_up": (torch.randn(1, 1, 2 * HIDDEN, generator=g) * 2).to(BF16),
              "odd_x": torch.randn(1, 1, 15, generator=g).to(BF16),
              "w_computed": (torch.randn(8, K, generator=g) * 0.1).to(BF16)}
    nodes = [
        Node(name="norm", op="rms_norm", inputs=["x", "norm_w"], outputs=["h"],
             attrs={"normalized_shape": [K], "eps": 1e-6}),
        Node(name="qkv", op="linear", inputs=["h", "w_qkv", "b_qkv"], outputs=["qkv_out"]),
        Node(name="gate", op="silu_mul", inputs=["gate_up"], outputs=["gated"]),
        Node(name="down", op="linear", inputs=["gated", "w_down", None, "x"], outputs=["down_out"],
             attrs={"post_ops": [{"kind": "add", "operand": 3}]}),
        Node(name="odd", op="linear", inputs=["odd_x", "w_odd", None], outputs=["odd_out"]),  # k odd: stays
        Node(name="computed", op="linear", inputs=["x", "w_computed", None], outputs=["computed_out"]),  # stays
    ]
    if with_cache:
        nodes.append(Node(name="rope", op="rope_kv_write",
                          inputs=["qkv_out", "cos", "sin", "cache_k", "cache_v", "position"],
                          outputs=["q", "k_out", "v_out"]))
    values = {name: TensorSpec.of(t) for name, t in {**weights, **inputs}.items()}
    values.update(h=values["x"], qkv_out=TensorSpec(dtype="bfloat16", shape=[1, 1, N]), gated=values["odd_x"],
                  down_out=values["x"], odd_out=TensorSpec(dtype="bfloat16", shape=[1, 1, 16]),
                  computed_out=TensorSpec(dtype="bfloat16", shape=[1, 1, 8]),
                  q=TensorSpec(dtype="bfloat16", shape=[1, HEADS, 1, D]), k_out=values["cache_k"],
                  v_out=values["cache_v"])
    values["gated"] = TensorSpec(dtype="bfloat16", shape=[1, 1, HIDDEN])
    outputs = ["down_out", "odd_out", "computed_out"] + (["q", "k_out", "v_out"] if with_cache else ["qkv_out"])
    graph = Graph(inputs=list(inputs), outputs=outputs, nodes=nodes, values=values, constants=list(weights))
    return Program(graph, weights), inputs


def _run(program: Program, inputs: dict) -> list[torch.Tensor]:
    with torch.inference_mode():
        return Executor(program, widen_bf16=False).run([inputs[n].clone() for n in program.graph.inputs], {})


def test_a_decoders_bf16_layers_become_16_bit_woq_layers():
    program, inputs = _program()
    rewritten = float_projections.float_projections(program)
    ops = {n.name: n.op for n in rewritten.graph.nodes}
    assert ops == {"norm": "rms_norm", "qkv": "woq_linear", "gate": "silu_mul", "down": "woq_linear",
                   "odd": "linear", "computed": "linear", "rope": "rope_kv_write"}
    qkv, down = (next(n for n in rewritten.graph.nodes if n.name == name) for name in ("qkv", "down"))
    assert qkv.attrs == {"bits": 16, "group_size": K, "activations": "float", "post_ops": []}
    assert qkv.inputs[:2] == ["h", "w_qkv"] and qkv.inputs[3] is None
    assert rewritten.weights[qkv.inputs[1]] is program.weights["w_qkv"]  # the weight shared, not copied
    assert torch.equal(rewritten.weights[qkv.inputs[2]], torch.ones(N, 1))
    assert rewritten.weights[qkv.inputs[4]].dtype == torch.float32
    assert torch.equal(rewritten.weights[qkv.inputs[4]], program.weights["b_qkv"].float())
    assert down.inputs == ["gated", "w_down", down.inputs[2], None, None, "x"]
    assert down.attrs["post_ops"] == [{"kind": "add", "operand": 5}]
    assert "b_qkv" not in rewritten.graph.values  # the bf16 bias is read by nothing now
    assert [n.op for n in program.graph.nodes].count("linear") == 4  # the original is untouched
    check_nodes(rewritten.graph)
    for got, want in zip(_run(rewritten, inputs), _run(program, inputs), strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert (got.float() - want.float()).abs().max() <= 1e-2 * want.float().abs().max()


def test_the_joins_take_the_rewritten_layers(monkeypatch):
    monkeypatch.setattr(epilogues, "triton_missing", lambda level: None)  # (CI has no Triton: the rewrites alone)
    program, inputs = _program()
    fused = epilogues.fuse_rope_epilogues(fuse_prologues(float_projections.float_projections(program)), "sm_90")
    assert {n.name: n.op for n in fused.graph.nodes} == {
        "rope": "woq_linear_rope_kv_write", "down": "prologue_woq_linear", "odd": "linear", "computed": "linear"}
    check_nodes(fused.graph)
    for got, want in zip(_run(fused, inputs), _run(program, inputs), strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert (got.float() - want.float()).abs().max() <= 1e-2 * want.float().abs().max()


def test_a_program_without_a_cache_or_with_the_rewrite_off_stays(monkeypatch):
    program, _ = _program(with_cache=False)
    assert float_projections.float_projections(program) is program  # an encoder keeps cuBLAS for its many rows
    program, _ = _program()
    monkeypatch.setattr(float_projections, "ENABLED", False)
    assert float_projections.float_projections(program) is program


def test_an_artifact_holding_a_16_bit_woq_layer_is_refused():
    program, _ = _program()
    rewritten = float_projections.float_projections(program)
    with pytest.raises(ArtifactError, match=r"qkv \(woq_linear\) is made by the runtime at load"):
        check_graph(rewritten.graph)


@pytest.mark.parametrize("post_ops", [[{"kind": "silu"}], [{"kind": "mul", "operand": 5}],
                                      [{"kind": "add", "operand": 5}, {"kind": "relu"}], []])
def test_a_prompts_rows_keep_cublas_whatever_the_post_ops(post_ops):
    """A prompt's rows of a bits-16 layer run F.linear in bf16 and the post-ops after it (a gate's SiLU, SwiGLU's mul)
    as the linear layer did, never the op's reference (which widened the weight's copy: 46 MB a TinyLlama gate on the
    H100, prefill 0.019 -> 0.027 s); the same values as that reference to bf16 rounding. (Prologue None: torch ops
    alone, so this runs on the CPU; the norm and gate prologues are in the GPU oracle.)"""
    g = torch.Generator().manual_seed(3)
    weight = (torch.randn(48, 64, generator=g) * 0.1).to(BF16)
    op = get_op("woq_linear")
    attrs = op.parse_attrs({"bits": 16, "group_size": 64, "post_ops": post_ops})
    x, operand = torch.randn(1, 9, 64, generator=g).to(BF16), torch.randn(1, 9, 48, generator=g).to(BF16)
    inputs = [x, weight, torch.ones(48, 1), None, None, operand]
    specs = tuple(None if t is None else TensorSpec.of(t) for t in inputs)
    ctx = NodeContext(op="woq_linear", attrs=attrs, constants=(None, weight, torch.ones(48, 1), None, None, None),
                      input_specs=specs, output_specs=tuple(op.infer(specs, attrs)), device="cuda", isa="sm_90")
    reference = lambda inputs, dims: op.reference(inputs, attrs, dims)  # noqa: E731
    run = float_rows(ctx, None, reference)
    assert run is not reference
    got, want = run(inputs, {}), reference(inputs, {})
    assert got.shape == want.shape and got.dtype == BF16
    assert (got.float() - want.float()).abs().max() <= 1e-2 * want.float().abs().max() + 1e-2
