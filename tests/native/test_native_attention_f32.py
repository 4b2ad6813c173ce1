"""The fp32 attention kernel (attention_f32, FMA products: avx2 and avx512 builds) at every level this CPU runs
it, against the sdpa op's reference computed in float64, its argument checks, and the runtime's
choice of it for float32 sdpa nodes."""
from __future__ import annotations

import pytest
import torch

import native_ops as native
from ipexconvert import load_artifact, optimize
from ipexconvert.examples.bert import build_bert
from ipexconvert.examples.tiny_bert import TINY_BERT_CONFIG, tiny_bert_inputs
from ipexconvert.runtime import kernels
from ipexconvert.backends.cpu.kernels import sdpa as native_sdpa_module

import attention_cases
from attention_cases import assert_quantized_output_matches, normalised_error, padding_mask

# Every level this CPU runs at which the fp32 kernel runs (its avx2 and avx512 builds, also under higher caps).
LEVELS = [lvl for lvl in native.supported_levels() if native.kernel_level("attention_f32", lvl) != "none"] \
    if native.available() else []
pytestmark = pytest.mark.skipif(not LEVELS, reason="needs the native build on a CPU with AVX2")
F32_THRESHOLD = 1e-5  # normalised error against float64, as the other native kernels' fp32 cases


def reference(q, k, v, mask, scale=None):
    return attention_cases.reference(q, k, v, mask, scale, dtype=torch.float64)


SHAPES = [  # batch, heads, q_len, kv_len, head_dim: BERT-base, MiniLM, tails of the 6-query blocks and
    # 32-key pads, one key, one query, 16 and 48 wide heads (1 and 3 vectors), wide heads
    (1, 12, 128, 128, 64), (2, 12, 128, 128, 32), (2, 3, 37, 53, 64), (1, 2, 5, 1, 16), (1, 2, 1, 70, 48),
    (2, 4, 16, 32, 128), (1, 1, 130, 200, 96),
]


@pytest.fixture(params=LEVELS or ["none"])
def level(request):
    return request.param


@pytest.mark.parametrize("mask_kind", ["none", "float32", "bfloat16", "finite", "per_query"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_attention_f32_matches_reference(shape, mask_kind, level):
    batch, heads, q_len, kv_len, head_dim = shape
    torch.manual_seed(sum(shape))
    q = torch.randn(batch, heads, q_len, head_dim) * 2
    k, v = torch.randn(batch, heads, kv_len, head_dim), torch.randn(batch, heads, kv_len, head_dim)
    mask = {"none": None, "float32": padding_mask(batch, kv_len, torch.float32),
            "bfloat16": padding_mask(batch, kv_len, torch.bfloat16),
            "finite": padding_mask(batch, kv_len, torch.float32, torch.finfo(torch.float32).min),
            "per_query": torch.randn(batch, heads, q_len, kv_len)}[mask_kind]
    got = native.attention(q, k, v, mask, threads=2, max_isa=level)
    want = reference(q, k, v, mask)
    assert got.shape == want.shape and got.dtype == torch.float32
    assert torch.isfinite(got).all()
    assert normalised_error(got, want) <= F32_THRESHOLD
    # As accurate as torch's own fp32 attention, within a factor.
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else mask.float())
    assert normalised_error(got, want) <= 3 * normalised_error(theirs, want) + 1e-6


@pytest.mark.parametrize("mask_dtype", [torch.float32, torch.bfloat16], ids=["fp32-mask", "bf16-mask"])
def test_causal_and_padded_prompts_skip_only_keys_every_row_masks(mask_dtype, level):
    """A block of queries skips the keys past the last one any of its rows keeps (found 16 keys at a time from the
    end of each row): causal prompts, padding after a prompt, a -inf run inside the rows (never skipped), run
    lengths that are not multiples of 16."""
    torch.manual_seed(3)
    n = 100
    q, k, v = (torch.randn(2, 3, n, 64) for _ in range(3))
    mask = torch.zeros(n, n).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    mask = mask.expand(2, 3, n, n).clone()
    mask[1, :, :, 77:] = float("-inf")  # batch 1: its last 23 keys are padding
    mask[0, 1, :, 10:40] = float("-inf")  # a hole inside head 1's rows
    mask = mask.to(mask_dtype)
    got = native.attention(q, k, v, mask, threads=2, max_isa=level)
    assert torch.isfinite(got).all()
    assert normalised_error(got, reference(q, k, v, mask.float())) <= F32_THRESHOLD


@pytest.mark.parametrize("heads, kv_heads", [(14, 2), (4, 1), (6, 3)])
def test_grouped_query_heads_share_k_and_v(heads, kv_heads, level):
    """k and v with fewer heads than q (a decoder's prefill): query head h reads kv head h / (heads / kv_heads),
    as torch's attention with enable_gqa; a causal additive mask over a prompt of 37."""
    torch.manual_seed(heads)
    q = torch.randn(1, heads, 37, 64) * 2
    k, v = torch.randn(1, kv_heads, 37, 64), torch.randn(1, kv_heads, 37, 64)
    mask = torch.zeros(37, 37).masked_fill(torch.ones(37, 37, dtype=torch.bool).triu(1), float("-inf"))[None, None]
    got = native.attention(q, k, v, mask, threads=2, max_isa=level)
    rep = heads // kv_heads
    want = reference(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), mask)
    assert normalised_error(got, want) <= F32_THRESHOLD


def test_grouped_heads_must_divide_and_stay_float32(level):
    q = torch.randn(1, 6, 4, 32)
    with pytest.raises(ValueError, match="must divide"):
        native.attention(q, torch.randn(1, 4, 4, 32), torch.randn(1, 4, 4, 32))
    with pytest.raises(ValueError, match="as many as q"):
        native.attention(q.bfloat16(), torch.randn(1, 3, 4, 32).bfloat16(), torch.randn(1, 3, 4, 32).bfloat16())


def test_strided_views_threads_and_scale(level):
    attention_cases.assert_strided_views_threads_and_scale(torch.float32, level, F32_THRESHOLD, reference_dtype=torch.float64)


@pytest.mark.parametrize("multipliers", [False, True])
@pytest.mark.parametrize("code_dtype,zero_point", [(torch.uint8, 121), (torch.int8, -5)])
@pytest.mark.parametrize("shape", [SHAPES[0], SHAPES[2], SHAPES[5]], ids=lambda s: "x".join(map(str, s)))
def test_quantized_output_is_bit_identical_to_quantizing_the_fp32_output(shape, code_dtype, zero_point, multipliers,
                                                                        level):
    """The codes equal the quantize op's (per tensor, or with SmoothQuant multipliers along the
    hidden axis h * head_dim + d) applied to the fp32 output flattened to [batch, q_len, hidden]:
    an int8 model whose float ops stay fp32 folds its quantize into attention as well."""
    assert_quantized_output_matches(shape, torch.float32, code_dtype, zero_point, multipliers, level)



def test_rows_the_mask_removes_entirely_are_zero(level):
    attention_cases.assert_rows_the_mask_removes_are_zero(torch.float32, level)

def test_bad_arguments_are_refused_clearly():
    q = torch.randn(1, 2, 8, 64)
    with pytest.raises(ValueError, match="not a multiple of 16"):
        native.attention(q[..., :40], q[..., :40], q[..., :40])
    with pytest.raises(ValueError, match="all of one dtype"):
        native.attention(q, q.bfloat16(), q)
    with pytest.raises(ValueError, match="attention writes q's dtype, or int8/uint8 codes"):
        native.attention(q, q, q, quantize_to=(0.1, 0, torch.int32))
    with pytest.raises(ValueError, match="all of one dtype"):
        native.attention(q.double(), q.double(), q.double())
    with pytest.raises(ValueError, match="quantize_multipliers needs quantize_to"):
        native.attention(q, q, q, quantize_multipliers=torch.ones(128))
    with pytest.raises(ValueError, match="does not broadcast"):
        native.attention(q, q, q, torch.zeros(1, 1, 1, 9))
    with pytest.raises(RuntimeError, match="attention_f32 was not built"):
        native.attention(q, q, q, max_isa="generic")
    assert native.kernel_level("attention_f32", "generic") == "none"


def test_runtime_runs_native_attention_for_fp32(monkeypatch, tmp_path):
    """A tiny BERT with 32-wide heads in fp32: its sdpa nodes run the fp32 kernel of the best level and agree
    with torch's attention to fp32 precision; a cap at avx2 runs the avx2 build, one below avx2 keeps the
    reference."""
    monkeypatch.delenv("IPEXCONVERT_MAX_ISA", raising=False)
    model = build_bert(dict(TINY_BERT_CONFIG, num_attention_heads=2), attn_implementation="sdpa", seed=2)
    inputs = tiny_bert_inputs(3)
    inputs["attention_mask"][1, 5:] = 0  # padding, so the mask matters
    path = tmp_path / "bert-h32.fp32.ipxc"
    optimize(model, inputs, dtype="fp32", output=path)

    loaded = load_artifact(path)
    best = native.kernel_level("attention_f32", LEVELS[-1])  # the build the best level runs
    assert {s.kernel_name for s in loaded.executor.steps if s.op == "sdpa"} == {f"native:sdpa@{best}"}
    got = loaded(**inputs)[0]

    registered = kernels.KERNELS[("cpu", "sdpa")]
    monkeypatch.setitem(kernels.KERNELS, ("cpu", "sdpa"), [f for f in registered if f is not native_sdpa_module.native_sdpa])
    want = load_artifact(path)(**inputs)[0]
    monkeypatch.setitem(kernels.KERNELS, ("cpu", "sdpa"), registered)
    assert normalised_error(got, want.double()) < 1e-5

    monkeypatch.setenv("IPEXCONVERT_MAX_ISA", "avx2")
    capped = load_artifact(path)
    assert {s.kernel_name for s in capped.executor.steps if s.op == "sdpa"} == {"native:sdpa@avx2"}
    assert normalised_error(capped(**inputs)[0], want.double()) < 1e-5
    monkeypatch.setenv("IPEXCONVERT_MAX_ISA", "generic")
    capped = load_artifact(path)
    assert {s.kernel_name for s in capped.executor.steps if s.op == "sdpa"} == {"reference:sdpa"}
