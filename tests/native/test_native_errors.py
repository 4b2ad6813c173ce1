"""Bad tensors reach the native kernels as clear errors, never as a crash or a silent copy."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import native_ops as native

pytestmark = pytest.mark.skipif(not native.available(), reason="ipexconvert._native is not built")


def test_non_contiguous_input():
    x = torch.randn(8, 16).t()
    with pytest.raises(ValueError, match=r"x \[16, 8\] is not contiguous; call .contiguous\(\) first"):
        native.layer_norm(x)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.int32])
def test_unsupported_dtype(dtype):
    with pytest.raises(ValueError, match="native kernels take float32 or bfloat16"):
        native.silu(torch.ones(4, dtype=dtype))


def test_mismatched_operands():
    with pytest.raises(ValueError, match="must have the same shape"):
        native.silu_mul(torch.ones(4), torch.ones(5))
    with pytest.raises(ValueError, match="residual has dtype bfloat16 but x has float32"):
        native.layer_norm(torch.ones(2, 4), residual=torch.ones(2, 4, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"weight \[5\] must have 4 elements"):
        native.layer_norm(torch.ones(2, 4), torch.ones(5))


def test_bad_masks():
    x = torch.randn(2, 3, 4, 8)
    with pytest.raises(ValueError, match="does not broadcast"):
        native.softmax(x, mask=torch.zeros(3, 1, 1, 8))
    with pytest.raises(ValueError, match="float32 or bfloat16"):
        native.softmax(x, mask=torch.zeros(2, 1, 1, 8, dtype=torch.bool))
    with pytest.raises(ValueError, match="last dim only"):
        native.softmax(x, dim=1)


def test_not_a_tensor():
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        native.silu([1.0, 2.0])
    with pytest.raises(TypeError, match="x must be a tensor or an array supporting DLPack"):
        native.raw.silu([1.0, 2.0], torch.empty(2), None, 1)


def test_numpy_arrays_take_the_dlpack_fallback():
    """Arrays without the DLPack C exchange API go through nanobind's ndarray import."""
    x = np.linspace(-3, 3, 50, dtype=np.float32)
    out = np.empty_like(x)
    native.raw.silu(x, out, None, 1)
    assert np.allclose(out, x / (1 + np.exp(-x)), atol=1e-6)


def test_views_with_an_offset_are_read_at_the_right_place():
    base = torch.randn(10, 32)
    view = base[3:7]  # contiguous, storage offset 96
    assert torch.allclose(native.layer_norm(view), torch.nn.functional.layer_norm(view, [32]), atol=1e-5)


def test_empty_tensors():
    assert native.layer_norm(torch.empty(0, 8)).shape == (0, 8)
    assert native.softmax(torch.empty(3, 0)).shape == (3, 0)
    assert native.silu(torch.empty(0)).shape == (0,)
