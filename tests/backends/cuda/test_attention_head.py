"""sdpa's one-phase decode kernel (_triton_jit.attention_head: a program a query head, no split of the keys) against
the op's reference and against attention_rows, for one query row over a cache, GQA, masks none / bool (with a fully
masked row) / additive, float32 and bf16. Without a GPU (CI) these skip with the reason."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.backends.cuda import unavailable_reason
from ipexconvert.backends.cuda.kernels import sdpa
from ipexconvert.ir import TensorSpec, get_op
from ipexconvert.runtime.kernels import NodeContext

NO_GPU = unavailable_reason()
pytestmark = pytest.mark.skipif(NO_GPU is not None, reason=f"needs a CUDA GPU: {NO_GPU}")

CASES = [  # batch, query heads, key/value heads, keys, dtype, mask
    (1, 32, 4, 544, torch.bfloat16, "additive"), (1, 32, 4, 40, torch.float32, "additive"),
    (2, 8, 2, 300, torch.float32, "bool"), (1, 4, 4, 200, torch.bfloat16, None),
    (1, 14, 2, 1930, torch.bfloat16, "additive"), (2, 6, 2, 129, torch.bfloat16, "bool"),
]


def _inputs(b, heads, kv_heads, keys, dtype, mask_kind):
    g = torch.Generator().manual_seed(keys)
    q = torch.randn(b, heads, 1, 64, generator=g)
    k, v = (torch.randn(b, kv_heads, keys, 64, generator=g) for _ in range(2))
    mask = None
    if mask_kind == "additive":
        mask = torch.zeros(b, 1, 1, keys)
        mask[..., keys - 7:] = float("-inf")  # a static cache's unwritten positions
        mask = mask.to(dtype)
    elif mask_kind == "bool":
        mask = torch.rand(b, 1, 1, keys, generator=g) > 0.3
        mask[0] = False  # batch 0 keeps no key: its rows are 0 (the op's rule)
    gpu = torch.device("cuda")
    return [t if t is None else t.to(gpu, dtype if t.is_floating_point() else t.dtype) for t in (q, k, v, mask)]


@pytest.mark.parametrize("case", CASES, ids=[f"b{c[0]}-h{c[1]}-kv{c[2]}-s{c[3]}-{c[4]}-{c[5]}" for c in CASES])
def test_attention_head_matches_the_reference_and_attention_rows(case, monkeypatch):
    inputs = _inputs(*case)
    op = get_op("sdpa")
    attrs = op.parse_attrs({"enable_gqa": True})
    specs = tuple(None if t is None else TensorSpec.of(t) for t in inputs)
    ctx = NodeContext(op="sdpa", attrs=attrs, constants=(None,) * 4, input_specs=specs,
                      output_specs=tuple(op.infer(specs, attrs)), device="cuda", isa="gpu")
    kernel = sdpa.triton_sdpa(ctx)
    monkeypatch.setattr(sdpa, "HEAD_KEYS", 0)
    rows = kernel.fn(inputs, {})
    monkeypatch.setattr(sdpa, "HEAD_KEYS", 1 << 30)
    head = kernel.fn(inputs, {})
    want = op.reference([t if t is None else t.cpu() for t in inputs], attrs, {}).float()
    assert head.shape == rows.shape and head.stride() == rows.stride() and head.dtype == rows.dtype
    budget = 1e-5 if case[4] == torch.float32 else 2e-2
    assert (head.float().cpu() - want).abs().max().item() <= budget * max(1.0, want.abs().max().item())
    assert (head.float() - rows.float()).abs().max().item() <= budget
    removed = want.abs().sum(-1) == 0
    assert torch.equal(head.float().cpu().abs().sum(-1) == 0, removed)
