"""The executor runs nodes computed from constants and dynamic dims alone (position ids, rotary
tables) once per set of dims and keeps their values: results equal eager PyTorch for every seq
length, in any order, past the cache's size; a dims-only model output is never kept (the caller
may write into it)."""
from __future__ import annotations

import torch
from torch import nn

from ipexconvert.ir.dynamic_dims import DynamicDim
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.passes import PassOptions, run_pipeline
from ipexconvert.passes.pipeline import PIPELINES
from ipexconvert.runtime import executor as executor_module
from ipexconvert.runtime.executor import Executor


class Positions(nn.Module):
    """x + a position embedding, projected, times a rotary-like table: both depend on seq only."""

    def __init__(self, return_table: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.return_table = return_table
        self.pos, self.proj = nn.Embedding(32, 8), nn.Linear(8, 8)

    def forward(self, x):
        ids = torch.arange(x.shape[1])
        angles = ids.float()[:, None] * (torch.arange(4).float()[None, :] + 1) / 10
        table = torch.cat([angles.cos(), angles.sin()], -1)  # [seq, 8]
        y = self.proj(x + self.pos(ids)) * table
        return (y, table) if self.return_table else y


def executor_for(module: nn.Module) -> Executor:
    x = torch.randn(2, 6, 8)
    program = program_from_module(module.eval(), {"x": x}, {"x": {1: DynamicDim(name="seq", max=32)}})
    run_pipeline(program, PIPELINES["cpu", "fp32"], PassOptions(dtype="fp32"))
    return Executor(program)


def test_dims_only_nodes_run_once_per_seq_and_match_eager(monkeypatch):
    module = Positions()
    executor = executor_for(module)
    assert executor.prelude and executor.main  # the position and table nodes are dims-only, the rest is not
    assert "embedding" in {step.op for step in executor.prelude} and "linear" in {step.op for step in executor.main}
    calls = []
    for step in executor.prelude:  # count how often the dims-only steps run
        monkeypatch.setattr(step, "kernel", lambda ins, dims, fn=step.kernel: calls.append(1) or fn(ins, dims))
    lengths = [5, 7, 5, 9, 11, 13, 5, 7]  # 5 is evicted after four other lengths
    for seq in lengths:
        x = torch.randn(2, seq, 8)
        (got,) = executor.run([x], {"seq": seq})
        with torch.inference_mode():
            want = module(x)
        assert ((got - want).abs().max() / want.abs().max()).item() < 1e-5, seq
    runs_of_prelude = len(calls) // len(executor.prelude)
    assert runs_of_prelude == 7  # once per new length: 5, 7, 9, 11, 13, then 5 and 7 again after eviction
    assert len(executor._dims_cache) == executor_module._DIMS_CACHE_SIZE


def test_a_dims_only_model_output_is_computed_each_call():
    module = Positions(return_table=True)
    executor = executor_for(module)
    x = torch.randn(2, 5, 8)
    _, table = executor.run([x], {"seq": 5})
    want = table.clone()
    with torch.inference_mode():
        table.zero_()  # the caller owns what it gets back
    y, again = executor.run([x], {"seq": 5})
    assert torch.equal(again, want)
    with torch.inference_mode():
        assert ((y - module(x)[0]).abs().max() / y.abs().max()).item() < 1e-5


def test_calls_from_several_threads_with_changing_dims():
    """The kept values are shared between callers: threads running different lengths at once all get eager's result."""
    from concurrent.futures import ThreadPoolExecutor

    module = Positions()
    executor = executor_for(module)
    lengths = [5, 7, 9, 11, 13, 6] * 4

    def one(seq: int) -> float:
        x = torch.randn(2, seq, 8, generator=torch.Generator().manual_seed(seq))
        (got,) = executor.run([x], {"seq": seq})
        with torch.inference_mode():
            want = module(x)
        return ((got - want).abs().max() / want.abs().max()).item()

    with ThreadPoolExecutor(max_workers=4) as pool:
        errors = list(pool.map(one, lengths))
    assert max(errors) < 1e-5
    assert len(executor._dims_cache) <= 4


def test_byte_limit_keeps_fewer_sets_or_none(monkeypatch):
    """Kept values stay within _DIMS_CACHE_BYTES: the oldest sets go first, and a set larger than the
    limit is not kept at all (its dims-only steps run on every call, with the same results)."""
    module = Positions()
    executor = executor_for(module)
    executor.run([torch.randn(2, 8, 8)], {"seq": 8})
    (_, one_set, _), = executor._dims_cache.values()
    executor._dims_cache.clear()

    monkeypatch.setattr(executor_module, "_DIMS_CACHE_BYTES", one_set * 2 + 1)
    for seq in (8, 7, 6, 5):  # smaller lengths, smaller sets: the limit holds whatever the mix
        executor.run([torch.randn(2, seq, 8)], {"seq": seq})
        assert sum(e[1] for e in executor._dims_cache.values()) <= one_set * 2 + 1
    assert 2 <= len(executor._dims_cache) < 4

    monkeypatch.setattr(executor_module, "_DIMS_CACHE_BYTES", 1)
    executor._dims_cache.clear()
    for _ in range(3):
        x = torch.randn(2, 6, 8)
        (got,) = executor.run([x], {"seq": 6})
        with torch.inference_mode():
            want = module(x)
        assert ((got - want).abs().max() / want.abs().max()).item() < 1e-5
    assert not executor._dims_cache


class ReadBeforeLastDimsOnlyReader(nn.Module):
    """ids (dims-only) read first by a node that is not (its output is a model output) and last by one that is:
    the prelude, which runs first, must not free ids, and the output, a view of the kept ids, is the caller's."""

    def forward(self, x):
        ids = torch.arange(x.shape[1])
        first = ids.unsqueeze(0)
        table = (ids.float() * 2).cos()
        return x * table[None, :, None], first


def test_a_value_main_reads_outlives_the_prelude_and_an_output_viewing_it_is_a_copy():
    module = ReadBeforeLastDimsOnlyReader()
    executor = executor_for(module)
    x = torch.randn(2, 5, 8)
    y, first = executor.run([x], {"seq": 5})
    assert torch.equal(first, torch.arange(5)[None])
    with torch.inference_mode():
        first.zero_()  # the caller writes into what it got back
    y_again, first_again = executor.run([x], {"seq": 5})
    assert torch.equal(first_again, torch.arange(5)[None]) and torch.equal(y_again, y)
    torch.testing.assert_close(y, module(x)[0])
