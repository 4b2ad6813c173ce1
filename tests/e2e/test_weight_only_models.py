"""Weight-only quantization end to end on the tiny Llama example (example:tiny-llama): --dtype int4 and weight-only
int8 through ipexconvert.api.optimize, the artifact loaded as a user would and its logits compared with eager
PyTorch on fresh token ids: top-1 agreement of the next-token prediction and the cosine of each logit row.

The budgets are what round-to-nearest gives this random-weight model (int4 g128: cosine ~0.986 on the example
inputs, top-1 agreement ~0.8 over 64 rows; int8 per channel ~0.9999); real checkpoints, whose logits are far from
uniform, agree more."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ipexconvert.api import load_artifact, optimize
from ipexconvert.inspection import summarize

LLAMA_EXPORTS = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                   reason="torch.export < 2.13 cannot prove a guard in transformers' Llama")
pytestmark = [LLAMA_EXPORTS, pytest.mark.filterwarnings("ignore::FutureWarning")]
pytest.importorskip("transformers")

def _logit_rows(outputs) -> torch.Tensor:
    first = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
    return first.detach().float().reshape(-1, first.shape[-1])


def _agreement(model, eager, example: dict[str, torch.Tensor], rounds: int = 16, batch: int = 4,
               cache_dtype: torch.dtype = torch.float32) -> tuple[float, float]:
    """(top-1 agreement, lowest row cosine) of the logits over `rounds` batches of random token ids shaped like the
    example's, `batch` sequences each (the other inputs, e.g. a past cache, repeated from the example; the model
    gets its cache in `cache_dtype`)."""
    g = torch.Generator().manual_seed(11)
    example = {k: v.repeat(batch, *[1] * (v.dim() - 1)) if v.dim() and v.shape[0] == 1 else v for k, v in example.items()}
    got, want = [], []
    for _ in range(rounds):
        inputs = dict(example)
        inputs["input_ids"] = torch.randint(3, 1000, example["input_ids"].shape, generator=g)
        got.append(_logit_rows(model(**{k: v.to(cache_dtype) if k.startswith("past_") else v for k, v in inputs.items()})))
        with torch.no_grad():
            want.append(_logit_rows(eager(**inputs)))
    got, want = torch.cat(got), torch.cat(want)
    top1 = (got.argmax(-1) == want.argmax(-1)).double().mean().item()
    return top1, F.cosine_similarity(got.double(), want.double(), dim=-1).min().item()


def _check(result, min_top1: float, min_cosine: float) -> None:
    model = load_artifact(result.path)
    names = [s.kernel_name for s in model.executor.steps if s.op == "woq_linear"]
    assert names and all(n.startswith("native:woq_linear@") for n in names), names
    top1, cosine = _agreement(model, result.source.eager, result.example_inputs)
    assert top1 >= min_top1 and cosine >= min_cosine, (top1, cosine)


def test_int4_tiny_llama(tmp_path):
    result = optimize("example:tiny-llama", dtype="int4", output=tmp_path / "llama.int4.ipxc")
    m = result.manifest
    assert m.dtype == "int4" and m.op_histogram.get("woq_linear", 0) >= 4 and m.accuracy.passed
    changes = {p.name: p.changes for p in m.passes}
    assert changes["weight_only_quantize"]["float_lm_head"] == 1  # the LM head stays float by default
    assert changes["merge_linears"]["groups_merged"] >= 2  # q/k/v and gate/up of each layer
    assert summarize(result.path)["weight_only"] == {"int4 g128 symmetric, int8 activations": m.op_histogram["woq_linear"]}
    _check(result, min_top1=0.7, min_cosine=0.95)


def test_weight_only_int8_tiny_llama(tmp_path):
    result = optimize("example:tiny-llama", dtype="int8", int8_scheme="weight-only", output=tmp_path / "llama.woq8.ipxc")
    m = result.manifest
    assert m.dtype == "int8" and m.op_histogram.get("woq_linear", 0) >= 4 and m.quantization is None
    assert "calibrate" not in [p.name for p in m.passes]
    _check(result, min_top1=0.95, min_cosine=0.999)


def test_int4_settings_reach_the_pass(tmp_path):
    # float activations: this test is about the weight settings (with int8 activations on top the teacher-forced
    # budget still holds, but top-1 on the random example ids drops to ~0.67)
    result = optimize("example:tiny-llama", dtype="int4", group_size=32, weight_only={"symmetric": False,
                      "quantize_lm_head": True, "activations": "float"}, output=tmp_path / "llama.int4g32.ipxc")
    changes = {p.name: p.changes for p in result.manifest.passes}["weight_only_quantize"]
    assert changes["float_lm_head"] == 0
    _check(result, min_top1=0.7, min_cosine=0.95)


def test_int4_with_int8_activations_tiny_llama(tmp_path):
    result = optimize("example:tiny-llama", dtype="int4", weight_only={"activations": "int8"},
                      output=tmp_path / "llama.int4a8.ipxc")
    layers = [n.attrs for n in load_artifact(result.path).graph.nodes if n.op == "woq_linear"]
    assert layers and all(a["activations"] == "int8" for a in layers)
    _check(result, min_top1=0.7, min_cosine=0.95)


def test_int8_with_int8_activations_tiny_llama(tmp_path):
    """int8 weights and int8-rounded activations run the integer GEMM (woq_gemm_w8a8) for prefill and decode."""
    result = optimize("example:tiny-llama", dtype="int8", int8_scheme="weight-only", weight_only={"activations": "int8"},
                      output=tmp_path / "llama.w8a8.ipxc")
    layers = [n.attrs for n in load_artifact(result.path).graph.nodes if n.op == "woq_linear"]
    assert layers and all(a["activations"] == "int8" and a["bits"] == 8 for a in layers)
    _check(result, min_top1=0.9, min_cosine=0.99)


def test_int4_bf16_activations_tiny_llama(tmp_path, monkeypatch):
    """activations "bf16": the quantized layers read bf16, the KV cache crosses the signature in bf16, the scales
    stay float32; a CPU without bf16 arithmetic keeps the bf16 values and computes in float32 (kernels that widen
    as they read), and the same artifact widened whole at load (as non-decoders are there) agrees as well."""
    result = optimize("example:tiny-llama", dtype="int4", weight_only={"activations": "bf16"},
                      output=tmp_path / "llama.int4bf16.ipxc")
    m = result.manifest
    assert m.accuracy.passed and m.op_histogram.get("woq_linear", 0) >= 4
    changes = {p.name: p.changes for p in m.passes}
    assert changes["cache_in_compute_dtype"]["cache_tensors"] >= 2
    assert summarize(result.path)["weight_only"] == {"int4 g128 symmetric, bf16 activations": m.op_histogram["woq_linear"]}
    model = load_artifact(result.path)
    graph = model.graph
    woq = [n for n in graph.nodes if n.op == "woq_linear"]
    assert all(graph.values[n.inputs[0]].dtype == "bfloat16" and graph.values[n.inputs[2]].dtype == "float32"
               for n in woq)
    assert {graph.values[name].dtype for name in graph.inputs if name.startswith("past_")} == {"bfloat16"}
    top1, cosine = _agreement(model, result.source.eager, result.example_inputs, cache_dtype=torch.bfloat16)
    assert top1 >= 0.7 and cosine >= 0.95, (top1, cosine)
    from ipexconvert.backends.cpu import compute_precision
    from ipexconvert.backends.cpu.isa import selected_isa

    assert model.executor.bf16_compute == compute_precision.bf16_compute_dtype(selected_isa())  # never widened whole
    monkeypatch.setattr(compute_precision, "widens_at_load", lambda isa, graph: True)
    wide = load_artifact(result.path)
    assert wide.executor.bf16_compute == "float32"
    wide_top1, wide_cosine = _agreement(wide, result.source.eager, result.example_inputs, cache_dtype=torch.bfloat16)
    assert wide_top1 >= 0.7 and wide_cosine >= 0.95, (wide_top1, wide_cosine)


def test_int4_with_a_bf16_kv_cache_tiny_llama(tmp_path):
    """kv_cache "bf16" (--kv-cache bf16): float32 activations, the cache in bf16 at the signature and in the native
    kernels (rope_kv_append writes it, decode attention reads it), half the bytes a position; the logits agree with
    eager as the float-cache artifact's do, and greedy generation gives the float-cache artifact's tokens."""
    result = optimize("example:tiny-llama", dtype="int4", kv_cache="bf16", output=tmp_path / "llama.int4kv16.ipxc")
    plain = optimize("example:tiny-llama", dtype="int4", output=tmp_path / "llama.int4.ipxc")
    assert {p.name: p.changes for p in result.manifest.passes}["kv_cache_bf16"]["cache_tensors"] == 4
    model, float_cache = load_artifact(result.path), load_artifact(plain.path)
    assert {model.graph.values[n].dtype for n in model.graph.inputs if n.startswith("past_")} == {"bfloat16"}
    assert summarize(result.path)["decoder"]["cache_bytes_per_token"] * 2 == \
        summarize(plain.path)["decoder"]["cache_bytes_per_token"]
    kernels = {s.op: s.kernel_name for s in model.executor.steps if s.op in ("rope_kv_append", "sdpa")}
    assert all(name.startswith("native:") for name in kernels.values()), kernels
    top1, cosine = _agreement(model, result.source.eager, result.example_inputs, cache_dtype=torch.bfloat16)
    assert top1 >= 0.7 and cosine >= 0.95, (top1, cosine)
    prompt = torch.randint(3, 1000, (1, 12), generator=torch.Generator().manual_seed(5))
    got = model.generate(prompt, max_new_tokens=16, stop_at_eos=False)
    want = float_cache.generate(prompt, max_new_tokens=16, stop_at_eos=False)
    assert got.new_ids[0][:8] == want.new_ids[0][:8]
