"""Input checks that cannot read values back to the CPU inside a CUDA graph.

On the CPU, a kernel refuses bad input data (an embedding id outside the table) by reading its min and
max before touching memory. Inside a captured graph nothing may be read back, so a GPU kernel makes the
access safe on the GPU (ids clamped into the table) and raises a flag there; the runner reads every flag
after the run (raise_tripped) and turns a raised one into the same UserInputError, discarding the outputs.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from ...errors import UserInputError


class Guard:
    def __init__(self, gpu: torch.device, error: Callable[[], UserInputError]):
        self.flag = torch.zeros((), dtype=torch.bool, device=gpu)
        self.error = error

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
