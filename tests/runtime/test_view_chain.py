"""View chains (runtime/view_chain.py): runs of view nodes collapse into one step that remembers the
result's geometry per input geometry; results equal eager PyTorch's, views stay views, copies are
never remembered, and the remembered geometry follows dynamic dims."""
from __future__ import annotations

import torch
from torch import nn

from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir.ops.permute import PermuteAttrs, PermuteOp
from ipexconvert.ir.ops.reshape import ReshapeAttrs, ReshapeOp
from ipexconvert.runtime.executor import Executor
from ipexconvert.runtime.view_chain import ViewChain, dims_named

BATCH, SEQ = DynamicDim("batch", 1, 8), DynamicDim("seq", 1, 64)


class Heads(nn.Module):
    """q/k/v split, each reshaped to heads and transposed, mixed, and merged back (a transformer's views)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.qkv, self.out = nn.Linear(16, 48), nn.Linear(16, 16)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).split(16, dim=-1)
        q, k, v = (t.reshape(b, s, 4, 4).transpose(1, 2) for t in (q, k, v))
        mixed = torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v
        return self.out(mixed.transpose(1, 2).reshape(b, s, 16))


def heads_executor() -> tuple[Executor, nn.Module]:
    module = Heads().eval()
    x = torch.randn(2, 8, 16)
    program = program_from_module(module, {"x": x}, {"x": {0: BATCH, 1: SEQ}})
    return Executor(program), module


def test_chains_collapse_and_results_match_eager_for_several_shapes():
    executor, module = heads_executor()
    chains = [s for s in executor.steps if s.kernel_name == "executor:view_chain"]
    assert chains, "the q/k/v reshapes and transposes should run as view chains"
    assert not any(s.op in ("reshape", "permute") and s.kernel_name != "executor:view_chain" for s in executor.steps)
    for b, s in [(2, 8), (1, 5), (3, 8), (2, 8)]:  # new geometries, then one seen before
        x = torch.randn(b, s, 16)
        (got,) = executor.run([x], {"batch": b, "seq": s})
        with torch.inference_mode():
            want = module(x)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def reshape_fn(shape):
    return ReshapeOp.compile(ReshapeAttrs(shape=shape))


def permute_fn(perm):
    return PermuteOp.compile(PermuteAttrs(perm=perm))


def test_remembered_view_is_a_view_with_the_chains_geometry():
    chain = ViewChain([reshape_fn(["batch", "seq", 2, 3]), permute_fn([0, 2, 1, 3])], ("batch", "seq"))
    base = torch.arange(2 * 4 * 12, dtype=torch.float32).reshape(8, 12)
    dims = {"batch": 2, "seq": 4}
    for x in (base[:, :6], base[:, 6:]):  # same geometry, different storage offsets
        first = chain([x.clone()], dims)  # a clone is contiguous: a different geometry than x
        got = chain([x], dims)
        want = x.reshape(2, 4, 2, 3).permute(0, 2, 1, 3)
        assert torch.equal(got, want) and got.stride() == want.stride()
        assert got.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
        assert torch.equal(first, want)
    assert len(chain.geometry) == 2 and all(g is not None for g in chain.geometry.values())


def test_same_input_shape_with_other_dims_gets_its_own_geometry():
    chain = ViewChain([reshape_fn(["batch", "seq", 6])], ("batch", "seq"))
    x = torch.randn(8, 6)
    assert chain([x], {"batch": 2, "seq": 4}).shape == (2, 4, 6)
    assert chain([x], {"batch": 4, "seq": 2}).shape == (4, 2, 6)
    assert chain([x], {"batch": 2, "seq": 4}).shape == (2, 4, 6)


def test_a_reshape_that_copies_is_never_remembered():
    chain = ViewChain([permute_fn([1, 0]), reshape_fn([-1])], ())  # flattening a transpose must copy
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert torch.equal(chain([x], {}), x.t().reshape(-1))
    assert list(chain.geometry.values()) == [None]
    x.add_(100)  # a remembered geometry would still read x; the copy must be made afresh
    got = chain([x], {})
    assert torch.equal(got, x.t().reshape(-1))
    assert got.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


def test_dims_the_chain_does_not_name_do_not_split_its_geometry():
    """A decoder's cache length changes every token: a chain of views that does not name it keeps one entry."""
    assert dims_named([{"shape": ["batch", "seq", -1, 64]}, {"perm": [0, 2, 1, 3]}], ["batch", "seq", "past"]) == ("batch", "seq")
    assert dims_named([{"args": [{"$in": 0}, [{"$sym": "past + seq"}, 2]]}], ["seq", "past", "pastry"]) == ("past", "seq")
    calls = []

    def counting_permute(inputs, dims):
        calls.append(1)
        return inputs[0].permute(1, 0)

    chain = ViewChain([counting_permute], ())
    x = torch.randn(3, 5)
    for past in range(10):
        assert torch.equal(chain([x], {"past": past, "seq": 1}), x.t())
    assert len(calls) == 1 and len(chain.geometry) == 1
