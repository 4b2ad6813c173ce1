"""The prepack pass: counts packable weights, turns matmul with a constant right operand into linear
(weight stored transposed, contiguous), and the result loads onto the oneDNN kernels."""
from __future__ import annotations

import pytest
import torch
from torch_onednn_helpers import float_linear_kernel, rel_err

from ipexconvert.api import load_artifact, optimize
from ipexconvert.ir import Graph, Node, Program
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.passes import PassOptions
from ipexconvert.passes.pipeline import PIPELINES
from ipexconvert.passes.prepack import prepack
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.self_check import torch_ops as probe
from ipexconvert.backends.cpu.kernels._torch_onednn import isa_allows
from ipexconvert.runtime.executor import Executor

HAS_BF16 = "bfloat16" in probe.checked_dtypes() and isa_allows(selected_isa(), "bfloat16")


class MatmulThenLinear(torch.nn.Module):
    """x @ W (a constant right operand, as some models write it), relu, then a Linear."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(16, 12, generator=g) / 4)
        self.fc = torch.nn.Linear(12, 8)

    def forward(self, x):
        return self.fc(torch.relu(x @ self.w))


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_matmul_becomes_packable_linear(tmp_path, dtype):
    module = MatmulThenLinear().eval()
    x = torch.randn(3, 5, 16)
    names = [*PIPELINES["cpu", dtype], "prepack"]
    result = optimize(module, {"x": x}, dtype=dtype, passes=names, output=tmp_path / "m.ipxc")
    record = next(p for p in result.manifest.passes if p.name == "prepack")
    early = next(p for p in result.manifest.passes if p.name == "matmul_to_linear")
    assert record.changes == {"conv2d_packable": 0, "linear_packable": 2, "matmul_to_linear": 0}  # done earlier
    assert early.changes["matmul_to_linear"] == 1
    model = load_artifact(result.path)
    assert "matmul" not in {s.op for s in model.executor.steps}
    linears = {s.kernel_name for s in model.executor.steps if s.op == "linear"}
    if dtype == "bf16" and model.executor.bf16_compute == "bfloat16":
        assert linears == {float_linear_kernel("bfloat16") if HAS_BF16 else "reference:linear"}
    else:  # fp32, or bf16 weights widened to fp32 at load on a CPU without bf16 arithmetic
        fp32_kernel = float_linear_kernel("float32")
        assert linears == {fp32_kernel if probe.op_for("mkl._mkl_linear", "float32") else "reference:linear"}
    with torch.no_grad():
        want = module(x)
    assert rel_err(model(x), want) < (1e-5 if dtype == "fp32" else 5e-2)


def _program(shared: bool) -> Program:
    """y = relu(x @ b) + r as one fused matmul; with shared, b is also read by a mul (output z)."""
    g = torch.Generator().manual_seed(1)
    b = torch.randn(6, 6, generator=g)  # square: a transpose mistake would not change any shape
    rows = TensorSpec(dtype="float32", shape=["batch", 6])
    values = {"x": rows, "b": TensorSpec.of(b), "r": rows, "y": rows}
    nodes = [Node(name="mm", op="matmul", inputs=["x", "b", "r"], outputs=["y"],
                  attrs={"post_ops": [{"kind": "relu"}, {"kind": "add", "operand": 2}]})]
    outputs = ["y"]
    if shared:
        values["z"] = TensorSpec(dtype="float32", shape=[6, 6])
        nodes.append(Node(name="neg", op="mul", inputs=["b", "b"], outputs=["z"]))
        outputs.append("z")
    graph = Graph(inputs=["x", "r"], outputs=outputs, nodes=nodes, values=values, constants=["b"])
    return Program(graph=graph, weights={"b": b})


@pytest.mark.parametrize("shared", [False, True], ids=["sole-reader", "shared-constant"])
def test_matmul_rewrite_keeps_results(shared):
    program = _program(shared)
    b = program.weights["b"].clone()
    x, r = torch.randn(4, 6), torch.randn(4, 6)
    want = torch.relu(x @ b) + r

    counts = prepack(program, PassOptions())
    assert counts["matmul_to_linear"] == 1 and counts["linear_packable"] == 1
    node = program.graph.nodes[0]
    assert node.op == "linear" and node.inputs[0] == "x" and node.inputs[2] is None and node.inputs[3] == "r"
    assert node.attrs["post_ops"] == [{"kind": "relu"}, {"kind": "add", "operand": 3}]  # moved past the bias slot
    weight = program.weights[node.inputs[1]]
    assert weight.is_contiguous() and torch.equal(weight, b.t())
    if shared:  # the other reader still sees the original
        assert node.inputs[1] != "b" and torch.equal(program.weights["b"], b)
    got = Executor(program).run([x, r], {"batch": 4})
    assert rel_err(got[0], want) < 1e-5
    assert prepack(program, PassOptions())["matmul_to_linear"] == 0  # idempotent
