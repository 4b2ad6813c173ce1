"""The native rope kernel at every ISA level this CPU runs, against the rotate-half formula in float32:
float32 and bfloat16, strided x (a permuted projection), a per-batch or shared cos/sin table, and the
binding's refusals."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.backends.cpu import native_lib
from ipexconvert.backends.cpu.isa import ISA_LEVELS, selected_isa

pytestmark = pytest.mark.skipif(not native_lib.available(), reason="ipexconvert._native is not built")
LEVELS = ISA_LEVELS[:ISA_LEVELS.index(selected_isa()) + 1]


def _formula(x, cos, sin):
    xf, half = x.float(), x.shape[-1] // 2
    return xf * cos.float() + torch.cat([-xf[..., half:], xf[..., :half]], dim=-1) * sin.float()


def _run(x, cos, sin, level):
    out = torch.empty(x.shape, dtype=x.dtype)
    native_lib.raw.rope(x, cos, sin, out, level, 2)
    return out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("table_batch", [1, 2])
def test_rope_matches_the_formula(level, dtype, table_batch):
    g = torch.Generator().manual_seed(0)
    projection = torch.randn(2, 7, 5, 64, generator=g).to(dtype)  # [b, s, heads, d]
    x = projection.permute(0, 2, 1, 3)  # [b, heads, s, d], strided like the graph's view
    cos, sin = torch.randn(table_batch, 1, 7, 64, generator=g), torch.randn(table_batch, 1, 7, 64, generator=g)
    got = _run(x, cos, sin, level)
    want = _formula(x, cos, sin)
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    else:  # one rounding of the float32 result
        assert torch.equal(got, want.to(torch.bfloat16))


@pytest.mark.parametrize("make, problem", [
    (lambda: (torch.randn(1, 2, 3, 7), torch.randn(1, 1, 3, 7), torch.randn(1, 1, 3, 7)), "must be even"),
    (lambda: (torch.randn(1, 2, 3, 8), torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8)), "must be \\[1 or 1, 1, 3, 8\\]"),
    (lambda: (torch.randn(1, 2, 3, 8), torch.randn(1, 1, 3, 8), torch.randn(1, 1, 3, 8).bfloat16()), "dtype"),
    (lambda: (torch.randn(1, 2, 8, 3).transpose(2, 3), torch.randn(1, 1, 3, 8), torch.randn(1, 1, 3, 8)), "contiguous last dim"),
])
def test_rope_refuses_what_it_cannot_read(make, problem):
    x, cos, sin = make()
    out = torch.empty(x.shape, dtype=x.dtype)
    with pytest.raises(ValueError, match=problem):
        native_lib.raw.rope(x, cos, sin, out, None, 1)
