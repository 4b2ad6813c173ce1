"""The concat_channels kernel (merge_shortcut_conv's concat) against torch.cat(dim=1): every dtype
(it copies bytes), channels-last inputs and strided subsamples of them, odd channel counts, one
pixel; the registered kernel for an aten.cat node and its fallbacks; errors."""
from __future__ import annotations

import pytest
import torch

import native_ops as native
from ipexconvert.ir.opdef import get_op
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.runtime.kernels import NodeContext, resolve_kernel

pytestmark = pytest.mark.skipif(not native.available(), reason="ipexconvert._native is not built")
CL = torch.channels_last
DTYPES = [torch.uint8, torch.int8, torch.bfloat16, torch.float32]


def _random(shape, dtype, g):
    if dtype in (torch.uint8, torch.int8):
        info = torch.iinfo(dtype)
        return torch.randint(info.min, info.max + 1, shape, dtype=dtype, generator=g)
    return torch.randn(shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matches_torch_cat(dtype):
    g = torch.Generator().manual_seed(0)
    # (batch, channels of a, channels of b, H, W of the output, stride of b's subsample)
    for n, ca, cb, h, w, step in [(2, 64, 256, 28, 28, 2), (1, 3, 5, 7, 9, 1), (3, 1, 65, 4, 3, 2),
                                  (1, 130, 1, 1, 1, 3), (2, 16, 16, 5, 6, 1)]:
        a = _random((n, ca, h, w), dtype, g).contiguous(memory_format=CL)
        source = _random((n, cb, h * step, w * step), dtype, g).contiguous(memory_format=CL)
        b = source[:, :, ::step, ::step]
        got = native.concat_channels(a, b, threads=2)
        want = torch.cat([a, b], 1)
        assert torch.equal(got, want), (n, ca, cb, h, w, step)
        assert got.is_contiguous(memory_format=CL) and got.dtype == dtype


def test_one_thread_and_two_agree():
    g = torch.Generator().manual_seed(1)
    a = _random((4, 96, 14, 14), torch.uint8, g).contiguous(memory_format=CL)
    b = _random((4, 32, 28, 28), torch.uint8, g).contiguous(memory_format=CL)[:, :, ::2, ::2]
    assert torch.equal(native.concat_channels(a, b, threads=1), native.concat_channels(a, b, threads=2))


def test_errors():
    a = torch.zeros(2, 4, 5, 5, dtype=torch.uint8).contiguous(memory_format=CL)
    with pytest.raises(ValueError, match="4-D"):
        native.concat_channels(a, torch.zeros(2, 4, 5))
    with pytest.raises(ValueError, match="must match a"):
        native.concat_channels(a, torch.zeros(2, 4, 5, 6, dtype=torch.uint8).contiguous(memory_format=CL))
    with pytest.raises(ValueError, match="has dtype"):
        native.concat_channels(a, torch.zeros(2, 4, 5, 5).contiguous(memory_format=CL))
    with pytest.raises(ValueError, match="contiguous channels"):
        native.concat_channels(a, torch.zeros(2, 4, 5, 5, dtype=torch.uint8))  # NCHW: channels strided
    with pytest.raises(ValueError, match="dense channels-last"):
        native.raw.concat_channels(a, a, torch.zeros(2, 8, 5, 5, dtype=torch.uint8), None, 1)
    with pytest.raises(ValueError, match=r"must be \[N, Ca \+ Cb, H, W\]"):
        native.raw.concat_channels(a, a, torch.zeros(2, 9, 5, 5, dtype=torch.uint8).contiguous(memory_format=CL), None, 1)


def _context(attrs_dict, specs):
    op = get_op("aten")
    attrs = op.parse_attrs(attrs_dict)
    return NodeContext(op="aten", attrs=attrs, constants=(None,) * len(specs), input_specs=specs,
                       output_specs=(specs[0],), device="cpu", isa=native.selected_level())


def test_registered_kernel_and_fallbacks():
    g = torch.Generator().manual_seed(2)
    a = _random((2, 8, 6, 6), torch.uint8, g).contiguous(memory_format=CL)
    b = _random((2, 16, 12, 12), torch.uint8, g).contiguous(memory_format=CL)[:, :, ::2, ::2]
    specs = (TensorSpec.of(a), TensorSpec(dtype="uint8", shape=[2, 16, 6, 6], memory_format="channels_last"))
    cat = {"target": "aten.cat.default", "args": [[{"$in": 0}, {"$in": 1}], 1]}
    kernel = resolve_kernel(_context(cat, specs))
    assert kernel.name.startswith("native:concat@") and kernel.fresh_output
    for x, y in ((a, b), (a.contiguous(), b.contiguous())):  # native, then NCHW inputs (the reference)
        got = kernel.fn([x, y], {})
        assert torch.equal(got, torch.cat([x, y], 1))
    # Other aten nodes, other dims and three inputs are not this kernel's.
    for attrs in ({"target": "aten.cat.default", "args": [[{"$in": 0}, {"$in": 1}], 2]},
                  {"target": "aten.add.Tensor", "args": [{"$in": 0}, {"$in": 1}]}):
        assert resolve_kernel(_context(attrs, specs)).name == "reference:aten"
    three = {"target": "aten.cat.default", "args": [[{"$in": 0}, {"$in": 1}, {"$in": 2}], 1]}
    assert resolve_kernel(_context(three, specs + specs[:1])).name == "reference:aten"
