"""pack_woq_weight's integer layouts (backends/cpu/kernels/woq_linear.py) against their definition in its docstring,
element by element: 8-bit codes in k-quads [n16 / 16, K / 4, 16, 4], 4-bit codes in k-octets [n16 / 16, K / 8, 16, 4]
with byte b of a channel's octet o = code(8o + b) | code(8o + 4 + b) << 4, channels padded with zero codes. The
packing works on the bytes as int32 words; these cases include codes at a storage offset that is no multiple of 4
(a view into a larger buffer) and check that the artifact's codes are left as they were. The kernels that read the
layouts are checked against the op's reference in tests/native/test_native_woq_gemm.py."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.backends.cpu.kernels.woq_linear import pack_woq_weight
from ipexconvert.ir.ops.woq_linear import unpack_int4


def _codes(bits: int, n: int, k: int, offset: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(n * 31 + k + offset)
    cols = k // 2 if bits == 4 else k
    dtype = torch.uint8 if bits == 4 else torch.int8
    low, high = (0, 256) if bits == 4 else (-128, 128)
    buffer = torch.randint(low, high, (n * cols + offset,), dtype=dtype, generator=g)
    return buffer[offset:].view(n, cols)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("n, k, offset", [(16, 8, 0), (40, 64, 0), (17, 32, 1), (32, 128, 3), (16, 64, 2)])
def test_integer_layouts_hold_each_code_where_the_definition_puts_it(bits, n, k, offset):
    codes = _codes(bits, n, k, offset)
    before = codes.clone()
    packed, _, _ = pack_woq_weight(codes, torch.rand(n, k // 8), None, bits, 8, integer_layout=True)
    assert torch.equal(codes, before)
    n16 = -(-n // 16) * 16
    if bits == 8:
        assert packed.dtype == torch.int8 and packed.shape == (n16 // 16, k // 4, 16, 4)
        for c in (0, n // 2, n - 1):
            for kk in (0, k // 2 + 1, k - 1):
                assert packed[c // 16, kk // 4, c % 16, kk % 4] == codes[c, kk]
    else:
        assert packed.dtype == torch.uint8 and packed.shape == (n16 // 16, k // 8, 16, 4)
        values = unpack_int4(codes)  # [n, k]: code(k) of each channel
        for c in (0, n // 2, n - 1):
            for o in range(k // 8):
                for b in range(4):
                    byte = int(packed[c // 16, o, c % 16, b])
                    assert (byte & 15, byte >> 4) == (int(values[c, 8 * o + b]), int(values[c, 8 * o + 4 + b]))
    if n16 != n:  # the padding channels hold zero codes
        assert not packed.view(n16 // 16, -1, 16, 4)[-1, :, n % 16:].any()
