"""Every native kernel at every ISA level this machine can run, against the op's reference.

Levels are capped per call (max_isa=...), so one process covers all of them; a subprocess test
in test_native_isa.py covers the IPEXCONVERT_MAX_ISA route.
"""
from __future__ import annotations

import zlib

import pytest
import torch

import native_ops as native
from native_cases import CASES, COLS, THRESHOLDS, normalised_error, reference

pytestmark = pytest.mark.skipif(not native.available(), reason="ipexconvert._native is not built")
LEVELS = native.supported_levels() if native.available() else []
DTYPES = [torch.float32, torch.bfloat16]


def _check(case, rows, cols, dtype, level, threads):
    got, want = case.run(rows, cols, dtype, level, threads)
    for i, (g, w) in enumerate(zip(got, want)):
        where = f"{case.name} output {i} [{rows}x{cols}] {dtype} at {level}, {threads} thread(s)"
        assert g.dtype == w.dtype and g.shape == w.shape, where
        assert torch.isfinite(g).all(), where
        err = normalised_error(g, w)
        assert err <= THRESHOLDS[dtype], f"{where}: normalised error {err:.3g}"
        if dtype == torch.bfloat16 and g.numel() >= 1000:
            # Both sides round fp32 results to nearest-even; values agree bit for bit except
            # where the small fp32 difference straddles a rounding boundary (truncating instead
            # of rounding would make about half of them differ). Tiny values are left out:
            # there the approximations' absolute error is a large relative one (gelu's tail).
            big = w.float().abs() >= 1e-2 * w.float().abs().max()
            same = (g.view(torch.int16)[big] == w.view(torch.int16)[big]).float().mean().item()
            assert same >= 0.97, f"{where}: only {same:.1%} bit-identical to the reference"


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "bf16"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_matches_reference(case, dtype, level):
    # zlib.crc32, not hash(): Python salts str hashes per process, which made the data (and a
    # 6-element case whose values all fall in gelu's tiny tail) differ from run to run.
    torch.manual_seed(zlib.crc32(f"{case.name}/{dtype}/{level}".encode()))
    for cols in COLS:
        _check(case, 6, cols, dtype, level, threads=1)
    # Enough rows for the thread pool to split the work, plus an odd row count.
    _check(case, 67, 768, dtype, level, threads=2)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_runs_its_build_for_the_level(case, level):
    """The kernel's build for the highest level <= the cap (e.g. avx512_vnni runs avx512)."""
    built = native.kernel_levels(case.kernel)
    assert built[0] == "generic"
    below = [lv for lv in built if native.levels().index(lv) <= native.levels().index(level)]
    assert native.kernel_level(case.kernel, level) == below[-1]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "bf16"])
@pytest.mark.parametrize("cols", [15, 16, 48, 50, 768])
def test_layer_norm_variants(level, dtype, cols):
    """Each combination of the norm's optional inputs and outputs (its own code path in some builds): gamma or
    beta alone against the reference; a residual without its sum, and with codes, give the bits they give with the
    sum; the norm is of the sum it hands back."""
    g = torch.Generator().manual_seed(cols)
    x, r = (torch.randn(9, cols, generator=g) * 3 + 1).to(dtype), torch.randn(9, cols, generator=g).to(dtype)
    w, b = torch.randn(cols, generator=g), torch.randn(cols, generator=g)

    def norm(*args, **kwargs):
        return native.layer_norm(*args, 1e-5, max_isa=level, threads=1, **kwargs)

    for weight, bias in ((w, None), (None, b)):
        want = reference("layer_norm", [x, weight, bias], normalized_shape=[cols], eps=1e-5)
        assert normalised_error(norm(x, weight, bias), want) < THRESHOLDS[dtype]
    with_sum, total = norm(x, w, b, residual=r, return_sum=True)
    assert torch.equal(norm(x, w, b, residual=r), with_sum)
    assert torch.equal(norm(total, w, b), with_sum)
    y, _ = norm(x, w, b, residual=r, quantize_to=(0.05, 3, torch.uint8))
    assert torch.equal(y, with_sum)
    plain = norm(x, None, None, residual=r)
    want = reference("add_layer_norm", [x, r, None, None], normalized_shape=[cols], eps=1e-5)
    assert normalised_error(plain, want) < THRESHOLDS[dtype]


@pytest.mark.parametrize("level", LEVELS)
def test_bf16_sum_rounds_to_nearest_even(level):
    """x + residual stored as bf16 equals torch's bf16 add bit for bit (round to nearest even)."""
    torch.manual_seed(1)
    x = torch.randn(64, 1000).to(torch.bfloat16)
    r = (torch.randn(64, 1000) * 1e-2).to(torch.bfloat16)  # small addends: many rounding ties
    _, total = native.layer_norm(x, None, None, 1e-5, residual=r, return_sum=True, max_isa=level, threads=1)
    assert torch.equal(total.view(torch.int16), (x + r).view(torch.int16))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "bf16"])
def test_activations_saturate_cleanly(level, dtype):
    """Large |x| (exp over/underflow inside gelu/silu) gives finite values close to the reference."""
    x = torch.linspace(-120, 120, 4001).to(dtype)
    for got, want in [(native.gelu(x, max_isa=level), torch.nn.functional.gelu(x)),
                      (native.gelu(x, "tanh", max_isa=level), torch.nn.functional.gelu(x, approximate="tanh")),
                      (native.silu(x, max_isa=level), torch.nn.functional.silu(x))]:
        assert torch.isfinite(got).all()
        assert normalised_error(got, want) <= THRESHOLDS[dtype]


@pytest.mark.parametrize("level", LEVELS)
def test_softmax_fully_masked_row_is_nan_like_torch(level):
    x = torch.randn(2, 5)
    mask = torch.tensor([[0.0] * 5, [float("-inf")] * 5])
    got = native.softmax(x, mask=mask, max_isa=level)
    want = torch.softmax(x + mask, -1)
    assert torch.allclose(got[0], want[0], atol=1e-6) and torch.isnan(got[1]).all() and torch.isnan(want[1]).all()


def test_mask_in_bf16_and_broadcast_over_queries():
    """A [batch, 1, q, k] bf16 mask (per-query) against fp32 scores."""
    torch.manual_seed(2)
    x = torch.randn(2, 4, 9, 33)
    mask = torch.where(torch.rand(2, 1, 9, 33) < 0.3, float("-inf"), 0.0)
    mask[..., 0] = 0.0
    got = native.softmax(x, scale=0.5, mask=mask.to(torch.bfloat16))
    assert normalised_error(got, torch.softmax(x * 0.5 + mask, -1)) <= 1e-5


def test_threads_default_follows_torch(monkeypatch):
    """threads=None uses torch.get_num_threads(); results do not depend on the thread count."""
    x = torch.randn(300, 768)
    one = native.layer_norm(x, threads=1)
    assert torch.equal(native.layer_norm(x), one)
    assert torch.equal(native.layer_norm(x, threads=2), one)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_mul_of_the_halves_of_one_tensor_equals_silu_mul_of_its_slices(level, dtype):
    x = torch.randn(2, 3, 2 * 70, generator=torch.Generator().manual_seed(3)).to(dtype)
    out = torch.empty(2, 3, 70, dtype=dtype)
    native.raw.silu_mul_halves(x, out, level, 2)
    assert torch.equal(out.view(6, 70), native.silu_mul(x.view(6, 140)[:, :70], x.view(6, 140)[:, 70:], max_isa=level))
    with pytest.raises(ValueError, match="even last dim"):
        native.raw.silu_mul_halves(torch.randn(2, 7), torch.empty(2, 3), level, 1)
