"""Converted example models load onto the oneDNN kernels and match eager PyTorch."""
from __future__ import annotations

import pytest
import torch
from torch_onednn_helpers import bf16_linear_kernels, float_linear_kernel, rel_err

from ipexconvert.backends.cpu import compute_precision
from ipexconvert.backends.cpu import onednn_direct as dnnl
from ipexconvert.accuracy import flatten_outputs
from ipexconvert.api import load_artifact, optimize
from ipexconvert.examples import get_example
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.self_check import torch_ops as probe
from ipexconvert.backends.cpu.kernels._torch_onednn import isa_allows
from ipexconvert.backends.cpu.kernels.conv2d import torch_onednn_conv2d

HAS_BF16 = "bfloat16" in probe.checked_dtypes() and isa_allows(selected_isa(), "bfloat16")
BF16 = pytest.param("bf16", marks=pytest.mark.skipif(not HAS_BF16, reason="no native bf16"))
# Artifact vs eager float32: float32 within BatchNorm-folding noise; bf16 well inside its 0.1 budget.
TOLERANCE = {"fp32": 1e-4, "bf16": 5e-2}


@pytest.fixture(scope="module")
def convert(tmp_path_factory):
    """optimize() once per (example, dtype) for the whole module."""
    done: dict[tuple[str, str], object] = {}

    def get(name: str, dtype: str):
        if (name, dtype) not in done:
            out = tmp_path_factory.mktemp("onednn") / f"{name}.{dtype}.ipxc"
            done[name, dtype] = optimize(f"example:{name}", dtype=dtype, output=out).path
        return done[name, dtype]

    return get


def kernels_by_op(model) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for step in model.executor.steps:
        found.setdefault(step.op, set()).add(step.kernel_name)
    return found


def check_against_eager(name: str, model, dtype: str, batches=(1, 3)) -> None:
    example = get_example(name)
    module = example.build()
    for batch in batches:  # the artifact's batch dim is dynamic: one plan, two sizes
        feed = example.example_inputs(batch)
        with torch.no_grad():
            want = flatten_outputs(module(**feed))
        got = model.run_list([feed[n] for n in model.signature.input_names])
        for g, w in zip(got, want):
            if w.is_floating_point():
                assert rel_err(g, w) < TOLERANCE[dtype], (name, dtype, batch)


@pytest.mark.parametrize("dtype", ["fp32", BF16])
def test_tiny_cnn(convert, dtype):
    model = load_artifact(convert("tiny-cnn", dtype))
    kernels = kernels_by_op(model)
    # our direct oneDNN conv where it is usable, else torch's oneDNN operator (avx2 up), else (generic) the reference
    level = selected_isa()
    if dnnl.usable(level):
        conv = "onednn_direct:conv2d"
    else:
        conv = "torch_onednn:conv2d" if torch_onednn_conv2d.runs_at(level) is None else "reference:conv2d"
    assert kernels["conv2d"] == {conv}
    # float32 linear goes to MKL's packed GEMM on Intel CPUs, to oneDNN elsewhere; bf16 to oneDNN where it computes
    # in bf16 (else it was widened to float32 at load: compute_precision.py).
    in_bf16 = dtype == "bf16" and model.executor.bf16_compute == "bfloat16"
    assert kernels["linear"] == {float_linear_kernel("bfloat16" if in_bf16 else "float32")}
    check_against_eager("tiny-cnn", model, dtype)


@pytest.mark.skipif(not HAS_BF16, reason="no native bf16")
def test_tiny_bert_bf16(convert):
    model = load_artifact(convert("tiny-bert", "bf16"))
    widened = model.executor.bf16_compute == "float32"  # compute_precision.py: bf16 no faster than float32 here
    assert widened == compute_precision.bf16_no_faster_than_fp32(selected_isa())
    linears = kernels_by_op(model)["linear"]
    if widened:
        assert linears == {"torch_mkl:linear"}
    else:  # on AMX, ours for the layers bf16_amx_gemm takes (tiny-bert: every one but the pooler's tanh)
        assert linears == bf16_linear_kernels()
    check_against_eager("tiny-bert", model, "bf16")


def test_reference_kernels_when_switched_off(convert, monkeypatch):
    monkeypatch.setenv("IPEXCONVERT_ONEDNN", "0")
    model = load_artifact(convert("tiny-cnn", "fp32"))
    assert kernels_by_op(model)["conv2d"] == {"reference:conv2d"}
    check_against_eager("tiny-cnn", model, "fp32", batches=(2,))
