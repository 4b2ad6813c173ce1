"""generate() on the GPU: a decoder artifact made on the CPU decodes over static caches (runtime/static_cache.py),
its decode step captured once in a CUDA graph and replayed for every token and every later generation, with the
CPU's tokens (fp32) and logits (bf16, teacher-forced). Without a GPU (CI) these skip with the reason."""
from __future__ import annotations

import pytest
import torch

import ipexconvert
import tiny_decoder
from ipexconvert.backends.cuda import unavailable_reason
from ipexconvert.errors import UserInputError
from ipexconvert.runtime.decoder import GrowingCache
from tiny_decoder import TinyDecoder

NO_GPU = unavailable_reason()
pytestmark = pytest.mark.skipif(NO_GPU is not None, reason=f"needs a CUDA GPU: {NO_GPU}")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("cuda_decode")
    made = {dtype: ipexconvert.optimize(TinyDecoder(), tiny_decoder.example_inputs(), dtype=dtype,
                                        dynamic_dims=tiny_decoder.dynamic_dims(), output=folder / f"tiny.{dtype}.ipxc").path
            for dtype in ("fp32", "bf16")}
    # weight-only int4 (no accuracy gate: the random model is judged here, against its own CPU run)
    made["int4"] = ipexconvert.optimize(TinyDecoder(), tiny_decoder.example_inputs(), dtype="int4",
                                        dynamic_dims=tiny_decoder.dynamic_dims(), output=folder / "tiny.int4.ipxc",
                                        woq={"guard": False}, min_cosine=0.0, min_top1_agreement=0.0,
                                        max_perplexity_ratio=1e9).path
    # int4 weights, everything else in bf16 (weight_only.activations "bf16": the GPU's int4 choice)
    made["int4-bf16"] = ipexconvert.optimize(TinyDecoder(), tiny_decoder.example_inputs(), dtype="int4",
                                             dynamic_dims=tiny_decoder.dynamic_dims(), output=folder / "tiny.int4bf16.ipxc",
                                             woq={"guard": False, "activations": "bf16"}, min_cosine=0.0,
                                             min_top1_agreement=0.0, max_perplexity_ratio=1e9).path
    # the KV cache as int8 rows (--kv-cache int8), written and read by the Triton kernels: float32, and int4
    # weights with bf16 activations (the codes multiply bf16 q on the tensor cores)
    made["fp32-kv8"] = ipexconvert.optimize(TinyDecoder(), tiny_decoder.example_inputs(), dtype="fp32",
                                            kv_cache="int8", dynamic_dims=tiny_decoder.dynamic_dims(),
                                            output=folder / "tiny.kv8.ipxc").path
    made["int4-bf16-kv8"] = ipexconvert.optimize(
        TinyDecoder(), tiny_decoder.example_inputs(), dtype="int4", kv_cache="int8",
        dynamic_dims=tiny_decoder.dynamic_dims(), output=folder / "tiny.int4bf16.kv8.ipxc",
        woq={"guard": False, "activations": "bf16"}, min_cosine=0.0, min_top1_agreement=0.0,
        max_perplexity_ratio=1e9).path
    # Llama's layer (RMSNorm, SwiGLU), groups of 32 so that every projection is int4: the GPU joins each norm and
    # the gate with the projection after it (backends/cuda/prologues.py)
    made["int4-bf16-llama"] = ipexconvert.optimize(
        TinyDecoder(llama=True), tiny_decoder.example_inputs(), dtype="int4", dynamic_dims=tiny_decoder.dynamic_dims(),
        output=folder / "tiny.llama.int4bf16.ipxc", woq={"guard": False, "activations": "bf16", "group_size": 32},
        min_cosine=0.0, min_top1_agreement=0.0, max_perplexity_ratio=1e9).path
    # the same with int8 activations: the GPU's dp4a kernels (woq_rows_dp4a), the norms and gate inside them too
    made["int4-a8-llama"] = ipexconvert.optimize(
        TinyDecoder(llama=True), tiny_decoder.example_inputs(), dtype="int4", dynamic_dims=tiny_decoder.dynamic_dims(),
        output=folder / "tiny.llama.int4a8.ipxc", woq={"guard": False, "activations": "int8", "group_size": 32},
        min_cosine=0.0, min_top1_agreement=0.0, max_perplexity_ratio=1e9).path
    return made


def _prompt(batch: int, length: int, seed: int) -> torch.Tensor:
    return torch.randint(0, tiny_decoder.VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("batch, length", [(1, 9), (2, 5)])
def test_gpu_generates_the_cpu_tokens_from_one_captured_step(artifacts, batch, length):
    cpu = ipexconvert.load_artifact(artifacts["fp32"])
    gpu = ipexconvert.load_artifact(artifacts["fp32"], device="cuda")
    assert gpu.static_cache is not None, gpu.static_cache_refusal
    prompt = _prompt(batch, length, seed=length)
    want = cpu.generate(prompt, max_new_tokens=40, stop_at_eos=False).new_ids
    assert gpu.generate(prompt, max_new_tokens=40, stop_at_eos=False).new_ids == want
    graphs = gpu.static_cache.runner.graph_status()
    assert list(graphs.values()) == ["graph"], graphs  # one decode step captured; the prompt ran eagerly
    # a second generation with another prompt replays the same graph (same buffers), and is right again
    again = _prompt(batch, length + 3, seed=99)
    assert (gpu.generate(again, max_new_tokens=12, stop_at_eos=False).new_ids
            == cpu.generate(again, max_new_tokens=12, stop_at_eos=False).new_ids)
    assert gpu.static_cache.runner.graph_status() == graphs


@pytest.mark.parametrize("dtype", ["bf16", "int4", "int4-bf16", "int4-bf16-llama", "int4-a8-llama", "fp32-kv8",
                                   "int4-bf16-kv8"])
def test_logits_on_the_gpu_match_the_cpu_teacher_forced(artifacts, dtype):
    """bf16, int4 (the GPU's Triton woq kernel against the CPU's native ones, both the same dequantized
    float32 arithmetic up to the order of the sums), int4 with bf16 activations and with int8 ones (integer sums on
    both); the decode step's attention is the GPU's Triton kernel over the static caches, and Llama's norms and gate
    run inside the projections."""
    cpu = ipexconvert.load_artifact(artifacts[dtype])
    gpu = ipexconvert.load_artifact(artifacts[dtype], device="cuda")
    assert gpu.static_cache is not None, gpu.static_cache_refusal
    prompt = _prompt(1, 12, seed=3)
    tokens = cpu.generate(prompt, max_new_tokens=16, stop_at_eos=False).new_ids[0]
    growing, static = GrowingCache(cpu.decoder), gpu.static_cache
    attention = {(s.op, s.kernel_name) for s in static.runner.executor.steps if s.op in ("sdpa", "sdpa_woq_linear")}
    # the attention on its Triton kernel, or joined with a weight-only output projection (attention_prologues.py)
    assert attention and attention <= {("sdpa", "triton:sdpa_rows"),
                                       ("sdpa_woq_linear", "triton:sdpa_woq_linear_rows")}, dtype
    assert {s.kernel_name for s in static.runner.executor.steps if s.op == "rope_kv_write"} <= {
        "triton:rope_kv_write_in_place"}, dtype
    if dtype.endswith("llama"):
        integer = "_dp4a" if "a8" in dtype else ""
        assert (("sdpa_woq_linear", "triton:sdpa_woq_linear_rows") in attention) == (integer == ""), attention
        assert {s.kernel_name for s in static.runner.executor.steps if s.op == "prologue_woq_linear"} == {
            f"triton:rms_norm_woq_linear_rows{integer}", f"triton:silu_mul_woq_linear_rows{integer}"}
    a = growing.start(prompt, 28, torch.device("cpu"))
    b = static.start(prompt, 28, torch.device("cuda", torch.cuda.current_device()))
    for token in [None, *tokens[:-1]]:
        if token is not None:
            a, b = growing.advance(torch.tensor([[token]])), static.advance(torch.tensor([[token]]))
        la, lb = a[:, -1].float(), b[:, -1].float().cpu()
        assert torch.nn.functional.cosine_similarity(la, lb).item() > 0.999


def test_prompts_of_different_lengths_give_the_cpu_tokens(artifacts):
    """A batch of prompts of different lengths (runtime/decoder.RowByRow: a growing cache per row, no static
    cache) on the GPU: the CPU's tokens, and the static cache's graph still serves the next batch of one length."""
    cpu = ipexconvert.load_artifact(artifacts["fp32"])
    gpu = ipexconvert.load_artifact(artifacts["fp32"], device="cuda")
    rows = [_prompt(1, length, seed=length)[0].tolist() for length in (7, 3)]
    want = cpu.generate(rows, max_new_tokens=10, stop_at_eos=False).new_ids
    assert gpu.generate(rows, max_new_tokens=10, stop_at_eos=False).new_ids == want
    prompt = _prompt(2, 5, seed=1)
    assert (gpu.generate(prompt, max_new_tokens=6, stop_at_eos=False).new_ids
            == cpu.generate(prompt, max_new_tokens=6, stop_at_eos=False).new_ids)
    assert list(gpu.static_cache.runner.graph_status().values()) == ["graph"]


def test_a_prompt_id_outside_the_table_is_refused_and_generation_still_works(artifacts):
    gpu = ipexconvert.load_artifact(artifacts["fp32"], device="cuda")
    bad = _prompt(1, 6, seed=5)
    bad[0, 2] = tiny_decoder.VOCAB + 3
    with pytest.raises(UserInputError, match="outside an embedding table"):
        gpu.generate(bad, max_new_tokens=4, stop_at_eos=False)
    good = _prompt(1, 6, seed=5)
    cpu = ipexconvert.load_artifact(artifacts["fp32"])
    assert (gpu.generate(good, max_new_tokens=6, stop_at_eos=False).new_ids
            == cpu.generate(good, max_new_tokens=6, stop_at_eos=False).new_ids)


def test_caches_remade_for_another_batch_are_captured_again(artifacts):
    """A new batch remakes the static caches and drops the graphs captured on the old ones; the next capture, into a
    pool that lost its last graph, must still succeed (torch 2.11 failed an allocator assert there and the step ran
    eagerly, 6x slower, until graphs.py started a new pool)."""
    gpu = ipexconvert.load_artifact(artifacts["fp32"], device="cuda")
    cpu = ipexconvert.load_artifact(artifacts["fp32"])
    for batch in (1, 2, 1):
        prompt = _prompt(batch, 7, seed=batch)
        got = gpu.generate(prompt, max_new_tokens=5, stop_at_eos=False).new_ids
        assert got == cpu.generate(prompt, max_new_tokens=5, stop_at_eos=False).new_ids
        status = gpu.static_cache.runner.graph_status()
        assert status and all(v == "graph" for v in status.values()), status


def test_programmatic_dependent_launch_changes_no_logit(artifacts, monkeypatch):
    """The weight-only GEMVs launched with programmatic dependent launch (backends/cuda/kernels/_triton.PDL) start
    while the kernel before them finishes: the decode step's logits must be the same bits with and without it, step
    after step over the static caches (a wait placed too late would read a half-written input)."""
    from ipexconvert.backends.cuda.kernels import _triton

    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("programmatic dependent launch needs compute capability 9 or later")
    runs = {}
    prompt = _prompt(1, 12, seed=4)
    for pdl in (False, True):
        monkeypatch.setattr(_triton, "PDL", pdl)
        gpu = ipexconvert.load_artifact(artifacts["int4-bf16-llama"], device="cuda")
        static = gpu.static_cache
        logits = [static.start(prompt, 40, torch.device("cuda", torch.cuda.current_device()))[:, -1].clone()]
        for token in range(3, 27):
            logits.append(static.advance(torch.tensor([[token]]))[:, -1].clone())
        runs[pdl] = (torch.stack(logits).cpu(), gpu.generate(prompt, max_new_tokens=24, stop_at_eos=False).new_ids)
    assert torch.equal(runs[True][0], runs[False][0])
    assert runs[True][1] == runs[False][1]


@pytest.mark.parametrize("dtype", ["fp32", "int4-bf16-llama"])
def test_the_position_table_changes_no_logit(artifacts, dtype, monkeypatch):
    """The captured decode step gathers its position's rows (the mask, and the learned positions' ids or the rotary
    rows) from a table made at the capture (runtime/position_table.py): the same bits as the step that computes them,
    step after step, and the same greedy tokens."""
    from ipexconvert.runtime import position_table

    runs = {}
    prompt = _prompt(1, 12, seed=6)
    gpu_device = torch.device("cuda", torch.cuda.current_device())
    for tabulated in (False, True):
        monkeypatch.setattr(position_table, "MAX_TABLE_BYTES", (32 << 20) if tabulated else 0)
        gpu = ipexconvert.load_artifact(artifacts[dtype], device="cuda")
        static = gpu.static_cache
        logits = [static.start(prompt, 40, gpu_device)[:, -1].clone()]
        for token in range(3, 27):
            logits.append(static.advance(torch.tensor([[token]]))[:, -1].clone())
        captured = [e for e in static.runner._graphs.values() if e.graph is not None]
        assert [e.table is not None for e in captured] == [tabulated], [e.table_error for e in captured]
        runs[tabulated] = (torch.stack(logits).cpu(), gpu.generate(prompt, max_new_tokens=24, stop_at_eos=False).new_ids)
    assert torch.equal(runs[True][0], runs[False][0])
    assert runs[True][1] == runs[False][1]


@pytest.mark.parametrize("dtype, batch", [("fp32", 1), ("fp32", 2), ("int4-bf16-llama", 1)])
def test_chained_greedy_steps_give_the_step_by_step_tokens(artifacts, dtype, batch, monkeypatch):
    """Greedy generation replays one graph that feeds each step's arg-max to the next (GreedyChain): the same tokens as
    a replay, an arg-max and copies a step, at every length (2: the chain's first step alone), and again when the
    captured chain is replayed by a later generation."""
    from ipexconvert.runtime import static_cache

    prompt = _prompt(batch, 11, seed=batch)
    runs = {}
    for chained in (False, True):
        monkeypatch.setattr(static_cache, "CHAINED", chained)
        gpu = ipexconvert.load_artifact(artifacts[dtype], device="cuda")
        runs[chained] = [gpu.generate(prompt, max_new_tokens=n, stop_at_eos=False).new_ids for n in (30, 2, 1, 17)]
        status = gpu.static_cache.runner.graph_status()
        assert any(key.endswith("(greedy chain)") for key in status) == chained, status
        assert set(status.values()) == {"graph"}, status
    assert runs[True] == runs[False]
    assert runs[True][3] == [row[:17] for row in runs[True][0]]
