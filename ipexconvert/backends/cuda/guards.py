"""Input checks that cannot read values back to the CPU inside a CUDA graph.

On the CPU, a kernel refuses bad input data (an embedding id outside the table) by reading its min and
max before touching memory. Inside a captured graph nothing may be read back, so a GPU kernel makes the
access safe on the GPU (ids clamped into the table) and raises a flag there; the runner reads every flag
after the run (raise_tripped) and turns a raised one into the same UserInputError, discarding the outputs.
Reading the flags waits for the GPU, so where the checked value is a model input given on the CPU (token
ids usually are), the runner checks it there before copying it over instead (check_host), and the GPU's
flags need not be read.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from ...errors import UserInputError


class Guard:
    def __init__(self, gpu: torch.device, reads: int, low: int, high: int, error: Callable[[], UserInputError]):
        """reads: which input of its node the guard checks, to hold values in [low, high)."""
        self.flag = torch.zeros((), dtype=torch.bool, device=gpu)
        self.reads, self.low, self.high, self.error = reads, low, high, error
        self.input_position: int | None = None  # the model input it checks, when the node reads one directly

    def check_host(self, values: torch.Tensor) -> None:
        """The same check on a CPU tensor, before it goes to the GPU."""
        if values.numel():
            lo, hi = (int(v) for v in torch.aminmax(values))
            if lo < self.low or hi >= self.high:
                raise self.error()

    def trip_if(self, bad: torch.Tensor) -> None:
        """Raise the flag where `bad` holds any True (no read-back: capturable)."""
        self.flag.logical_or_(bad.any())


def raise_tripped(guards: Sequence[Guard]) -> None:
    """The first tripped guard's error (all flags are reset), or nothing. One read-back for all of them."""
    if not guards:
        return
    tripped = torch.stack([g.flag for g in guards]).tolist()
    if any(tripped):
        for g in guards:
            g.flag.zero_()
        raise guards[tripped.index(True)].error()
