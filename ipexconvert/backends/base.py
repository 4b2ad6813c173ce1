"""The Backend protocol (see backends/__init__.py)."""
from __future__ import annotations

from typing import Callable, ContextManager, Optional, Protocol

import torch

from ..ir import Program
from ..ir.spec import TensorSpec
from ..target import Target


class Backend(Protocol):
    device: str
    # Whether every kernel propagates NaN/Inf as eager PyTorch does; if not, float inputs holding them
    # run a plan of NaN-safe kernels (runtime/model.py), found by one scan of the inputs per call.
    propagates_nan: bool
    # Whether a decoder generates over static caches here (runtime/static_cache.py): worth it where a decode
    # step replays a captured graph (a GPU); the CPU appends to growing caches, attending to the written keys only.
    static_decode: bool

    def torch_device(self) -> torch.device:
        """Where the plan's tensors live (a static cache's buffers are made there)."""

    def level(self) -> str:
        """The ISA level (CPU) or architecture (GPU) kernels are chosen for in this process."""

    def check_target(self, target: Target, where: str) -> None:
        """Raise ArtifactError when this device cannot run an artifact made for `target`."""

    def prepare_process(self) -> None:
        """Process-wide settings, once, before the first plan is built (e.g. malloc tuning)."""

    def prepare_program(self, program: Program, widen_bf16: Optional[bool]) -> tuple[Program, Optional[str]]:
        """The program as this device will run it (e.g. bf16 widened to float32 where the CPU has no
        bf16 arithmetic), and what bf16 nodes compute in (None: the graph has none)."""

    def place_constant(self, tensor: torch.Tensor, spec: TensorSpec) -> torch.Tensor:
        """A constant as the kernels want it in memory (layout, device)."""

    def kernel_names(self) -> dict[str, list[str]]:
        """op -> the names of its registered factories, in preference order (for doctor --kernels)."""

    def capture_calls(self, calls: list) -> Optional[Callable[[], None]]:
        """One call that makes the kernel calls of `calls` (bound plans' runs of bound calls: runtime/bound_plan.py)
        with nothing between them, or None where this device cannot record them."""

    def row_copy(self, table, out, length_at, first: int) -> Optional[Callable[[], None]]:
        """A call of no arguments that copies table[length_at - first] into out, reading the length cell (a
        1-element int64 tensor) when it runs, which capture_calls can record (bound plans: a decode step's rotary
        rows and mask, computed ahead per cache length); None where this device has none."""

    def call_context(self) -> ContextManager[None]:
        """Entered around each call of a model (the CPU keeps the caller and its OpenMP workers on different CPUs:
        backends/cpu/thread_placement.py); a context that does nothing elsewhere."""

    def make_runner(self, executor):
        """What runs the executor's plan per call (an object with run, profile, raise_tripped and forget_buffers,
        as runtime/executor.Executor has them): the executor itself on the CPU, a CUDA-graph replayer on the GPU."""
