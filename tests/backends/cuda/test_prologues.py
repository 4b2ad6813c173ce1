"""The GPU backend's load-time rewrite (backends/cuda/prologues.py), checked on the CPU: a rms_norm or a one-input
silu_mul read only by a woq_linear joins it as one prologue_woq_linear node (post-op operands moved past the norm
weight), the fused program computes the same outputs (the internal op's reference against the CPU's kernels of the
two ops, to float32 rounding), and a norm whose value is
also read elsewhere, or is a graph output, stays. The GPU kernel of the op is in the kernel oracle."""
from __future__ import annotations

import torch

from ipexconvert.backends.cuda.prologues import fuse_prologues
from ipexconvert.ir import Graph, Node, Program
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.ir.validate import check_nodes
from ipexconvert.runtime.executor import Executor

K, N = 256, 64


def _program() -> tuple[Program, dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    weights = {
        "norm_w": torch.rand(K, generator=g) + 0.5,
        "codes_a": torch.randint(0, 256, (N, K // 2), dtype=torch.uint8, generator=g),
        "scales_a": torch.rand(N, K // 128, generator=g) * 0.02,
        "codes_b": torch.randint(0, 256, (N, K // 2), dtype=torch.uint8, generator=g),
        "scales_b": torch.rand(N, K // 128, generator=g) * 0.02,
        "codes_c": torch.randint(0, 256, (N, K // 2), dtype=torch.uint8, generator=g),
        "scales_c": torch.rand(N, K // 128, generator=g) * 0.02,
    }
    inputs = {"x": torch.randn(1, 3, K, generator=g), "gate_up": torch.randn(1, 3, 2 * K, generator=g) * 3,
              "residual": torch.randn(1, 3, N, generator=g)}
    woq = {"bits": 4, "group_size": 128}
    nodes = [
        Node(name="norm", op="rms_norm", inputs=["x", "norm_w"], outputs=["h"],
             attrs={"normalized_shape": [K], "eps": 1e-6}),
        Node(name="proj", op="woq_linear", inputs=["h", "codes_a", "scales_a", None, None, "residual"], outputs=["y"],
             attrs={**woq, "post_ops": [{"kind": "add", "operand": 5}]}),
        Node(name="gate", op="silu_mul", inputs=["gate_up"], outputs=["g"]),
        Node(name="down", op="woq_linear", inputs=["g", "codes_b", "scales_b", None, None], outputs=["z"], attrs=woq),
        # read twice: by a woq_linear and as a graph output, so it stays
        Node(name="norm_kept", op="rms_norm", inputs=["x", None], outputs=["h_kept"], attrs={"normalized_shape": [K]}),
        Node(name="proj_kept", op="woq_linear", inputs=["h_kept", "codes_c", "scales_c", None, None], outputs=["w"],
             attrs=woq),
    ]
    values = {name: TensorSpec.of(t) for name, t in {**weights, **inputs}.items()}
    like_x, like_y = TensorSpec.of(inputs["x"]), TensorSpec.of(inputs["residual"])
    values.update(h=like_x, y=like_y, g=like_x, z=like_y, h_kept=like_x, w=like_y)
    graph = Graph(inputs=list(inputs), outputs=["y", "z", "h_kept", "w"], nodes=nodes, values=values,
                  constants=list(weights))
    return Program(graph, weights), inputs


def test_norms_and_gates_read_only_by_a_woq_linear_join_it():
    program, inputs = _program()
    fused = fuse_prologues(program)
    ops = {n.name: n.op for n in fused.graph.nodes}
    assert ops == {"proj": "prologue_woq_linear", "down": "prologue_woq_linear", "norm_kept": "rms_norm",
                   "proj_kept": "woq_linear"}
    proj = next(n for n in fused.graph.nodes if n.name == "proj")
    assert proj.inputs == ["x", "codes_a", "scales_a", None, None, "norm_w", "residual"]
    assert proj.attrs["prologue"] == "rms_norm" and proj.attrs["eps"] == 1e-6
    assert proj.attrs["post_ops"] == [{"kind": "add", "operand": 6}]
    down = next(n for n in fused.graph.nodes if n.name == "down")
    assert down.inputs == ["gate_up", "codes_b", "scales_b", None, None, None] and down.attrs["prologue"] == "silu_mul"
    assert "h" not in fused.graph.values and "g" not in fused.graph.values  # the joined values are gone
    assert [n.op for n in program.graph.nodes].count("rms_norm") == 2  # the original program is untouched
    check_nodes(fused.graph)
    order = list(program.graph.inputs)
    with torch.inference_mode():
        want = Executor(program).run([inputs[n] for n in order], {})
        got = Executor(fused).run([inputs[n] for n in order], {})
    for g, w in zip(got, want, strict=True):  # the CPU's kernels against the fused op's reference
        assert g.shape == w.shape and g.dtype == w.dtype
        assert (g - w).abs().max() <= 1e-5 * w.abs().max()


def test_a_program_without_pairs_comes_back_as_it_is():
    program, _ = _program()
    program.graph.nodes = [n for n in program.graph.nodes if n.name in ("norm_kept", "proj_kept")]
    program.graph.outputs = ["h_kept", "w"]
    assert fuse_prologues(program) is program
