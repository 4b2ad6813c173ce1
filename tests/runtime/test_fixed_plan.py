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
from ipexconvert.backends.cpu.kernels._torch_onednn import int8_allowed
from ipexconvert.errors import UserInputError
from ipexconvert.runtime import executor as executor_module
from ipexconvert.runtime.bound_plan import BoundPlan
from ipexconvert.runtime.executor import FIXED_PLAN_AFTER, FIXED_PLAN_TIMED, FIXED_PLAN_WARM, keeps_fixed_plan
from ipexconvert.runtime.kernels import CHOOSING_CALLS

ONEDNN = dnnl.usable(selected_isa())  # the direct oneDNN layers run here, whose convolutions bind


def _binds(dtype: str) -> bool:
    """The CNN's convolutions run on the direct oneDNN layers here (below VNNI its int8 ones run our own int8 GEMM,
    which does not bind: its plan is then dropped for its refills)."""
    return ONEDNN and (dtype != "int8" or int8_allowed(selected_isa()))
SETTLED = FIXED_PLAN_AFTER + 2 * (FIXED_PLAN_WARM + FIXED_PLAN_TIMED)  # calls after which the plan is kept or not


@pytest.fixture(autouse=True)
def plans_win(monkeypatch):
    """The plan's measured calls win (whatever this machine's timings), unless a test says otherwise."""
    monkeypatch.setattr(executor_module, "keeps_fixed_plan", lambda planned, stepped: True)


@pytest.fixture(scope="module", params=["fp32", "int8"])
def cnn(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("fixed") / f"tiny-cnn.{request.param}.ipxc"
    extra = {"calib_synthetic": 4} if request.param == "int8" else {}
    ipexconvert.optimize("example:tiny-cnn", dtype=request.param, output=path, **extra)
    return request.param, path


def _images(count: int, batch: int = 2) -> list[torch.Tensor]:
    return [torch.randn(batch, 3, 64, 64, generator=torch.Generator().manual_seed(seed)) for seed in range(count)]


def _refused(model, inputs: list, dims: dict) -> bool:
    """A plan of these inputs' dims would be dropped for its refills or bytes (not for its measured time)."""
    plan = BoundPlan(model.executor, inputs, dims, frozenset())
    return not plan.worth_keeping(executor_module._FIXED_PLAN_REFILLS * len(model.executor.main),
                                  executor_module._FIXED_PLAN_BYTES)


def _fixed_plans(model) -> list:
    return [plan for (varying, _, _), plan in model.executor._bound.items() if not varying]


def test_calls_after_the_first_ones_run_from_a_fixed_plan_with_the_executors_results(cnn):
    dtype, path = cnn
    model = ipexconvert.load_artifact(path)
    kept = []
    for x in _images(SETTLED + 3):
        got = model.run_dict({"pixel_values": x})["logits"]
        want = model.executor.run([x], {"batch": 2})[0]  # the same steps, one by one
        assert torch.equal(got, want)
        kept.append((x, got.clone(), got))
    for x, copy, got in kept:  # a later call did not write into what an earlier one handed back
        assert torch.equal(copy, got)
    plans = _fixed_plans(model)
    assert bool(plans) != _refused(model, [x], {"batch": 2})
    if _binds(dtype):
        assert len(plans) == 1
        plan = plans[0]
        assert plan.refills <= executor_module._FIXED_PLAN_REFILLS * len(model.executor.main)
        assert len(plan.entries) < plan.bound_steps  # runs of bound calls made as one native call each
        constants = {id(t) for t in model.executor.base_env if t is not None}  # (the plan's env starts from it)
        values = sum(t.numel() * t.element_size() for t in plan.env if isinstance(t, torch.Tensor) and id(t) not in constants)
        assert plan.buffer_bytes() < values / 2  # the values share the pool's blocks


def test_a_fixed_plan_still_finds_nan_and_inf_in_the_image(cnn):
    dtype, path = cnn
    model = ipexconvert.load_artifact(path)
    images = _images(SETTLED + 2)
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
    assert bool(_fixed_plans(model)) == _binds(dtype)
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
    dtype, path = cnn
    monkeypatch.setattr(executor_module, limit, 0)  # (bytes: it stops binding as soon as its buffers pass the limit)
    model = ipexconvert.load_artifact(path)
    for x in _images(SETTLED + 2):
        assert torch.equal(model.run_dict({"pixel_values": x})["logits"], model.executor.run([x], {"batch": 2})[0])
    assert not _fixed_plans(model)
    if _binds(dtype):
        assert list(model.executor._fixed_calls.values()) == [-1]  # (tried once, then never again for these dims)


def test_the_plan_is_kept_only_where_its_calls_measured_faster(cnn, monkeypatch):
    """After FIXED_PLAN_AFTER calls, a block of calls from the plan and one step by step are timed; the plan stays
    only where its median won, and the benchmarks' warm-up (CHOOSING_CALLS) covers all of it."""
    assert SETTLED <= CHOOSING_CALLS
    dtype, path = cnn
    seen = []
    for verdict in (True, False):
        monkeypatch.setattr(executor_module, "keeps_fixed_plan",
                            lambda planned, stepped, verdict=verdict: seen.append((len(planned), len(stepped))) or verdict)
        model = ipexconvert.load_artifact(path)
        for x in _images(SETTLED + 2):
            model.run_dict({"pixel_values": x})
        assert bool(_fixed_plans(model)) == (verdict and _binds(dtype))
    if _binds(dtype):
        assert seen == [(FIXED_PLAN_TIMED, FIXED_PLAN_TIMED)] * 2
    assert keeps_fixed_plan([1.0, 3.0, 2.0], [2.5, 2.0, 3.0]) and not keeps_fixed_plan([2.1, 2.2, 2.3], [2.0, 1.0, 3.0])
    assert not keeps_fixed_plan([], [1.0])


def test_each_shape_gets_its_own_plan_and_the_switch_turns_them_off(cnn, monkeypatch):
    dtype, path = cnn
    model = ipexconvert.load_artifact(path)
    for batch in (1, 3):
        for x in _images(SETTLED + 2, batch):
            assert torch.equal(model.run_dict({"pixel_values": x})["logits"],
                               model.executor.run([x], {"batch": batch})[0])
    assert len(_fixed_plans(model)) == (2 if _binds(dtype) else 0)
    monkeypatch.setenv("IPEXCONVERT_FIXED_PLANS", "0")
    model = ipexconvert.load_artifact(path)
    for x in _images(SETTLED + 2, 1):
        model.run_dict({"pixel_values": x})
    assert not model.executor._bound and not model.executor._fixed_calls


def test_the_buffer_pool_hands_a_block_on_only_after_its_last_reader():
    """_BufferPool: a value's block (and the block a view or an in-place result of it lives in) is taken again only
    by steps after every reader of those values; a block no output names stays the call's own."""
    from types import SimpleNamespace

    from ipexconvert.runtime.bound_plan import _BufferPool, _taking_from, buffer

    # slot 0: input; step 0 -> slot 1; step 1 views slot 1 as slot 2; step 2 reads slot 2 -> slot 3;
    # step 3 reads slot 3 -> slot 4 (the output); step 4 takes a scratch and makes slot 5 (read by nothing)
    steps = [SimpleNamespace(inputs=[0], outputs=[1]), SimpleNamespace(inputs=[1], outputs=[2]),
             SimpleNamespace(inputs=[2], outputs=[3]), SimpleNamespace(inputs=[3], outputs=[4]),
             SimpleNamespace(inputs=[4], outputs=[5])]
    pool = _BufferPool(steps, output_slots=[4])
    env: list = [torch.zeros(8)] + [None] * 5
    with _taking_from(pool):
        env[1] = buffer((8,), torch.float32)
        pool.settle(0, [1], env)
        env[2] = env[1].view(2, 4)  # a view: lives in slot 1's block
        pool.settle(1, [2], env)
        env[3] = buffer((8,), torch.float32)  # slot 1's block is still read (through the view) by this step
        assert env[3].data_ptr() != env[1].data_ptr()
        pool.settle(2, [3], env)
        env[4] = buffer((4,), torch.float32)  # slot 1's block is free now (its last reader, step 2, has run)
        assert env[4].data_ptr() == env[1].data_ptr()
        pool.settle(3, [4], env)
        scratch = buffer((8,), torch.float32)  # slot 3's block is free again: taken as a scratch no output names
        assert scratch.data_ptr() == env[3].data_ptr()
        env[5] = buffer((2,), torch.float64)
        pool.settle(4, [5], env)
        assert buffer((8,), torch.float32).data_ptr() not in (scratch.data_ptr(), env[4].data_ptr())
    assert pool.bytes == 3 * 64  # three 64-byte blocks: the output's, the scratch's, and one more


@pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                    reason="torch.export < 2.13 cannot prove a guard in transformers' Llama")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_a_decoder_prompt_called_again_gives_the_executors_logits_and_caches(tmp_path):
    """A decoder's prompt step with one shape (its past caches given as inputs) runs from a fixed plan: the steps
    reading the caches run as kernels (not their decode-step bind_varying forms, whose caches grow), so the logits
    and the presents are the executor's on every call."""
    pytest.importorskip("transformers")
    result = ipexconvert.optimize("example:tiny-llama", dtype="int4", output=tmp_path / "tiny-llama.int4.ipxc")
    model = ipexconvert.load_artifact(result.path)
    example = dict(result.example_inputs)
    g = torch.Generator().manual_seed(3)
    for _ in range(SETTLED + 2):
        inputs = {**example, "input_ids": torch.randint(3, 1000, example["input_ids"].shape, generator=g)}
        tensors = model.signature.bind((), inputs)
        want = model.executor.run(tensors, model.signature.check(tensors))
        got = model.run_list(tensors)
        assert all(torch.equal(w, h) for w, h in zip(want, got))
    assert bool(_fixed_plans(model)) != _refused(model, tensors, model.signature.check(tensors))


def test_fixed_plans_evict_no_decode_plan(tmp_path):
    """Fixed plans and a decoder's decode plans are kept apart: prompts of several lengths run from fixed plans
    leave the decode plan generate() bound in place, and each kind keeps at most _BOUND_PLANS."""
    pytest.importorskip("transformers")
    result = ipexconvert.optimize("example:tiny-llama", dtype="fp32", output=tmp_path / "tiny-llama.ipxc")
    model = ipexconvert.load_artifact(result.path)
    model.generate(torch.tensor([[5, 6, 7]]), max_new_tokens=4, stop_at_eos=False)
    decode_keys = [k for k in model.executor._bound if k[0]]
    assert decode_keys
    example = dict(result.example_inputs)
    for length in (3, 5, 7, 9):
        ids = torch.randint(3, 1000, (1, length), generator=torch.Generator().manual_seed(length))
        tensors = model.signature.bind((), {**example, "input_ids": ids})  # (the example's past caches kept)
        dims = model.signature.check(tensors)
        want = model.executor.run(tensors, dims)
        got = model.executor.run_bound(tensors, dims, frozenset())
        assert all(torch.equal(w, g) for w, g in zip(want, got))
    assert all(k in model.executor._bound for k in decode_keys)
    assert 0 < len(_fixed_plans(model)) <= executor_module._BOUND_PLANS
