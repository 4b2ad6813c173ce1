"""Fixed plans (Executor.run_fixed): a model called again and again with one input shape runs from a plan bound to
buffers made once. Its results are the executor's bit for bit on every call (each call's own inputs, not the
plan's first), what it hands back is not overwritten by the next call, an image holding NaN or Inf is still found by
the first step (int8 refuses, fp32 answers NaN), a plan of too few bound steps or too many buffer bytes is dropped,
and IPEXCONVERT_FIXED_PLANS=0 turns them off."""
from __future__ import annotations

import pytest
import torch

import ipexconvert
from ipexconvert.backends.cpu import onednn_direct as dnnl
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.errors import UserInputError
from ipexconvert.runtime import executor as executor_module
from ipexconvert.runtime.executor import FIXED_PLAN_AFTER

BINDS = dnnl.usable(selected_isa())  # the CNN's convolutions run on the direct oneDNN layers, which bind


@pytest.fixture(scope="module", params=["fp32", "int8"])
def cnn(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("fixed") / f"tiny-cnn.{request.param}.ipxc"
    extra = {"calib_synthetic": 4} if request.param == "int8" else {}
    ipexconvert.optimize("example:tiny-cnn", dtype=request.param, output=path, **extra)
    return request.param, path


def _images(count: int, batch: int = 2) -> list[torch.Tensor]:
    return [torch.randn(batch, 3, 64, 64, generator=torch.Generator().manual_seed(seed)) for seed in range(count)]


def _fixed_plans(model) -> list:
    return [plan for (varying, _, _), plan in model.executor._bound.items() if not varying]


def test_calls_after_the_first_ones_run_from_a_fixed_plan_with_the_executors_results(cnn):
    dtype, path = cnn
    model = ipexconvert.load_artifact(path)
    kept = []
    for x in _images(FIXED_PLAN_AFTER + 6):
        got = model.run_dict({"pixel_values": x})["logits"]
        want = model.executor.run([x], {"batch": 2})[0]  # the same steps, one by one
        assert torch.equal(got, want)
        kept.append((x, got.clone(), got))
    for x, copy, got in kept:  # a later call did not write into what an earlier one handed back
        assert torch.equal(copy, got)
    plans = _fixed_plans(model)
    if BINDS:
        assert len(plans) == 1
        plan = plans[0]
        assert plan.refills <= executor_module._FIXED_PLAN_REFILLS * len(model.executor.main)
        assert len(plan.entries) < plan.bound_steps  # runs of bound calls made as one native call each


def test_a_fixed_plan_still_finds_nan_and_inf_in_the_image(cnn):
    dtype, path = cnn
    model = ipexconvert.load_artifact(path)
    images = _images(FIXED_PLAN_AFTER + 2)
    for x in images[:FIXED_PLAN_AFTER]:
        model.run_dict({"pixel_values": x})
    bad = images[0].clone()
    bad[0, 1, 3, 4] = float("nan")  # at the call that would bind the plan
    if dtype == "int8":
        with pytest.raises(UserInputError):
            model.run_dict({"pixel_values": bad})
    else:
        assert torch.isnan(model.run_dict({"pixel_values": bad})["logits"][0]).all()
    for x in images[FIXED_PLAN_AFTER:]:
        assert torch.equal(model.run_dict({"pixel_values": x})["logits"], model.executor.run([x], {"batch": 2})[0])
    assert _fixed_plans(model) or not BINDS
    for value in (float("nan"), float("inf")):
        bad = images[0].clone()
        bad[1, 2, 30, 40] = value
        if dtype == "int8":
            with pytest.raises(UserInputError, match="input pixel_values holds NaN or Inf"):
                model.run_dict({"pixel_values": bad})
        else:
            assert torch.isnan(model.run_dict({"pixel_values": bad})["logits"][1]).all()
    got = model.run_dict({"pixel_values": images[1]})["logits"]  # the fixed plan again, with the right answer
    assert torch.equal(got, model.executor.run([images[1]], {"batch": 2})[0])


@pytest.mark.parametrize("limit", ["_FIXED_PLAN_BYTES", "_FIXED_PLAN_REFILLS"])
def test_a_plan_holding_too_many_bytes_or_refills_is_dropped(cnn, monkeypatch, limit):
    _, path = cnn
    monkeypatch.setattr(executor_module, limit, 0)  # (bytes: it stops binding as soon as its buffers pass the limit)
    model = ipexconvert.load_artifact(path)
    for x in _images(FIXED_PLAN_AFTER + 3):
        assert torch.equal(model.run_dict({"pixel_values": x})["logits"], model.executor.run([x], {"batch": 2})[0])
    assert not _fixed_plans(model)
    if BINDS:
        assert list(model.executor._fixed_calls.values()) == [-1]  # (tried once, then never again for these dims)


def test_each_shape_gets_its_own_plan_and_the_switch_turns_them_off(cnn, monkeypatch):
    _, path = cnn
    model = ipexconvert.load_artifact(path)
    for batch in (1, 3):
        for x in _images(FIXED_PLAN_AFTER + 2, batch):
            assert torch.equal(model.run_dict({"pixel_values": x})["logits"],
                               model.executor.run([x], {"batch": batch})[0])
    assert len(_fixed_plans(model)) == (2 if BINDS else 0)
    monkeypatch.setenv("IPEXCONVERT_FIXED_PLANS", "0")
    model = ipexconvert.load_artifact(path)
    for x in _images(FIXED_PLAN_AFTER + 2, 1):
        model.run_dict({"pixel_values": x})
    assert not model.executor._bound and not model.executor._fixed_calls
