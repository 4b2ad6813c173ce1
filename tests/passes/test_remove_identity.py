"""remove_identity: identity nodes and reshapes to the shape their input already has go;
reshapes that change the shape, and those that name a graph output, stay; results are unchanged."""
from __future__ import annotations

import torch
from torch import nn

from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.passes import PassOptions
from ipexconvert.passes.base import PASSES
from pass_helpers import TOL, copy_program, rel_err, run_program


class Reshapes(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        b, s, _ = x.shape
        h = self.lin(x).view(b, s, 2, 4)
        same = h.reshape(b, s, 2, 4)  # the shape h already has: a view of h
        return same.transpose(1, 2).reshape(b, 2, s * 4), h.reshape(b, s, 2, 4)


def test_identity_reshapes_go_and_results_do_not_change():
    x = torch.randn(3, 5, 8)
    program = program_from_module(Reshapes().eval(), {"x": x}, {"x": {0: DynamicDim(name="batch", max=8)}})
    before = copy_program(program)
    reshapes = sum(n.op == "reshape" for n in program.graph.nodes)
    identities = sum(n.op == "identity" for n in program.graph.nodes)  # the export's clones
    removed = PASSES["remove_identity"].run(program, PassOptions(dtype="fp32"))["identities_removed"]
    left = [n for n in program.graph.nodes if n.op == "reshape"]
    # the identities and the inner identity reshape go; the shape-changing ones and the output's stay
    assert removed == identities + 1 and len(left) == reshapes - 1
    assert not any(n.op == "identity" for n in program.graph.nodes)
    assert all(program.graph.values[n.inputs[0]] != program.graph.values[n.outputs[0]] or n.outputs[0] in program.graph.outputs
               for n in left)
    for got, want in zip(run_program(program, {"x": x}, {"batch": 3}), run_program(before, {"x": x}, {"batch": 3}), strict=True):
        assert rel_err(got, want) < TOL


class NeutralArithmetic(nn.Module):
    """Numbers that change nothing (x * 1.0, x / 1, positions + 0) beside ones that do (x + 0.0 in floating
    point turns -0.0 into +0.0; int positions * 1.0 become float; x * 2)."""

    def forward(self, x, ids):
        scaled = torch.cos(x) * 1.0 + torch.sin(x) / 1
        positions = ids + 0
        return scaled, positions * 2, x + 0.0, ids * 1.0, x * 2


def test_neutral_arithmetic_goes_only_where_it_changes_nothing():
    x, ids = torch.tensor([[-0.0, 1.5, -2.0]]), torch.tensor([[3, 4, 5]])
    program = program_from_module(NeutralArithmetic().eval(), {"x": x, "ids": ids}, {})
    before = copy_program(program)
    scalar_ops = lambda p: sorted((n.op, str(n.attrs.get("rhs_scalar"))) for n in p.graph.nodes if n.op in ("mul", "div", "add"))
    assert ("mul", "1.0") in scalar_ops(program) and ("add", "0") in scalar_ops(program)
    PASSES["remove_identity"].run(program, PassOptions(dtype="fp32"))
    # kept: x + 0.0 (float), ids * 1.0 (promotes to float), the two * 2, and the add of cos and sin
    assert scalar_ops(program) == sorted([("add", "0.0"), ("mul", "1.0"), ("mul", "2"), ("mul", "2"), ("add", "None")])
    got, want = run_program(program, {"x": x, "ids": ids}, {}), run_program(before, {"x": x, "ids": ids}, {})
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and torch.equal(g, w)
    assert torch.equal(torch.signbit(got[2]), torch.signbit(want[2]))  # +0.0 where x held -0.0: the add stayed
