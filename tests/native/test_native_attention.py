"""The attention kernel, at every level this CPU runs (AVX512-BF16 products, AMX tile products),
against the sdpa op's reference (computed in fp32), its argument checks, and the runtime's choice
of it for bfloat16 sdpa nodes."""
from __future__ import annotations

import pytest
import torch

import native_ops as native
from ipexconvert import load_artifact, optimize
from ipexconvert.examples.bert import build_bert
from ipexconvert.examples.tiny_bert import TINY_BERT_CONFIG, tiny_bert_inputs
from ipexconvert.runtime import kernels
from ipexconvert.backends.cpu import compute_precision
from ipexconvert.backends.cpu.kernels import sdpa as native_sdpa_module

import attention_cases
from attention_cases import assert_quantized_output_matches, normalised_error, padding_mask

LEVELS = [lvl for lvl in native.kernel_levels("attention") if lvl in native.supported_levels()] if native.available() else []
pytestmark = pytest.mark.skipif(not LEVELS, reason="needs the native build on a CPU with AVX512-BF16")
BF16_THRESHOLD = 1e-2  # normalised error, as the other native kernels' bf16 cases


def reference(q, k, v, mask, scale=None):
    return attention_cases.reference(q, k, v, mask, scale, dtype=torch.float32)


SHAPES = [  # batch, heads, q_len, kv_len, head_dim: BERT-base, MiniLM, tails of 16/32, one key, wide heads
    (1, 12, 128, 128, 64), (2, 12, 128, 128, 32), (2, 3, 37, 53, 64), (1, 2, 5, 1, 32), (2, 4, 16, 32, 128),
    (1, 1, 130, 200, 96),
]


@pytest.fixture(params=LEVELS or ["none"])
def level(request):
    return request.param


@pytest.mark.parametrize("mask_kind", ["none", "float32", "bfloat16", "finite"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_attention_matches_reference(shape, mask_kind, level):
    batch, heads, q_len, kv_len, head_dim = shape
    torch.manual_seed(sum(shape))
    q = (torch.randn(batch, heads, q_len, head_dim) * 2).bfloat16()
    k, v = torch.randn(batch, heads, kv_len, head_dim).bfloat16(), torch.randn(batch, heads, kv_len, head_dim).bfloat16()
    mask = {"none": None, "float32": padding_mask(batch, kv_len, torch.float32),
            "bfloat16": padding_mask(batch, kv_len, torch.bfloat16),
            "finite": padding_mask(batch, kv_len, torch.float32, torch.finfo(torch.float32).min)}[mask_kind]
    got = native.attention(q, k, v, mask, threads=2, max_isa=level)
    want = reference(q, k, v, mask)
    assert got.shape == want.shape and got.dtype == torch.bfloat16
    assert torch.isfinite(got).all()
    assert normalised_error(got, want) <= BF16_THRESHOLD
    # As accurate as torch's own bf16 attention, within a factor (both round P to bf16).
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert normalised_error(got, want) <= 3 * normalised_error(theirs, want) + 1e-3


@pytest.mark.parametrize("per_row", [False, True], ids=["padding", "per-row"])
def test_keys_past_the_last_unmasked_one_are_skipped_exactly(per_row, level):
    """Batch rows keeping 1, 17, 33 and all 128 keys (a padding mask, where the kernel stops at the last
    unmasked key), and a per-row mask (causal on top of the padding: every row's own bias)."""
    batch, heads, q_len, kv_len, head_dim = 4, 2, 40, 128, 64
    torch.manual_seed(7)
    q = (torch.randn(batch, heads, q_len, head_dim) * 2).bfloat16()
    k, v = (torch.randn(batch, heads, kv_len, head_dim).bfloat16() for _ in range(2))
    keep = torch.arange(kv_len)[None, :] < torch.tensor([1, 17, 33, 128])[:, None]
    mask = keep[:, None, None, :].expand(batch, 1, q_len, kv_len)
    if per_row:
        mask = mask & (torch.arange(kv_len)[None, :] <= torch.arange(q_len)[:, None] + 60)
    additive = torch.where(mask, 0.0, float("-inf")).contiguous() if per_row else \
        torch.where(keep, 0.0, float("-inf"))[:, None, None, :]
    got = native.attention(q, k, v, additive, threads=2, max_isa=level)
    want = reference(q, k, v, additive)
    assert torch.isfinite(got).all()
    assert normalised_error(got, want) <= BF16_THRESHOLD


def test_strided_views_threads_and_scale(level):
    attention_cases.assert_strided_views_threads_and_scale(torch.bfloat16, level, BF16_THRESHOLD, reference_dtype=torch.float32)


@pytest.mark.parametrize("multipliers", [False, True])
@pytest.mark.parametrize("code_dtype,zero_point", [(torch.uint8, 121), (torch.int8, -5)])
@pytest.mark.parametrize("shape", [SHAPES[0], SHAPES[2], SHAPES[5]], ids=lambda s: "x".join(map(str, s)))
def test_quantized_output_is_bit_identical_to_quantizing_the_bf16_output(shape, code_dtype, zero_point, multipliers,
                                                                        level):
    """The codes equal the quantize op's (per tensor, or with SmoothQuant multipliers along the
    hidden axis h * head_dim + d) applied to the bf16 output flattened to [batch, q_len, hidden]."""
    assert_quantized_output_matches(shape, torch.bfloat16, code_dtype, zero_point, multipliers, level)


def test_bad_quantize_arguments_are_refused_clearly():
    q = torch.randn(1, 2, 8, 64).bfloat16()
    with pytest.raises(ValueError, match="int8/uint8 codes"):
        native.attention(q, q, q, quantize_to=(0.1, 0, torch.int32))
    with pytest.raises(ValueError, match="q_zero_point 300 is outside"):
        native.attention(q, q, q, quantize_to=(0.1, 300, torch.uint8))
    with pytest.raises(ValueError, match="q_scale must be positive"):
        native.attention(q, q, q, quantize_to=(0.0, 0, torch.uint8))
    with pytest.raises(ValueError, match="heads \\* head_dim = 128"):
        native.attention(q, q, q, quantize_to=(0.1, 0, torch.uint8), quantize_multipliers=torch.ones(64))



def test_rows_the_mask_removes_entirely_are_zero(level):
    attention_cases.assert_rows_the_mask_removes_are_zero(torch.bfloat16, level)

def test_bad_arguments_are_refused_clearly():
    q = torch.randn(1, 2, 8, 64).bfloat16()
    with pytest.raises(ValueError, match="multiple of 32"):
        native.attention(q[..., :48], q[..., :48], q[..., :48])
    with pytest.raises(ValueError, match="attention takes bfloat16 or float32 q, k and v, all of one dtype"):
        native.attention(q.float(), q, q)
    with pytest.raises(ValueError, match="does not broadcast"):
        native.attention(q, q, q, torch.zeros(1, 1, 1, 9))
    with pytest.raises(ValueError, match="bfloat16 attention needs as many as q"):  # grouped heads: float32 only
        native.attention(q, q[:, :1], q)
    with pytest.raises(RuntimeError, match="was not built"):
        native.attention(q, q, q, max_isa="avx512_vnni")
    assert native.kernel_level("attention", "avx512_vnni") == "none"


@pytest.mark.skipif(len(LEVELS) < 2, reason="needs a CPU with AMX for both builds")
def test_amx_and_avx512_bf16_builds_agree():
    """Both builds sum the same bf16 products in fp32, in another order: their outputs differ by
    bf16 roundings at most, far below the error against the fp32 reference."""
    torch.manual_seed(5)
    q, k, v = (torch.randn(2, 12, 128, 64).bfloat16() for _ in range(3))
    mask = padding_mask(2, 128, torch.float32)
    tiles = native.attention(q, k, v, mask, max_isa="amx")
    dots = native.attention(q, k, v, mask, max_isa="avx512_bf16")
    assert normalised_error(tiles, dots.float()) <= 1e-2


def bf16_attention(level: str) -> str:
    """The sdpa kernel a bf16 graph takes at this level: the bf16 build, or the fp32 one where bf16 graphs widen at
    load (Intel at avx512_bf16 without AMX: backends/cpu/compute_precision.py)."""
    return "native:sdpa@avx512" if compute_precision.bf16_no_faster_than_fp32(level) else f"native:sdpa@{level}"


def test_runtime_runs_native_attention_for_bf16(monkeypatch, tmp_path):
    """A tiny BERT with 32-wide heads in bf16: its sdpa nodes run the native kernel of the best
    level and agree with torch's attention; fp32 nodes take the fp32 kernel
    (test_native_attention_f32.py), a cap below avx512_bf16 computes in fp32 (the fp32 kernel), and a cap at
    avx512_bf16 on an AMX CPU takes that build."""
    monkeypatch.delenv("IPEXCONVERT_MAX_ISA", raising=False)
    model = build_bert(dict(TINY_BERT_CONFIG, num_attention_heads=2), attn_implementation="sdpa", seed=2)
    inputs = tiny_bert_inputs(3)
    inputs["attention_mask"][1, 5:] = 0  # padding, so the mask matters
    paths = {}
    for dtype in ("bf16", "fp32"):
        paths[dtype] = tmp_path / f"bert-h32.{dtype}.ipxc"
        optimize(model, inputs, dtype=dtype, output=paths[dtype])

    model = load_artifact(paths["bf16"])
    names = {s.kernel_name for s in model.executor.steps if s.op == "sdpa"}
    assert names == {bf16_attention(LEVELS[-1])}
    got = model(**inputs)[0]

    registered = kernels.KERNELS[("cpu", "sdpa")]
    monkeypatch.setitem(kernels.KERNELS, ("cpu", "sdpa"), [f for f in registered if f is not native_sdpa_module.native_sdpa])
    want = load_artifact(paths["bf16"])(**inputs)[0]
    monkeypatch.setitem(kernels.KERNELS, ("cpu", "sdpa"), registered)
    assert normalised_error(got, want.float()) < 2e-2

    fp32 = load_artifact(paths["fp32"])
    assert {s.kernel_name for s in fp32.executor.steps if s.op == "sdpa"} == {"native:sdpa@avx512"}
    monkeypatch.setenv("IPEXCONVERT_MAX_ISA", "avx512_vnni")  # no native bf16: the bf16 graph computes in fp32
    capped = load_artifact(paths["bf16"])
    assert capped.executor.bf16_compute == "float32"
    assert {s.kernel_name for s in capped.executor.steps if s.op == "sdpa"} == {"native:sdpa@avx512"}
    monkeypatch.setenv("IPEXCONVERT_MAX_ISA", "avx512_bf16")
    capped = load_artifact(paths["bf16"])
    assert {s.kernel_name for s in capped.executor.steps if s.op == "sdpa"} == {bf16_attention("avx512_bf16")}
    assert normalised_error(capped(**inputs)[0], want.float()) < 2e-2
