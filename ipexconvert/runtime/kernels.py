"""Kernel registry: (device, op) -> factories tried in order; the reference implementation last.

A factory sees the node's typed attrs, which inputs are constants (with their tensors),
the value specs and the selected ISA. It returns a Kernel, or None to decline (an
unsupported shape, a failed probe), and the next factory is tried. A kernel may take
ownership of constant inputs (e.g. prepacked weights): the executor then no longer
passes them, and frees the original tensor when no other node reads it.

A kernel that writes its result on top of one input (a convolution summing a residual into
its output) can offer an in-place variant: the executor uses it when that input is read for
the last time here and was made by a kernel with fresh_output (so no other live value shares
its memory), saving the copy the kernel would otherwise make.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from ..ir.opdef import get_op
from ..ir.spec import TensorSpec

KernelFn = Callable[[list, dict[str, int]], Any]


class NonFiniteInput(Exception):
    """A kernel's checked_fn found a NaN or an infinity in the graph input it reads (named, once the executor has
    said which)."""

    def __init__(self, name: Optional[str] = None):
        super().__init__(name)
        self.name = name


def all_finite(t: torch.Tensor) -> bool:
    """Whether t holds no NaN or Inf. A sum is NaN or infinite whenever some element is, so a finite sum answers
    in one reduction (~20 us for an image, where isfinite(t).all() writes a mask first: ~200 us, 2-3 % of a
    ResNet-50 int8 call); a sum that overflows only sends the question to the exact check."""
    total = t.sum(dtype=torch.float32) if t.dtype in (torch.float16, torch.bfloat16) else t.sum()
    return bool(torch.isfinite(total)) or bool(torch.isfinite(t).all())


@dataclass(frozen=True)
class NodeContext:
    op: str
    attrs: Any
    constants: tuple[Optional[torch.Tensor], ...]  # per input: its tensor if constant, else None
    input_specs: tuple[Optional[TensorSpec], ...]
    output_specs: tuple[TensorSpec, ...]
    device: str
    isa: str
    # A plan for inputs that hold NaN or Inf: kernels that turn NaN into numbers (oneDNN's max
    # pooling and its fused relu compute max(x, 0)) decline, so NaN propagates as in eager PyTorch.
    nan_safe: bool = False


@dataclass(frozen=True)
class Kernel:
    fn: KernelFn
    name: str
    consumed_inputs: frozenset[int] = field(default_factory=frozenset)  # constants the kernel holds itself
    fresh_output: bool = False  # returns memory it allocated itself, never a view of an input
    in_place: Optional[tuple[int, KernelFn]] = None  # (input slot, fn that may overwrite that input)
    # False: may turn NaN into numbers (oneDNN's max pooling and fused relu); such kernels are left out of
    # NaN-safe plans (NodeContext.nan_safe), and a plan holding one makes the model scan its float inputs.
    keeps_nan: bool = True
    # Inputs the kernel writes into by design, returning them as its outputs (a static KV cache's buffers, which
    # the caller owns and passes on every call: ir/ops/kv_write.py). Every other input is left as it was.
    writes_inputs: frozenset[int] = field(default_factory=frozenset)
    # bind(inputs, dims) -> (call, outputs) or None: outputs made once and a call of no arguments that recomputes
    # them from these very input tensors (whose contents change between calls, never their shapes), doing exactly
    # what fn would (runtime/bound_plan.py: a decoder's decode steps). None where this input layout needs fn's checks.
    bind: Optional[Callable[[list, dict[str, int]], Optional[tuple[Callable[[], Any], list]]]] = None
    # bind for the in-place variant (in_place), where the executor runs that: its output is the input it overwrites
    bind_in_place: Optional[Callable[[list, dict[str, int]], Optional[tuple[Callable[[], Any], list]]]] = None
    # bind_varying(inputs, dims, varying) -> fn or None: for a step reading values whose shapes change between
    # calls (`varying`: their input indices; a decoder's cache), a function like fn that takes the current inputs
    # (the others: these very tensors) and returns its fixed-shape results in the same tensors on every call.
    # That function may also have `record(inputs, results, length_at, buffer_for) -> RecordedStep or None`
    # (runtime/bound_plan.py): the same step as one native call that reads the cache length from a length cell as
    # it runs, which a bound plan records beside its bound calls.
    bind_varying: Optional[Callable[[list, dict[str, int], frozenset[int]], Optional[KernelFn]]] = None
    # fn that also raises NonFiniteInput when input 0, which it reads whole, holds a NaN or an infinity (found as it
    # reads it, so nothing reads that input twice). Where input 0 is a float graph input that only such steps read,
    # the executor runs this instead of fn and the model skips its own scan of that input (runtime/model.py): an
    # image's NCHW -> channels-last conversion or quantization, the first step of a CNN.
    checked_fn: Optional[KernelFn] = None


# A kernel may spend its first calls in the model choosing between two ways of running its layer, timing each where
# it runs (backends/cpu/kernels/_in_situ.py: its first 10 calls), and then the executor between a fixed plan and
# running step by step (runtime/executor.py, run_fixed: the 10 after): timings of an artifact start after this many
# warm-up calls.
CHOOSING_CALLS = 20

KernelFactory = Callable[[NodeContext], Optional[Kernel]]
# level (ISA level or GPU architecture) -> None when the factory's library can run at that level in this
# process, else why not (not built, failed its self-check, needs a higher level, switched off)
RunsAt = Callable[[str], Optional[str]]
KERNELS: dict[tuple[str, str], list[KernelFactory]] = {}


def _always(_level: str) -> Optional[str]:
    return None


def register_kernel(device: str, op: str, runs_at: RunsAt = _always):
    """Register a factory for (device, op), after those already registered (registration order is
    preference order). `runs_at` says, per level, whether the factory can run at all in this process:
    the executor skips it where it cannot, and `ipexconvert doctor --kernels` shows it."""
    def wrap(factory: KernelFactory) -> KernelFactory:
        factory.runs_at = runs_at  # type: ignore[attr-defined]
        KERNELS.setdefault((device, op), []).append(factory)
        return factory

    return wrap


def kernel_names(device: str) -> dict[str, list[str]]:
    """op -> the names of the device's registered factories, in preference order (Backend.kernel_names)."""
    return {op: [f.__name__ for f in factories] for (d, op), factories in sorted(KERNELS.items()) if d == device}


def why_not_here(factory: KernelFactory, level: str) -> Optional[str]:
    """None when the factory can run at this level, else why not (factories registered by hand, e.g. in
    tests, always can)."""
    return getattr(factory, "runs_at", _always)(level)


def avoided(factory: KernelFactory, avoid: frozenset[str]) -> bool:
    """Whether `avoid` (factory names, or families: the name's prefix before "_<op>", e.g. "onednn_direct")
    names this factory."""
    name = factory.__name__
    return any(name == a or name.startswith(a + "_") for a in avoid)


def check_avoid(avoid, device: str = "cpu") -> frozenset[str]:
    """The kernel names/families to avoid, each checked to name at least one registered factory of the device."""
    names = [f.__name__ for (d, _), factories in KERNELS.items() if d == device for f in factories]
    unknown = sorted(a for a in avoid if not any(n == a or n.startswith(a + "_") for n in names))
    if unknown:
        from ..errors import UserInputError

        families = sorted({n.split("_")[0] if n.startswith("native") else "_".join(n.split("_")[:2]) for n in names})
        raise UserInputError(f"no {device} kernel is named {', '.join(unknown)}",
                             f"name a kernel family ({', '.join(families)}) or a factory from `ipexconvert doctor --kernels`")
    return frozenset(avoid)


def resolve_kernel(ctx: NodeContext, avoid: frozenset[str] = frozenset()) -> Kernel:
    """The first registered kernel that can run here, is not avoided and accepts this node, else the op's reference."""
    for factory in KERNELS.get((ctx.device, ctx.op), []):
        if why_not_here(factory, ctx.isa) is not None or avoided(factory, avoid):
            continue
        kernel = factory(ctx)
        if kernel is not None:
            return kernel
    return Kernel(get_op(ctx.op).compile(ctx.attrs), f"reference:{ctx.op}")
