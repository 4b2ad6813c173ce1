"""kv_cache_int8 (`--kv-cache int8`): a float decoder's caches become int8 rows (head_dim codes and a float32 scale,
ir/ops/_kv_int8.py) at the signature and in the appending nodes, everything else unchanged; given the same cache,
the first layer's presents are the float32 program's quantized once and the outputs differ by int8-sized amounts;
the pipeline puts the pass before prepack; an fp32 or bf16 decoder with an int8 cache is judged by int8's budget, a
weight-only one teacher-forced. (Its refusals, shared with kv_cache_bf16: test_kv_cache_bf16.py.)"""
from __future__ import annotations

import pytest
import torch

from ipexconvert import load_artifact, optimize
from ipexconvert.examples.decoder_cache import decoder_example_inputs
from ipexconvert.inspection import summarize
from ipexconvert.ir.ops._kv_int8 import dequantize_rows, quantize_rows
from ipexconvert.passes.pipeline import pipeline_for
from pass_helpers import NEEDS_LLAMA_EXPORT, run_program, tiny_llama_with_cache_pass

pytest.importorskip("transformers")
pytestmark = NEEDS_LLAMA_EXPORT


def test_the_caches_become_int8_rows_and_the_outputs_follow_the_quantized_cache():
    module, before, after, caches = tiny_llama_with_cache_pass("kv_cache_int8")
    graph = after.graph
    head_dim = before.graph.values[caches[0]].shape[3]
    assert [graph.values[n].dtype for n in caches] == ["int8"] * 8
    assert {graph.values[n].shape[3] for n in caches} == {head_dim + 4}  # the codes, then the scale's 4 bytes
    assert graph.values["logits"].dtype == "float32"
    assert after.graph.op_histogram() == before.graph.op_histogram()  # no node added anywhere
    for batch, seq, past in ((1, 5, 0), (2, 1, 9)):
        inputs = decoder_example_inputs(module.shape, batch, seq, past, seed=past)
        rows = {k: quantize_rows(v) if k.startswith("past_") else v for k, v in inputs.items()}
        dims = {"batch": batch, "seq": seq, "past": past}
        # the float32 program given the values the int8 cache holds
        values = {k: dequantize_rows(v) if k.startswith("past_") else v for k, v in rows.items()}
        want = dict(zip(before.graph.outputs, run_program(before, values, dims)))
        got = dict(zip(graph.outputs, run_program(after, rows, dims)))
        for name in graph.outputs:
            if name.startswith("present_") and name.endswith("_0"):  # the first layer's: float32's quantized once
                assert got[name].dtype == torch.int8 and torch.equal(got[name], quantize_rows(want[name])), name
            elif name.startswith("present_"):  # the past positions kept as given, the new ones close
                assert torch.equal(got[name][:, :, :past], rows[name.replace("present", "past")])
                scale = want[name].abs().max().item()
                torch.testing.assert_close(dequantize_rows(got[name]), want[name], rtol=0, atol=3e-2 * scale)
            else:  # attention reads this step's keys and values as int8 rows too
                cosine = torch.nn.functional.cosine_similarity(got[name].flatten(), want[name].flatten(), dim=0)
                assert got[name].dtype == torch.float32 and cosine > 0.999, (name, cosine)


def test_the_pipeline_runs_it_before_prepack():
    assert pipeline_for("int4", kv_cache="int8")[-2:] == ["kv_cache_int8", "prepack"]
    assert pipeline_for("fp32", kv_cache="int8")[-2:] == ["kv_cache_int8", "prepack"]


def test_an_fp32_decoder_with_an_int8_cache_is_judged_by_int8s_budget_and_generates(tmp_path):
    """The stored example cache, the check and generate() all take int8 rows; a quarter-plus of the float32 cache's
    bytes a position; the native kernels write and read them; greedy tokens as the float cache's for 8 steps."""
    result = optimize("example:tiny-llama", dtype="fp32", kv_cache="int8", output=tmp_path / "t.ipxc")
    plain = optimize("example:tiny-llama", dtype="fp32", output=tmp_path / "f.ipxc")
    accuracy = result.manifest.accuracy
    assert accuracy.passed and accuracy.dtype == "fp32" and "every sample's cosine" in accuracy.judged_by
    assert min(o.cosine for o in accuracy.outputs) > 0.999
    head_dim = plain.manifest.inputs[1].spec.shape[3]
    per_position = summarize(result.path)["decoder"]["cache_bytes_per_token"]
    assert per_position * 4 * head_dim == summarize(plain.path)["decoder"]["cache_bytes_per_token"] * (head_dim + 4)
    model, float_cache = load_artifact(result.path), load_artifact(plain.path)
    kernels = {s.op: s.kernel_name for s in model.executor.steps if s.op in ("rope_kv_append", "sdpa")}
    assert all(name.startswith("native:") for name in kernels.values()), kernels
    prompt = torch.randint(3, 1000, (1, 12), generator=torch.Generator().manual_seed(5))
    got = model.generate(prompt, max_new_tokens=16, stop_at_eos=False)
    want = float_cache.generate(prompt, max_new_tokens=16, stop_at_eos=False)
    assert got.new_ids[0][:8] == want.new_ids[0][:8]


def test_an_int4_decoder_with_an_int8_cache_passes_the_teacher_forced_check(tmp_path):
    result = optimize("example:tiny-llama", dtype="int4", kv_cache="int8", output=tmp_path / "q.ipxc")
    assert {p.name: p.changes for p in result.manifest.passes}["kv_cache_int8"]["cache_tensors"] == 4
    decoder = result.manifest.accuracy.decoder
    assert decoder.passed and decoder.mean_cosine >= 0.97, decoder
