"""The CUDA Backend (see backends/__init__.py): constants moved to the GPU at load (channels-last where the
graph says so, as on the CPU), bf16 computed in bf16 (every GPU torch
supports has bf16 tensor cores or emulates it in its own kernels), and the plan replayed from one CUDA
graph per set of dims (graphs.py)."""
from __future__ import annotations

import contextlib
from typing import Optional

import torch

from ...errors import UserInputError
from ...ir import Program
from ...ir.spec import TensorSpec
from ...runtime.kernels import kernel_names
from ...target import Target
from . import kernels, unavailable_reason  # noqa: F401  (kernels: registers the CUDA factories)


class CudaBackend:
    device = "cuda"
    propagates_nan = True  # torch's CUDA operators and our kernels keep NaN
    static_decode = True  # one captured decode step for every token (runtime/static_cache.py)

    def __init__(self) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise UserInputError(f"device cuda cannot be used: {reason}",
                                 "run on a machine with an NVIDIA GPU and a CUDA build of torch, or leave the device out "
                                 "(the CPU runs the same artifact)")
        self.gpu = torch.device("cuda", torch.cuda.current_device())

    def torch_device(self) -> torch.device:
        return self.gpu

    def level(self) -> str:
        major, minor = torch.cuda.get_device_capability(self.gpu)
        return f"sm_{major}{minor}"

    def check_target(self, target: Target, where: str) -> None:
        # The graph is device-neutral: a CPU target's level only restricts which CPUs may run it.
        return None

    def prepare_process(self) -> None:
        # float32 artifacts promise float32 results: no TF32 rounding of matmul/conv inputs.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True  # one plan per conv shape, chosen on the warm-up call

    def prepare_program(self, program: Program, widen_bf16: Optional[bool]) -> tuple[Program, Optional[str]]:
        from ..cpu import compute_precision
        from .attention_prologues import fuse_attention_prologues
        from .epilogues import fuse_rope_epilogues
        from .float_projections import float_projections
        from .kernels._triton import triton_missing
        from .prologues import fuse_prologues

        def fused(p: Program) -> Program:
            if triton_missing(self.level()) is None:  # (bf16 layers as woq_linear: only where its GEMV runs)
                p = float_projections(p)
            return fuse_attention_prologues(fuse_rope_epilogues(fuse_prologues(p), self.level()), self.level())

        if not compute_precision.has_bf16(program.graph):
            return fused(program), None
        if widen_bf16:
            return fused(compute_precision.widen_bf16(program)), "float32"
        return fused(program), "bfloat16"

    def place_constant(self, tensor: torch.Tensor, spec: TensorSpec) -> torch.Tensor:
        on_gpu = tensor.to(self.gpu)
        if spec.memory_format == "channels_last" and tensor.dim() == 4:
            return on_gpu.contiguous(memory_format=torch.channels_last)
        return on_gpu

    def kernel_names(self) -> dict[str, list[str]]:
        return kernel_names(self.device)

    def capture_calls(self, calls: list) -> None:
        return None  # (a GPU captures whole decode steps in CUDA graphs: runtime/static_cache.py)

    def row_copy(self, table, out, length_at, first: int) -> None:
        return None  # (a GPU's decode step reads its position from an input: runtime/static_cache.py)

    def call_context(self):
        return contextlib.nullcontext()

    def make_runner(self, executor):
        from .graphs import GraphRunner

        return GraphRunner(executor, self.gpu)


BACKEND = CudaBackend()
