"""The runtime picks the native kernels: a converted tiny-bert runs its norms natively and
matches eager PyTorch; other ops are picked or declined as their factories say."""
from __future__ import annotations

import pytest
import torch

import native_ops as native
from ipexconvert import load_artifact, optimize
from ipexconvert.backends.cpu import native_lib
from ipexconvert.examples import get_example
from ipexconvert.runtime import kernels
from ipexconvert.backends.cpu.kernels import softmax as native_softmax_module

pytestmark = pytest.mark.skipif(not native.available(), reason="ipexconvert._native is not built")


def without_native_factories(monkeypatch):
    """Leave only non-native factories in the registry (so the references run)."""
    for key, factories in list(kernels.KERNELS.items()):
        monkeypatch.setitem(kernels.KERNELS, key, [f for f in factories if not f.__name__.startswith("native_")])


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()


@pytest.fixture(scope="module", params=["fp32", "bf16"])
def tiny_bert(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("native") / f"tiny-bert.{request.param}.ipxc"
    optimize("example:tiny-bert", dtype=request.param, output=path)
    example = get_example("tiny-bert")
    return request.param, path, example


def test_tiny_bert_runs_native_norms_and_matches_eager(tiny_bert, monkeypatch):
    dtype, path, example = tiny_bert
    monkeypatch.delenv("IPEXCONVERT_MAX_ISA", raising=False)
    model = load_artifact(path)
    names = {s.op: s.kernel_name for s in model.executor.steps if s.op in ("layer_norm", "add_layer_norm")}
    level = native.kernel_level("layer_norm")
    assert names == {"layer_norm": f"native:layer_norm@{level}", "add_layer_norm": f"native:add_layer_norm@{level}"}

    inputs = example.example_inputs(3)
    with torch.no_grad():
        eager = example.build()(**inputs)
    eager = eager[0] if isinstance(eager, tuple) else getattr(eager, "last_hidden_state", eager)
    got = model(**inputs)
    got = got[0] if isinstance(got, (tuple, list)) else got
    budget = 1e-3 if dtype == "fp32" else 0.1
    assert relative_error(got, eager) < budget

    # Same artifact with the reference kernels only: native changes next to nothing.
    without_native_factories(monkeypatch)
    reference_model = load_artifact(path)
    assert all(not s.kernel_name.startswith("native:") for s in reference_model.executor.steps)
    want = reference_model(**inputs)
    want = want[0] if isinstance(want, (tuple, list)) else want
    assert relative_error(got, want) < (1e-5 if dtype == "fp32" else 2e-2)


def test_the_isa_cap_reaches_the_kernels(tiny_bert, monkeypatch):
    _, path, example = tiny_bert
    monkeypatch.setenv("IPEXCONVERT_MAX_ISA", "generic")
    model = load_artifact(path)
    assert {s.kernel_name for s in model.executor.steps if s.op == "add_layer_norm"} == {"native:add_layer_norm@generic"}
    assert model(**example.example_inputs(2)) is not None


def test_no_extension_means_reference_kernels(tiny_bert, monkeypatch):
    _, path, _ = tiny_bert
    monkeypatch.setattr(native_lib, "raw", None)
    assert not native.available()
    model = load_artifact(path)
    assert {s.kernel_name for s in model.executor.steps if s.op == "layer_norm"} == {"reference:layer_norm"}


class Activations(torch.nn.Module):
    """softmax (last dim and dim 1), gelu (both forms), silu and rms_norm, with nothing to fuse into."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.RMSNorm(24, eps=1e-6)
        torch.nn.init.normal_(self.norm.weight)

    def forward(self, x):
        a = torch.softmax(x, -1) + torch.softmax(x, 1)
        b = torch.nn.functional.gelu(x) * torch.nn.functional.gelu(a, approximate="tanh")
        return self.norm(torch.nn.functional.silu(b) + x)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_other_ops_pick_native_where_they_can(tmp_path, dtype):
    module = Activations().eval()
    x = torch.randn(2, 5, 24)
    result = optimize(module, {"x": x}, dtype=dtype, output=tmp_path / "act.ipxc",
                      passes=["remove_identity", "dead_code"] + (["to_bf16"] if dtype == "bf16" else []))
    model = load_artifact(result.path)
    names = sorted(s.kernel_name.split("@")[0] for s in model.executor.steps
                   if s.op in ("softmax", "gelu", "silu", "rms_norm"))
    # softmax over dim 1 is declined (the kernel reduces over the last dim only).
    assert names == ["native:gelu", "native:gelu", "native:rms_norm", "native:silu", "native:softmax",
                     "reference:softmax"]
    with torch.no_grad():
        want = module(x)
    assert relative_error(model(x), want) < (1e-5 if dtype == "fp32" else 0.05)


def test_non_contiguous_input_falls_back_at_run_time():
    """A kernel that gets a strided view (e.g. from a reference permute) runs the reference."""
    from ipexconvert.ir.opdef import get_op
    from ipexconvert.ir.spec import TensorSpec

    x = torch.randn(6, 10)
    spec = TensorSpec.of(x)
    ctx = kernels.NodeContext(op="softmax", attrs=get_op("softmax").parse_attrs({"dim": -1}), constants=(None,),
                              input_specs=(spec,), output_specs=(spec,), device="cpu", isa=native.selected_level())
    kernel = native_softmax_module.native_softmax(ctx)
    view = torch.randn(10, 6).t()
    assert torch.allclose(kernel.fn([view], {}), torch.softmax(view, -1), atol=1e-6)
    assert torch.allclose(kernel.fn([x], {}), torch.softmax(x, -1), atol=1e-6)
