"""The CPU Backend (see backends/__init__.py): kernels chosen for the selected ISA level, bf16 widened
to float32 at load below native bf16, channels-last constants, malloc tuned once per process."""
from __future__ import annotations

from typing import Callable, Optional

import torch

from ...errors import ArtifactError
from ...ir import Program
from ...ir.spec import TensorSpec
from ...runtime.kernels import kernel_names
from ...target import PORTABLE, Target
from . import compute_precision, kernels, malloc, native_lib, thread_placement  # noqa: F401  (kernels: registers the CPU factories)
from .isa import ISA_LEVELS, selected_isa


class CpuBackend:
    device = "cpu"
    propagates_nan = False  # oneDNN's max pooling and fused relu compute max(x, 0)
    static_decode = False  # growing caches (kernels/kv_append.py): attention reads only the written keys

    def torch_device(self) -> torch.device:
        return torch.device("cpu")

    def level(self) -> str:
        return selected_isa()

    def check_target(self, target: Target, where: str) -> None:
        if target.device != "cpu":
            raise ArtifactError(f"{where} was made for device {target.device}, not the CPU",
                                f"load it with device={target.device!r}, or convert again with --target cpu")
        if target.level != PORTABLE and ISA_LEVELS.index(self.level()) < ISA_LEVELS.index(target.level):
            raise ArtifactError(f"{where} was made for CPUs with {target.level} or above; this one runs {self.level()}",
                                "convert the model again with --target cpu (portable) to run it here")

    def prepare_process(self) -> None:
        malloc.keep_freed_memory()  # process-wide, once: intermediates reuse their pages between calls

    def prepare_program(self, program: Program, widen_bf16: Optional[bool]) -> tuple[Program, Optional[str]]:
        if not compute_precision.has_bf16(program.graph):
            return program, None
        if widen_bf16 is None:
            widen_bf16 = compute_precision.widens_at_load(self.level(), program.graph)
        if widen_bf16:
            return compute_precision.widen_bf16(program), "float32"
        if compute_precision.reads_weights_per_token(program.graph):  # a decoder: float32 kernels below avx512_bf16
            return program, compute_precision.bf16_compute_dtype(self.level())
        return program, "bfloat16"

    def place_constant(self, tensor: torch.Tensor, spec: TensorSpec) -> torch.Tensor:
        if spec.memory_format == "channels_last" and tensor.dim() == 4:
            return tensor.contiguous(memory_format=torch.channels_last)
        return tensor

    def capture_calls(self, calls: list) -> Optional[Callable[[], None]]:
        return native_lib.capture(calls)

    def row_copy(self, table, out, length_at, first: int) -> Optional[Callable[[], None]]:
        return native_lib.row_copy(table, out, length_at, first)

    def call_context(self):
        return thread_placement.placed()

    def make_runner(self, executor):
        return executor

    def kernel_names(self) -> dict[str, list[str]]:
        return kernel_names(self.device)


BACKEND = CpuBackend()
