"""The GPU backend's pure-Python parts, which need no GPU: which post-op chains the Triton epilogue takes,
and the input guards' host-side check and flag reading (on CPU tensors here), where launches use programmatic
dependent launch."""
from __future__ import annotations

import pytest
import torch

from ipexconvert.backends.cuda.guards import Guard, raise_tripped
from ipexconvert.backends.cuda.kernels._triton_int8 import MAX_POST_OPS, inverse_scale, post_op_codes
from ipexconvert.errors import UserInputError
from ipexconvert.ir.postops import PostOp


def chain(*ops) -> list[PostOp]:
    return [PostOp(kind=k) if o is None else PostOp(kind=k, operand=o) for k, o in ops]


def test_post_op_codes_name_each_operand_slot_once():
    codes, slots = post_op_codes(chain(("gelu", None), ("mul", 4), ("add", 5), ("add", 4)))
    assert slots == [4, 5]
    assert codes == [2, 12, 11, 10]  # gelu, mul a, add b, add a


def test_post_op_codes_pad_short_chains_and_refuse_long_ones():
    assert post_op_codes([]) == ([0] * MAX_POST_OPS, [])
    assert post_op_codes(chain(*[("relu", None)] * (MAX_POST_OPS + 1))) is None
    assert post_op_codes(chain(("add", 4), ("add", 5), ("mul", 6))) is None  # three operands


def test_inverse_scale_is_the_float32_reciprocal():
    assert inverse_scale(0.1) == float(torch.tensor(1.0, dtype=torch.float32) / torch.tensor(0.1, dtype=torch.float32))


def _guard() -> Guard:
    return Guard(torch.device("cpu"), reads=1, low=0, high=10, error=lambda: UserInputError("id outside", "fix"))


def test_host_check_refuses_values_outside_the_range():
    guard = _guard()
    guard.check_host(torch.tensor([0, 9, 3]))
    guard.check_host(torch.tensor([], dtype=torch.int64))
    for bad in ([10], [-1, 2]):
        with pytest.raises(UserInputError, match="id outside"):
            guard.check_host(torch.tensor(bad))


def test_tripped_flags_raise_once_and_reset():
    first, second = _guard(), _guard()
    raise_tripped([first, second])  # nothing tripped
    second.trip_if(torch.tensor([False, True]))
    with pytest.raises(UserInputError):
        raise_tripped([first, second])
    assert not first.flag.item() and not second.flag.item()
    raise_tripped([first, second])  # reset: a clean call passes


def test_doctor_says_whether_the_gpu_can_run():
    from ipexconvert.backends.cuda import unavailable_reason
    from ipexconvert.doctor import gpu_report

    reason, report = unavailable_reason(), gpu_report()
    if reason is not None:
        assert report == {"cuda": f"not available: {reason}"}
    else:
        assert report["architecture"].startswith("sm_") and report["device"]
        assert report["programmatic_dependent_launch"] == (torch.cuda.get_device_capability()[0] >= 9)


def test_programmatic_dependent_launch_only_on_gpus_that_have_it(monkeypatch):
    from ipexconvert.backends.cuda.kernels import _triton

    monkeypatch.setattr(_triton, "PDL", True)
    assert not _triton.pdl_enabled("cpu")  # (a CPU tensor's kernels: the interpreter)
    if torch.cuda.is_available():
        assert _triton.pdl_enabled("cuda") == (torch.cuda.get_device_capability()[0] >= 9)
        monkeypatch.setenv("IPEXCONVERT_GPU_PDL", "0")
        assert not _triton.pdl_enabled("cuda")
    monkeypatch.setattr(_triton, "PDL", False)
    assert not _triton.pdl_enabled("cuda")
