"""How a float linear's post-ops split between the oneDNN call and the tail after it (_torch_onednn.plan_post_ops),
and the tail's native GELU (with_tail): where GELU_UNFUSED_AT leaves GELU unfused, it runs as our native kernel in
place on the call's output, the rest of the tail after it."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.backends.cpu import native_lib
from ipexconvert.backends.cpu.kernels import _torch_onednn
from ipexconvert.backends.cpu.kernels._torch_onednn import plan_post_ops, unfused_unary, with_tail
from ipexconvert.ir.postops import PostOp, apply_post_ops

NATIVE = pytest.mark.skipif(not native_lib.available() or native_lib.selected_level() == "generic",
                            reason="the native library is not built, or IPEXCONVERT_MAX_ISA=generic asks for none")
GELU, GELU_TANH, ADD = PostOp(kind="gelu"), PostOp(kind="gelu_tanh"), PostOp(kind="add", operand=1)


def test_gelu_is_fused_unless_the_level_leaves_it_to_the_tail():
    fused = plan_post_ops([GELU, ADD], lambda p: True, frozenset())
    assert fused.unary == ("gelu", "none") and fused.tail == (ADD,)
    left = plan_post_ops([GELU, ADD], lambda p: True, frozenset(), frozenset({"gelu", "gelu_tanh"}))
    assert left.unary is None and left.binary is None and left.tail == (GELU, ADD)
    relu = plan_post_ops([PostOp(kind="relu")], lambda p: True, frozenset(), frozenset({"gelu", "gelu_tanh"}))
    assert relu.unary == ("relu", "")  # only the kinds named stay out


def test_the_levels_that_leave_gelu_unfused(monkeypatch):
    monkeypatch.setattr(_torch_onednn, "onednn_level", lambda isa: isa)  # (no cap in play)
    for level in ("generic", "avx2", "avx512", "avx512_vnni", "avx512_bf16", "amx"):
        want = frozenset({"gelu", "gelu_tanh"}) if level in _torch_onednn.GELU_UNFUSED_AT else frozenset()
        assert unfused_unary(level) == want, level


@NATIVE
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("tail", [(GELU,), (GELU_TANH,), (GELU, ADD)], ids=["gelu", "gelu_tanh", "gelu-add"])
def test_a_leading_gelu_runs_natively_in_place(tail, dtype):
    level = native_lib.selected_level()
    g = torch.Generator().manual_seed(3)
    x, operand = torch.randn(37, 130, generator=g).to(dtype), torch.randn(37, 130, generator=g).to(dtype)
    x[0, :3] = torch.tensor([float("nan"), float("inf"), -float("inf")])
    if tail[0].kind == "gelu_tanh":
        x[0, 2] = 0.0  # (tanh GELU of -inf: NaN in torch's formula, its limit 0 in ours)
    made = []

    def fn(inputs, dims):  # a kernel's fresh output
        made.append(inputs[0].clone())
        return made[-1]

    got = with_tail(fn, tail, level)([x, operand], {})
    # What we promise at NaN, +inf and -inf (the formula's x * (1 + erf(x / sqrt 2)) / 2 at -inf is NaN; tanh GELU is
    # fed 0 there), not what one torch build's GELU gives (torch 2.11's AVX-512 GELU makes NaN of +inf); torch's
    # GELU for the rest, then the tail after it.
    finite = x.clone()
    finite[0, :3] = 0.0
    want = apply_post_ops(finite, [tail[0]], [finite, operand])
    want[0, :3] = torch.tensor([float("nan"), float("inf"), 0.0 if tail[0].kind == "gelu_tanh" else float("nan")])
    want = apply_post_ops(want, list(tail[1:]), [want, operand])
    assert got.dtype == dtype
    if len(tail) == 1:
        assert got.data_ptr() == made[0].data_ptr()  # in place on the output
    assert torch.equal(got.isnan(), want.isnan())
    tolerance = 1e-5 if dtype == torch.float32 else 1e-2
    ok = ~want.isnan()
    assert torch.allclose(got[ok].float(), want[ok].float(), rtol=tolerance, atol=tolerance)


@NATIVE
def test_without_a_level_or_on_a_strided_output_the_tail_is_torchs():
    x = torch.randn(8, 6)
    strided = lambda inputs, dims: inputs[0].t()  # not contiguous: the native kernel is not handed it
    got = with_tail(strided, (GELU,), native_lib.selected_level())([x], {})
    assert torch.equal(got, torch.nn.functional.gelu(x.t()))
    plain = with_tail(lambda inputs, dims: inputs[0].clone(), (GELU,))([x], {})
    assert torch.equal(plain, torch.nn.functional.gelu(x))
    generic = with_tail(lambda inputs, dims: inputs[0].clone(), (GELU,), "generic")([x], {})
    assert torch.equal(generic, torch.nn.functional.gelu(x))  # (generic: no native code, as asked)
