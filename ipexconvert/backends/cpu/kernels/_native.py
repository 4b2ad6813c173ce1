"""What the native kernel factories share: when a node qualifies, norm parameters, names."""
from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import torch

from .. import native_lib
from ....ir.opdef import get_op
from ....runtime.kernels import Kernel, KernelFn, NodeContext, NonFiniteInput, all_finite

DTYPES = ("float32", "bfloat16")  # what the native kernels compute on


def dense_view(x: torch.Tensor):
    """(contiguous view, function undoing the view) for contiguous or channels-last x, else None:
    element-wise kernels run on a channels-last tensor through its NHWC view."""
    if x.is_contiguous():
        return x, lambda q: q
    if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last):
        return x.permute(0, 2, 3, 1), lambda q: q.permute(0, 3, 1, 2)
    return None


def strictly_nchw(x: torch.Tensor) -> bool:
    """A 4-D tensor laid out NCHW that is not also channels-last (C or H * W of 1 is both)."""
    return x.dim() == 4 and x.is_contiguous() and not x.is_contiguous(memory_format=torch.channels_last)


def to_channels_last(x: torch.Tensor, dtype: torch.dtype, isa: str, scale: float = 1.0,
                     zero_point: int = 0, check_finite: bool = False) -> torch.Tensor:
    """x (strictly_nchw) as a channels-last tensor of dtype by the native to_channels_last kernel:
    float32/bfloat16 converted, int8/uint8 quantized with scale and zero_point; one pass. check_finite: raise
    NonFiniteInput where x holds a NaN or an infinity (found in the same pass)."""
    n, c, h, w = x.shape
    nhwc = torch.empty((n, h, w, c), dtype=dtype)
    if not native_lib.raw.to_channels_last(x, nhwc, scale, zero_point, isa, torch.get_num_threads(), check_finite):
        raise NonFiniteInput()
    return nhwc.permute(0, 3, 1, 2)


def checked_in_the_pass(run: Callable[[list, dict[str, int], bool], torch.Tensor]) -> KernelFn:
    """The Kernel.checked_fn of a kernel whose run(inputs, dims, check_finite) checks an NCHW input 0 in its native
    to_channels_last pass: an input in another layout (which run hands to other code) is checked by a reduction
    first. Raises NonFiniteInput where input 0 holds a NaN or an infinity."""
    def checked(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        if not strictly_nchw(inputs[0]) and not all_finite(inputs[0]):
            raise NonFiniteInput()
        return run(inputs, dims, True)
    return checked


def qualifies(ctx: NodeContext, activations: Sequence[int]) -> bool:
    """The extension is built, the node runs on the CPU, and the activation inputs and all
    outputs are contiguous float32/bfloat16 values of one dtype."""
    if ctx.device != "cpu" or not native_lib.available():
        return False
    specs = [ctx.input_specs[i] for i in activations] + list(ctx.output_specs)
    if any(s is None or s.dtype not in DTYPES or s.memory_format != "contiguous" or s.rank == 0 for s in specs):
        return False
    if any(ctx.constants[i] is not None for i in activations):
        return False  # constant activations are rare (folding removes them); leave them to torch
    return len({s.dtype for s in specs}) == 1


class NormParam:
    """A norm weight or bias as the kernel wants it: contiguous float32 of `cols` elements.

    A constant is converted once here and held by the kernel (the executor stops passing it);
    a run-time value is converted per call; an absent one stays None."""

    def __init__(self, ctx: NodeContext, index: int):
        self.index = index
        self.spec = ctx.input_specs[index] if index < len(ctx.input_specs) else None
        self.absent = self.spec is None
        const = None if self.absent else ctx.constants[index]
        self.constant = None if const is None else const.detach().to(torch.float32).contiguous()

    def fits(self, cols: int) -> bool:
        if self.absent:
            return True
        if self.constant is not None:
            return self.constant.numel() == cols
        return all(isinstance(d, int) for d in self.spec.shape) and math.prod(self.spec.shape) == cols

    @property
    def consumed(self) -> set[int]:
        return {self.index} if self.constant is not None else set()

    def binds(self, inputs: list) -> bool:
        """get() hands over the call's own tensor (or the held constant, or None), not a converted copy: a bound
        call (Kernel.bind) may keep it."""
        if self.absent or self.constant is not None:
            return True
        t = inputs[self.index]
        return t.dtype == torch.float32 and t.is_contiguous()

    def get(self, inputs: list) -> Optional[torch.Tensor]:
        if self.absent:
            return None
        if self.constant is not None:
            return self.constant
        return inputs[self.index].to(torch.float32).contiguous()


def kernel_name(op: str, kernel: str, isa: str) -> str:
    """e.g. native:layer_norm@avx512_bf16 (the build that runs at this ISA level)."""
    return f"native:{op}@{native_lib.kernel_level(kernel, isa)}"


def unary_kernel(ctx: NodeContext, kernel: str, call) -> Kernel:
    """A kernel for one contiguous activation in, one out: `call(x, out, threads)` fills `out`.

    Strided inputs (rare after the passes) go to the op's reference instead of being copied.
    """
    reference = get_op(ctx.op).compile(ctx.attrs)

    def run(inputs, dims):
        x = inputs[0]
        if not x.is_contiguous():
            return reference(inputs, dims)
        out = torch.empty_like(x)
        call(x, out, torch.get_num_threads())
        return out

    return Kernel(run, kernel_name(ctx.op, kernel, ctx.isa))
