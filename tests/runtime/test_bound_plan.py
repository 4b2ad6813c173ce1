"""Bound plans (runtime/bound_plan.py): a decoder's decode steps run from buffers made once give the executor's
logits bit for bit (fp32 and weight-only int8/int4, across the growing cache's reallocation), bound kernels are
really used, every fixed-shape value is refreshed on every call (different inputs, in-place convolutions, views),
outputs handed back are not overwritten by the next call, and a plan busy in another thread is not shared."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ipexconvert
import tiny_decoder
from ipexconvert.backends.cpu import native_lib
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.kernels import kv_append
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.passes import PassOptions, run_pipeline
from ipexconvert.passes.pipeline import PIPELINES
from ipexconvert.runtime import bound_plan
from ipexconvert.runtime.decoder import GrowingCache
from ipexconvert.runtime.executor import Executor
from tiny_decoder import TinyDecoder

LLAMA_EXPORTS = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                   reason="torch.export of transformers' Llama needs torch >= 2.13 (see docs/architecture.md)")


def _steps_both_ways(model, prompt: torch.Tensor, steps: int) -> None:
    """Greedy steps through the executor and through bound plans side by side: equal logits every step."""
    executor_steps, bound_steps = GrowingCache(model.decoder), GrowingCache(model.decoder)
    executor_steps.bind_steps = False
    logits = executor_steps.start(prompt, prompt.shape[1] + steps, torch.device("cpu"))
    bound_logits = bound_steps.start(prompt, prompt.shape[1] + steps, torch.device("cpu"))
    for step in range(steps):
        assert torch.equal(logits, bound_logits), f"step {step}"
        ids = logits[:, -1].argmax(-1, keepdim=True)
        logits, bound_logits = executor_steps.advance(ids), bound_steps.advance(ids)
    assert torch.equal(logits, bound_logits)


def _rounds_rows_in_torch(node, level: str) -> bool:
    """A woq_linear layer on int8 activations where none of woq_gemm's integer kernels has a build at this level
    (generic): torch rounds its rows to int8 first, and the layer does not bind (WoqGemm.bind)."""
    if node.op != "woq_linear" or node.attrs.get("activations") != "int8":
        return False
    integer = ("woq_gemm_w8a8",) if node.attrs["bits"] == 8 else ("woq_gemm_w4a8", "woq_gemv_i8")
    return all(native_lib.kernel_level(kernel, level) == "none" for kernel in integer)


def _plan(model):
    plans = list(model.executor._bound.values())
    assert len(plans) == 1
    return plans[0]


@LLAMA_EXPORTS
@pytest.mark.parametrize("dtype", ["fp32", "int8", "int4"])
def test_bound_decode_steps_give_the_executors_logits(dtype, tmp_path, monkeypatch):
    scheme = {"int8_scheme": "weight-only"} if dtype == "int8" else {}
    path = ipexconvert.optimize("example:tiny-llama", dtype=dtype, output=tmp_path / f"llama.{dtype}.ipxc", **scheme).path
    model = ipexconvert.load_artifact(path)
    prompt = torch.randint(3, 1000, (2, 9), generator=torch.Generator().manual_seed(4))
    monkeypatch.setattr(kv_append, "SPARE_POSITIONS", 8)  # the cache's buffers are made again every 8 steps
    _steps_both_ways(model, prompt, 30)
    plan = _plan(model)
    kernels = {step.kernel_name.split("@")[0] for step in model.executor.main}
    if native_lib.available():
        # every linear, norm and gate, and the cache append and attention, are bound calls (no executor Python);
        # at the generic level the weight-only linears on int8 activations are not (_rounds_rows_in_torch)
        nodes = {node.name: node for node in model.graph.nodes}
        level = selected_isa()
        rounded = {s.node for s in model.executor.main
                   if s.op == "woq_linear" and _rounds_rows_in_torch(nodes[s.node], level)}
        bindable = [s for s in model.executor.main
                    if (s.bind is not None or s.bind_varying is not None) and s.node not in rounded]
        assert plan.bound_steps == len(bindable) > 0, kernels
        assert any(k.startswith("native:woq_linear") for k in kernels) == (dtype != "fp32")
        # runs of consecutive bound calls are recorded lists (one native call each step: no Python between them)
        recorded = [call for call, _ in plan.entries if isinstance(call, native_lib.raw.CallList)]
        alone = [call for call, _ in plan.entries if call is not None and not isinstance(call, native_lib.raw.CallList)]
        assert sum(len(r) for r in recorded) + len(alone) == len(plan.bound_calls)
        if dtype != "fp32" and not rounded:  # (fp32: a norm or gate between oneDNN linears, which are not bound)
            assert max(map(len, recorded)) >= 4  # o_proj, rms_norm, gate/up, silu_mul, down, ...
        # the cache appends and attentions are recorded steps, reading the cache length from the plan's cell
        layers = sum(step.op == "rope_kv_append" for step in model.executor.main)
        assert layers > 0 and plan.recorded_steps == 2 * layers
        # the position's rotary rows and mask are tables read by recorded row copies: no Python step for them
        assert not [refill for _, refill in plan.entries if refill is not None and refill.length_only]
        if dtype != "fp32" and not rounded:  # the layers' calls in one recorded run (after the embedding's lookup,
            # a refill here)
            assert sum(call is not None for call, _ in plan.entries) <= 2


@LLAMA_EXPORTS
def test_the_positions_rows_are_computed_ahead_block_by_block(tmp_path):
    """Past the first block of lengths the plan computed its rotary rows and mask for, it computes the next."""
    path = ipexconvert.optimize("example:tiny-llama", dtype="int8", int8_scheme="weight-only",
                                output=tmp_path / "llama.int8.ipxc").path
    model = ipexconvert.load_artifact(path)
    _steps_both_ways(model, torch.randint(3, 1000, (1, 6), generator=torch.Generator().manual_seed(2)), 75)
    plan = _plan(model)
    assert plan._rows_end > 6 + 75 > 6 + 2 * bound_plan._TABLE_BLOCK


@LLAMA_EXPORTS
def test_generations_stepped_in_turn_keep_their_own_caches(tmp_path):
    """Two generations advanced alternately through one model: each call's caches are not the ones the plan's last
    call returned, so it binds again rather than append into the other's buffers; each gives its executor logits."""
    path = ipexconvert.optimize("example:tiny-llama", dtype="int4", output=tmp_path / "llama.int4.ipxc").path
    model = ipexconvert.load_artifact(path)
    prompts = [torch.randint(3, 1000, (1, n), generator=torch.Generator().manual_seed(n)) for n in (5, 8)]
    runs = []
    for prompt in prompts:
        reference, bound = GrowingCache(model.decoder), GrowingCache(model.decoder)
        reference.bind_steps = False
        logits = reference.start(prompt, prompt.shape[1] + 8, torch.device("cpu"))
        runs.append([reference, bound, logits, bound.start(prompt, prompt.shape[1] + 8, torch.device("cpu"))])
    for step in range(6):
        for run in runs:
            reference, bound, logits, bound_logits = run
            assert torch.equal(logits, bound_logits), step
            ids = logits[:, -1].argmax(-1, keepdim=True)
            run[2], run[3] = reference.advance(ids), bound.advance(ids)
    for _, _, logits, bound_logits in runs:
        assert torch.equal(logits, bound_logits)


@pytest.mark.parametrize("llama", [False, True])
def test_bound_steps_of_a_hand_written_decoder(llama, tmp_path):
    """Learned positions read by the step number (the steps that depend on the cache length run each call),
    LayerNorm and GELU (reference kernels, refilled) or RMSNorm and SwiGLU, Linear layers without weight-only
    quantization."""
    path = ipexconvert.optimize(TinyDecoder(llama=llama), tiny_decoder.example_inputs(),
                                dynamic_dims=tiny_decoder.dynamic_dims(), output=tmp_path / "tiny.ipxc").path
    model = ipexconvert.load_artifact(path)
    prompt = torch.randint(0, tiny_decoder.VOCAB, (3, 5), generator=torch.Generator().manual_seed(1))
    _steps_both_ways(model, prompt, tiny_decoder.MAX_POSITIONS - 6)
    assert _plan(model).entries


class Block(nn.Module):
    """Convolutions with residual sums (in-place where safe), a view read at the end, a linear and a norm."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.c1, self.c2 = nn.Conv2d(4, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.c3 = nn.Conv2d(8, 8, 1)
        self.fc, self.norm = nn.Linear(8 * 36, 16), nn.LayerNorm(16)

    def forward(self, x):
        r = F.relu(self.c1(x))
        y = F.relu(self.c3(F.relu(self.c2(r))) + r)
        return self.norm(F.gelu(self.fc(torch.flatten(y, 1)))), y.mean(dim=(2, 3))


def test_a_bound_plan_refreshes_every_value_and_hands_out_copies():
    module = Block().eval()
    inputs = [torch.randn(2, 4, 6, 6, generator=torch.Generator().manual_seed(seed)) for seed in range(4)]
    program = program_from_module(module, {"x": inputs[0]}, {})
    run_pipeline(program, PIPELINES["cpu", "fp32"], PassOptions(dtype="fp32"))
    executor = Executor(program)
    dims: dict[str, int] = {}
    kept = []
    for x in inputs:
        want = executor.run([x], dims)
        got = executor.run_bound([x], dims, frozenset({"unused"}))
        assert all(torch.equal(w, g) for w, g in zip(want, got))
        kept.append(got)
    assert len(executor._bound) == 1
    for x, got in zip(inputs, kept):  # later calls did not write into what earlier calls returned
        with torch.no_grad():
            want = module(x)
        assert all(torch.allclose(w, g, atol=1e-4, rtol=1e-4) for w, g in zip(want, got))


def test_a_busy_plan_leaves_the_call_to_the_executor():
    module = Block().eval()
    x = torch.randn(1, 4, 6, 6)
    program = program_from_module(module, {"x": x}, {})
    run_pipeline(program, PIPELINES["cpu", "fp32"], PassOptions(dtype="fp32"))
    executor = Executor(program)
    executor.run_bound([x], {}, frozenset({"unused"}))
    plan = next(iter(executor._bound.values()))
    calls = []
    original = plan.run
    plan.run = lambda *a: calls.append(1) or original(*a)
    with plan.lock:  # another thread's call in progress
        got = executor.run_bound([x], {}, frozenset({"unused"}))
    assert not calls and all(torch.equal(w, g) for w, g in zip(executor.run([x], {}), got))
    executor.run_bound([x], {}, frozenset({"unused"}))
    assert calls == [1]


def test_a_plan_keeps_no_cache_it_was_given_alive(tmp_path):
    import gc
    import weakref

    path = ipexconvert.optimize(TinyDecoder(llama=True), tiny_decoder.example_inputs(),
                                dynamic_dims=tiny_decoder.dynamic_dims(), output=tmp_path / "tiny.ipxc").path
    model = ipexconvert.load_artifact(path)
    steps = GrowingCache(model.decoder)
    logits = steps.start(torch.randint(0, tiny_decoder.VOCAB, (1, 4)), 8, torch.device("cpu"))
    steps.advance(logits[:, -1].argmax(-1, keepdim=True))  # binds the plan, given these caches
    given = [weakref.ref(t) for t in steps.past.values()]
    steps.advance(logits[:, -1].argmax(-1, keepdim=True))
    del steps
    gc.collect()
    assert _plan(model).entries and all(ref() is None for ref in given)


def test_a_call_the_backend_cannot_record_splits_a_run_into_recorded_stretches():
    """A run of bound calls with one the backend refuses (a call of torch's) is not made from Python whole: the
    stretches before and after it are recorded, each as one call, and every call runs once, in order."""
    made: list[str] = []

    def call(name: str):
        return lambda: made.append(name)

    calls = {name: call(name) for name in "abxcde"}
    refused = {calls["x"]}

    def capture_calls(run: list):
        if any(c in refused for c in run):
            return None
        return lambda: [c() for c in run]

    entries = [(calls[n], None) for n in "abxcd"] + [(None, "refill")] + [(calls["e"], None)]
    merged = bound_plan._runs_captured(entries, capture_calls)
    assert len(merged) == 5  # [a b], x, [c d], the refill, e
    assert merged[1] == (calls["x"], None) and merged[3] == (None, "refill") and merged[4] == (calls["e"], None)
    made.clear()
    for c, refill in merged:
        if c is not None:
            c()
    assert made == list("abxcde")
    # a backend that records nothing (the GPU's): every call as it is
    assert bound_plan._runs_captured(entries, lambda run: None) == entries
