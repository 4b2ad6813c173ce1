"""bf16 artifacts compute in float32 where the CPU has no native bf16 (runtime/compute_precision.py):
the widened program holds no bf16 inside, keeps the signature, drops the casts that became
no-ops, and gives the fp32 computation's results; the executor decides from the ISA level."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from ipexconvert.examples import get_example
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.passes.base import PASSES, PassOptions
from ipexconvert.passes.pipeline import pipeline_for
from ipexconvert.backends.cpu import compute_precision
from ipexconvert.backends.cpu.isa import selected_isa, supported_levels
from ipexconvert.runtime.executor import Executor


def bf16_program(module: nn.Module, inputs: dict, dynamic: dict, outputs: list[str]):
    program = program_from_module(module, inputs, dynamic, outputs)
    for name in pipeline_for("bf16"):
        PASSES[name].run(program, PassOptions(dtype="bf16"))
    return program


@pytest.fixture(scope="module")
def tiny_cnn():
    example = get_example("tiny-cnn")
    module = example.build()
    inputs = example.example_inputs(2)
    program = bf16_program(module, inputs, example.dynamic_dims, list(example.output_names))
    with torch.no_grad():
        eager = module(**inputs)
    return program, inputs, eager


def run(program, inputs, widen):
    executor = Executor(program, widen_bf16=widen)
    return executor, executor.run([inputs[n] for n in program.graph.inputs], {"batch": 2})


def test_widened_cnn_has_no_bf16_and_matches_fp32_better_than_bf16(tiny_cnn):
    program, inputs, eager = tiny_cnn
    assert compute_precision.has_bf16(program.graph)
    widened = compute_precision.widen_bf16(program)
    assert not compute_precision.has_bf16(widened.graph)
    assert all(t.dtype != torch.bfloat16 for t in widened.weights.values())
    assert "bfloat16" not in widened.graph.model_dump_json()
    for node in widened.graph.nodes:  # no float32 -> float32 cast survives
        if node.op == "to_dtype":
            assert widened.graph.values[node.inputs[0]].dtype != node.attrs["dtype"], node.name
    assert widened.graph.inputs == program.graph.inputs and widened.graph.outputs == program.graph.outputs
    for name in program.graph.inputs + program.graph.outputs:
        assert widened.graph.values[name] == program.graph.values[name]

    wide_exec, (wide,) = run(program, inputs, widen=True)
    _, (narrow,) = run(program, inputs, widen=False)
    assert wide_exec.bf16_compute == "float32"
    assert not any("bfloat16" in str(s.kernel_name) for s in wide_exec.steps)
    wide_err = (wide - eager).abs().max().item()
    narrow_err = (narrow - eager).abs().max().item()
    assert wide.dtype == torch.float32 and wide_err < narrow_err  # bf16 weights, fp32 arithmetic
    assert torch.nn.functional.cosine_similarity(wide.flatten(), eager.flatten(), dim=0) > 0.9999


def test_the_source_program_is_not_modified(tiny_cnn):
    program, _, _ = tiny_cnn
    before = program.graph.model_dump_json()
    weights = {k: v.dtype for k, v in program.weights.items()}
    compute_precision.widen_bf16(program)
    assert program.graph.model_dump_json() == before
    assert {k: v.dtype for k, v in program.weights.items()} == weights


class Bf16Edges(nn.Module):
    """bf16 in and out: the caller's signature must survive the widening."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(8, 4).to(torch.bfloat16)

    def forward(self, x):
        return torch.relu(self.fc(x)) * 2


def test_bf16_inputs_and_outputs_keep_their_dtype():
    module = Bf16Edges().eval()
    x = torch.randn(3, 8).to(torch.bfloat16)
    program = program_from_module(module, {"x": x}, {"x": {0: DynamicDim(name="batch", max=8)}}, ["y"])
    for name in ("fuse_post_ops", "prepack"):
        PASSES[name].run(program, PassOptions(dtype="bf16"))
    assert program.graph.values["x"].dtype == "bfloat16" and program.graph.values["y"].dtype == "bfloat16"
    widened = compute_precision.widen_bf16(program)
    assert widened.graph.values["x"].dtype == "bfloat16" and widened.graph.values["y"].dtype == "bfloat16"
    assert widened.graph.nodes[0].op == "to_dtype" and widened.graph.nodes[-1].op == "to_dtype"
    (y,) = Executor(program, widen_bf16=True).run([x], {"batch": 3})
    want = torch.relu(torch.nn.functional.linear(x.float(), module.fc.weight.float(), module.fc.bias.float())) * 2
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y, want.to(torch.bfloat16), rtol=0, atol=0)  # fp32 math, rounded once at the end


def test_a_bf16_constant_that_is_also_an_output_stays_as_stored():
    """An artifact may name a constant as a graph output (fuzz seed 62: a bf16 bias). Widened, its readers read a float32
    copy and the output is the stored bf16 tensor (the output cast had read a value nothing made: None)."""
    module = Bf16Edges().eval()
    x = torch.randn(3, 8).to(torch.bfloat16)
    program = program_from_module(module, {"x": x}, {"x": {0: DynamicDim(name="batch", max=8)}}, ["y"])
    for name in ("fuse_post_ops", "prepack"):
        PASSES[name].run(program, PassOptions(dtype="bf16"))
    bias = next(n for n in program.graph.constants if program.weights[n].dim() == 1)
    program.graph.outputs.append(bias)
    widened = compute_precision.widen_bf16(program)
    assert widened.graph.values[bias].dtype == "bfloat16" and widened.weights[bias].dtype == torch.bfloat16
    assert all(bias not in n.inputs for n in widened.graph.nodes)  # its reader reads the float32 copy
    y, b = Executor(program, widen_bf16=True).run([x], {"batch": 3})
    want = torch.relu(torch.nn.functional.linear(x.float(), module.fc.weight.float(), module.fc.bias.float())) * 2
    torch.testing.assert_close(y, want.to(torch.bfloat16), rtol=0, atol=0)
    assert b.dtype == torch.bfloat16 and torch.equal(b, module.fc.bias.to(torch.bfloat16))


def test_attrs_naming_bf16_are_widened():
    attrs = {"dtype": "bfloat16", "args": [{"$in": 0}, {"$dtype": "bfloat16"}, [1, "bfloat16"]], "keep": "float16"}
    assert compute_precision._widen_attrs(attrs) == {
        "dtype": "float32", "args": [{"$in": 0}, {"$dtype": "float32"}, [1, "float32"]], "keep": "float16"}


@pytest.fixture
def probe_again():
    """torch's oneDNN ops are probed once per process, at the ISA selected then: a probe made under a cap is
    forgotten afterwards, so later tests see this CPU's results."""
    from ipexconvert.backends.cpu.self_check import torch_ops
    yield
    torch_ops.reset()


def test_the_executor_decides_from_the_isa(tiny_cnn, monkeypatch, probe_again):
    program, _, _ = tiny_cnn
    monkeypatch.setenv("IPEXCONVERT_MAX_ISA", "avx2")
    assert Executor(program).bf16_compute == "float32"
    assert compute_precision.bf16_compute_dtype("avx512") == "float32"
    assert compute_precision.bf16_compute_dtype("avx512_bf16") == "bfloat16"
    assert compute_precision.bf16_compute_dtype("amx") == "bfloat16"
    if "avx512_bf16" in supported_levels():
        monkeypatch.delenv("IPEXCONVERT_MAX_ISA")
        no_faster = compute_precision.bf16_no_faster_than_fp32(selected_isa())
        assert Executor(program).bf16_compute == ("float32" if no_faster else "bfloat16")


def test_bf16_widens_where_it_is_no_faster_except_in_decoders(tiny_cnn, monkeypatch):
    """Intel at avx512_bf16 (no AMX): bf16 arithmetic is no faster than float32 FMA, so compute-bound graphs widen at
    load; a decoder (KV-cache inputs) keeps bf16 on every level, which halves the bytes its decode steps read (below
    avx512_bf16 its kernels compute in float32 from the bf16 values). AMX keeps bf16."""
    from ipexconvert.backends.cpu.kernels import _torch_onednn
    from ipexconvert.ir import Graph

    program, _, _ = tiny_cnn
    decoder = Graph.model_validate({**program.graph.model_dump(), "inputs": ["past_key_0", *program.graph.inputs],
                                    "values": {**program.graph.model_dump()["values"],
                                               "past_key_0": program.graph.values[program.graph.inputs[0]].model_dump()}})
    for intel in (True, False):
        monkeypatch.setattr(_torch_onednn, "mkl_runs_float32_linear", lambda intel=intel: intel)
        assert compute_precision.widens_at_load("avx512_bf16", program.graph) == intel
        assert not compute_precision.widens_at_load("avx512_bf16", decoder)
        assert not compute_precision.widens_at_load("amx", program.graph)
        assert compute_precision.widens_at_load("avx512_vnni", program.graph)  # no native bf16: float32
        assert compute_precision.widens_at_load("avx2", program.graph)
        assert not compute_precision.widens_at_load("avx512_vnni", decoder)  # bf16 weights, float32 kernels
        assert not compute_precision.widens_at_load("avx2", decoder)
        assert "decoders from bf16 weights" in compute_precision.describe("avx2")
        assert ("decoders in bf16" in compute_precision.describe("avx512_bf16")) == intel
