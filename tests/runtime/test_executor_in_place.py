"""The executor's in-place variant (Kernel.in_place): a convolution sums its residual into the residual's own
buffer only where that is safe (the residual's last read, made by a fresh_output kernel, not shared with a
view); every variant gives eager PyTorch's result."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ipexconvert.backends.cpu import onednn_direct as dnnl
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.passes import PassOptions, run_pipeline
from ipexconvert.passes.pipeline import PIPELINES
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.runtime.executor import Executor

pytestmark = pytest.mark.skipif(not dnnl.usable(selected_isa()), reason="the in-place variant is the direct oneDNN conv's")


class Residual(nn.Module):
    """r = relu(c1(x)) -> c2 -> c3 + r (ResNet's block shape), in three variants."""

    def __init__(self, variant: str):
        super().__init__()
        torch.manual_seed(0)
        self.variant = variant
        self.c1, self.c2 = nn.Conv2d(4, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.c3, self.c4 = nn.Conv2d(8, 8, 1), nn.Conv2d(8, 8, 1)

    def forward(self, x):
        r = F.relu(self.c1(x))
        view = torch.flatten(r, 2) if self.variant == "view" else None  # shares r's memory, read at the end
        h = F.relu(self.c2(r))
        y = F.relu(self.c3(h) + r)
        if view is not None:
            return y + view.unflatten(2, r.shape[2:])
        if self.variant == "read_later":  # r is also c4's residual: only c4 may take its buffer
            return self.c4(y) + r
        return y


def executor_for(variant: str) -> tuple[Executor, nn.Module, torch.Tensor]:
    module = Residual(variant).eval()
    x = torch.randn(2, 4, 6, 6, generator=torch.Generator().manual_seed(1))
    program = program_from_module(module, {"x": x}, {})
    run_pipeline(program, PIPELINES["cpu", "fp32"], PassOptions(dtype="fp32"))
    return Executor(program), module, x


def in_place_steps(executor: Executor) -> list[tuple[str, bool]]:
    return [(step.node, step.in_place) for step in executor.steps if step.kernel_name == "onednn_direct:conv2d"]


@pytest.mark.parametrize("variant,expected", [
    ("last_read", [False, False, True]),          # c3 sums into r's buffer: nothing reads r after it
    ("read_later", [False, False, False, True]),  # c3 must copy r; c4, its last reader, takes it
    ("view", [False, False, False]),              # a live view shares r's memory: never overwritten
])
def test_in_place_only_where_safe_and_results_match_eager(variant, expected):
    executor, module, x = executor_for(variant)
    assert [flag for _, flag in in_place_steps(executor)] == expected
    x_before = x.clone()
    (got,) = executor.run([x], {})
    with torch.inference_mode():
        want = module(x)
    assert torch.equal(x, x_before)
    assert ((got - want).abs().max() / want.abs().max()).item() < 1e-4
    (again,) = executor.run([x], {})  # buffers from the first run are not reused by mistake
    assert torch.equal(again, got)
