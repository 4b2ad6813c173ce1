"""load_artifact(): calling conventions, same results in a fresh process, and input checks
whose errors name the input and say how to fix the call."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from ipexconvert.api import load_artifact, optimize
from ipexconvert.errors import UserInputError
from ipexconvert.ir.dynamic_dims import DynamicDim

REPO = Path(__file__).resolve().parents[2]
PASSES = ["remove_identity", "dead_code"]


class Pooler(torch.nn.Module):
    """tokens [batch, seq, 8] float32, scale [batch, 4] float32 -> (pooled [batch, 4], per_token [batch, seq, 4])."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, tokens, scale):
        per_token = torch.tanh(self.fc(tokens))
        return per_token.mean(1) * scale, per_token


def inputs(batch: int = 2, seq: int = 5) -> dict[str, torch.Tensor]:
    return {"tokens": torch.randn(batch, seq, 8), "scale": torch.rand(batch, 4)}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    module = Pooler().eval()
    batch, seq = DynamicDim(name="batch", min=1, max=4), DynamicDim(name="seq", min=2, max=16)
    result = optimize(module, inputs(), dynamic_dims={"tokens": {0: batch, 1: seq}, "scale": {0: batch}},
                      output=tmp_path_factory.mktemp("runtime") / "pooler.ipxc", passes=PASSES)
    return module, result.path


@pytest.fixture(scope="module")
def model(converted):
    return load_artifact(converted[1])


def eager(module, feed):
    with torch.no_grad():
        return module(**feed)


def assert_outputs_equal(got, want):
    assert isinstance(got, tuple) and len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-6, rtol=1e-5)


def test_signature_names_inputs_outputs_and_dims(model):
    sig = model.signature
    assert sig.input_names == ["tokens", "scale"]
    assert len(sig.output_names) == 2
    assert sig.inputs[0].spec.shape == ["batch", "seq", 8]
    assert (sig.dims["batch"].min, sig.dims["batch"].max) == (1, 4)
    assert (sig.dims["seq"].min, sig.dims["seq"].max) == (2, 16)


def test_called_positionally(converted, model):
    feed = inputs()
    assert_outputs_equal(model(feed["tokens"], feed["scale"]), eager(converted[0], feed))


def test_called_by_keyword_in_any_order(converted, model):
    feed = inputs()
    assert_outputs_equal(model(scale=feed["scale"], tokens=feed["tokens"]), eager(converted[0], feed))


def test_called_with_mixed_positional_and_keyword(converted, model):
    feed = inputs()
    assert_outputs_equal(model(feed["tokens"], scale=feed["scale"]), eager(converted[0], feed))


def test_called_with_numpy_arrays(converted, model):
    feed = inputs()
    got = model(feed["tokens"].numpy(), feed["scale"].numpy())
    assert all(isinstance(g, torch.Tensor) for g in got)
    assert_outputs_equal(got, eager(converted[0], feed))


def test_non_contiguous_numpy_array_is_accepted(converted, model):
    feed = inputs()
    tokens = torch.randn(2, 8, 5).transpose(1, 2)  # [2, 5, 8], not contiguous
    got = model(tokens.numpy(), feed["scale"].numpy())
    assert_outputs_equal(got, eager(converted[0], {"tokens": tokens, "scale": feed["scale"]}))


def test_run_dict_returns_outputs_by_name(converted, model):
    feed = inputs()
    out = model.run_dict(feed)
    assert list(out) == model.signature.output_names
    assert_outputs_equal(tuple(out.values()), eager(converted[0], feed))


@pytest.mark.parametrize("batch, seq", [(1, 2), (4, 16), (3, 9)])
def test_any_size_within_the_dim_ranges_runs(converted, model, batch, seq):
    feed = inputs(batch, seq)
    assert_outputs_equal(model(**feed), eager(converted[0], feed))


FRESH_PROCESS = textwrap.dedent("""
    import sys
    from safetensors.torch import load_file, save_file
    from ipexconvert.api import load_artifact

    artifact, inputs_path, outputs_path = sys.argv[1:]
    model = load_artifact(artifact)
    save_file(model.run_dict(load_file(inputs_path)), outputs_path)
""")


def test_fresh_process_gives_the_same_outputs(converted, model, tmp_path):
    feed = inputs(3, 7)
    save_file(feed, str(tmp_path / "inputs.safetensors"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(converted[1]), str(tmp_path / "inputs.safetensors"),
                           str(tmp_path / "outputs.safetensors")], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    fresh = load_file(str(tmp_path / "outputs.safetensors"))
    here = model.run_dict(feed)
    assert list(fresh) != [] and set(fresh) == set(here)
    for name in here:
        torch.testing.assert_close(fresh[name], here[name], atol=1e-6, rtol=1e-6)


# ---- input errors ----------------------------------------------------------------------------------------------------


def _call_error(model, *args, **kwargs) -> UserInputError:
    with pytest.raises(UserInputError) as info:
        model(*args, **kwargs)
    assert info.value.fix, "every input error carries a fix"
    return info.value


def test_wrong_input_count_names_the_inputs(model):
    error = _call_error(model, inputs()["tokens"])
    assert "takes 2 input(s) (tokens, scale), got 1" in error.problem
    assert error.fix == "call it as model(tokens, scale)"


def test_unknown_input_name_lists_the_real_ones(model):
    feed = inputs()
    error = _call_error(model, tokens=feed["tokens"], scales=feed["scale"])
    assert "scales" in error.problem
    assert "tokens, scale" in error.fix


def test_input_given_twice_is_refused(model):
    feed = inputs()
    error = _call_error(model, feed["tokens"], tokens=feed["tokens"])
    assert "tokens given twice" in error.problem
    assert "once" in error.fix


def test_wrong_dtype_names_input_and_conversion(model):
    feed = inputs()
    error = _call_error(model, feed["tokens"].double(), feed["scale"])
    assert "input tokens has dtype float64, the model expects float32" in error.problem
    assert "tensor.to(torch.float32)" in error.fix


def test_wrong_rank_names_input_and_expected_shape(model):
    feed = inputs()
    error = _call_error(model, feed["tokens"], feed["scale"][0])
    assert "input scale has 1 dims" in error.problem
    assert "batchx4" in error.problem
    assert "reshape" in error.fix


def test_wrong_static_dim_names_input_axis_and_size(model):
    feed = inputs()
    error = _call_error(model, torch.randn(2, 5, 7), feed["scale"])
    assert "input tokens dim 2 is 7, the model expects 8" in error.problem
    assert "fixed" in error.fix and "named dim" in error.fix


@pytest.mark.parametrize("batch, seq, dim, size, bounds", [
    (2, 17, "seq", 17, "2..16"),
    (2, 1, "seq", 1, "2..16"),
    (5, 4, "batch", 5, "1..4"),
])
def test_dynamic_dim_outside_its_range_names_the_range(model, batch, seq, dim, size, bounds):
    error = _call_error(model, **inputs(batch, seq))
    assert f"input tokens dim {0 if dim == 'batch' else 1} ({dim}) is {size}, outside the range {bounds}" in error.problem
    assert f"keep {dim} within {bounds}" in error.fix


def test_inconsistent_shared_dim_between_inputs(model):
    error = _call_error(model, torch.randn(2, 5, 8), torch.rand(3, 4))
    assert "dim batch is 2 in one input and 3 in input scale" in error.problem
    assert "must agree" in error.fix


def test_non_tensor_input_is_refused(model):
    error = _call_error(model, [[0.0] * 8] * 5, inputs()["scale"])
    assert "input tokens is a list" in error.problem
    assert "numpy" in error.fix


def test_checks_happen_before_running(model):
    """A bad call raises our error, not a shape error from inside a kernel."""
    with pytest.raises(UserInputError):
        model(torch.randn(2, 5, 8), torch.rand(2, 5))


class OffsetPair(torch.nn.Module):
    """y is one longer than x along axis 1 (a derived dim: seq + 1)."""

    def forward(self, x, y):
        return x.sum(1) + y[:, 1:].sum(1)


@pytest.fixture(scope="module")
def derived_dim_model(tmp_path_factory):
    from ipexconvert.artifact import write_artifact
    from ipexconvert.frontend.torch.export import decompose, program_from_exported
    from ipexconvert.manifest import IOSpec, Manifest, SourceRecord

    seq = torch.export.Dim("seq", min=2, max=16)
    ep = torch.export.export(OffsetPair(), (torch.randn(2, 5), torch.randn(2, 6)), dynamic_shapes=({1: seq}, {1: seq + 1}))
    program = program_from_exported(decompose(ep), output_names=["total"])
    graph = program.graph
    manifest = Manifest(producer="test", torch_version=torch.__version__, created_at="2024-01-01T00:00:00+00:00",
                        source=SourceRecord(kind="export", location="OffsetPair"), dtype="fp32",
                        inputs=[IOSpec(name=n, spec=graph.values[n]) for n in graph.inputs],
                        outputs=[IOSpec(name=n, spec=graph.values[n]) for n in graph.outputs], dims=graph.dims)
    path = tmp_path_factory.mktemp("derived") / "offset.ipxc"
    write_artifact(path, program, manifest)
    return load_artifact(path)


def test_derived_dim_input_runs_when_consistent(derived_dim_model):
    x, y = torch.randn(2, 7), torch.randn(2, 8)
    assert derived_dim_model.signature.inputs[1].spec.shape[1] != derived_dim_model.signature.inputs[0].spec.shape[1]
    torch.testing.assert_close(derived_dim_model(x, y), OffsetPair()(x, y))


def test_derived_dim_inconsistent_with_its_base_dim_is_refused(derived_dim_model):
    error = _call_error(derived_dim_model, torch.randn(2, 7), torch.randn(2, 9))
    assert "input y dim 1 is 9, expected" in error.problem
    assert "= 8" in error.problem
    assert "consistent" in error.fix


@pytest.mark.parametrize("tensors", [
    lambda: [torch.randn(3, 6, 8), torch.rand(3, 4)],
    lambda: [torch.randn(3, 6, 8).transpose(0, 1).contiguous().transpose(0, 1), torch.rand(3, 4)],  # strided: fine
    lambda: [torch.randn(3, 6, 8), torch.rand(2, 4)],  # batch disagrees
    lambda: [torch.randn(3, 6, 8).double(), torch.rand(3, 4)],
    lambda: [torch.nn.Parameter(torch.randn(3, 6, 8)), torch.rand(3, 4)],  # a subclass: the full checks decide
    lambda: [torch.randn(3, 6, 8).to_sparse(), torch.rand(3, 4)],
])
def test_the_compiled_signature_check_agrees_with_the_full_one(model, tensors):
    """Signature.check answers from checks compiled once when every input passes them; whatever it does not accept
    goes to check_inputs, so both give the same dims or the same refusal."""
    from ipexconvert.runtime.model import check_inputs

    given = tensors()
    sig = model.signature
    try:
        want = check_inputs(sig.inputs, sig.dims, given, sig.device)
    except UserInputError as e:
        with pytest.raises(UserInputError, match=re.escape(e.problem)):
            sig.check(given)
        assert sig._expected.match(given) is None
    else:
        assert sig.check(given) == want


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_the_finite_scan_finds_every_nan_and_inf_and_only_them(dtype):
    from ipexconvert.runtime.model import _all_finite

    big = torch.finfo(dtype).max
    x = torch.randn(3, 1000).to(dtype)
    assert _all_finite(x)
    assert _all_finite(torch.empty(0, dtype=dtype))
    assert _all_finite(torch.full((64,), big, dtype=dtype))  # the sum overflows; every element is finite
    for bad in (float("nan"), float("inf"), -float("inf")):
        y = x.clone()
        y[2, 517] = bad
        assert not _all_finite(y)
    y = torch.full((64,), big, dtype=dtype)
    y[5] = float("nan")
    assert not _all_finite(y)
    y = x.clone()
    y[0, 0], y[1, 1] = float("inf"), -float("inf")  # their sum is NaN: still found
    assert not _all_finite(y)
