"""Position tables (runtime/position_table.py), on the CPU: a static-cache decode step whose position steps are
replaced by one gather from a table gives the same outputs, bit for bit, as the step that runs them, at every
position; what is tabulated and when nothing is. The GPU's runner uses them in its captured decode step
(tests/backends/cuda/test_cuda_decode.py)."""
from __future__ import annotations

import pytest
import torch

import ipexconvert
import tiny_decoder
from ipexconvert.artifact import read_artifact
from ipexconvert.runtime import position_table
from ipexconvert.runtime.executor import Executor
from ipexconvert.runtime.position_table import PositionTable, index_steps
from ipexconvert.runtime.static_cache import static_program
from tiny_decoder import TinyDecoder

LLAMA_EXPORTS = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                   reason="torch.export of transformers' Llama needs torch >= 2.13 (see docs/architecture.md)")
CAPACITY = 24


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    return ipexconvert.optimize(TinyDecoder(llama=True), tiny_decoder.example_inputs(),
                                dynamic_dims=tiny_decoder.dynamic_dims(),
                                output=tmp_path_factory.mktemp("table") / "tiny.ipxc").path


@pytest.fixture(scope="module")
def llama_path(tmp_path_factory):
    return ipexconvert.optimize("example:tiny-llama", dtype="bf16",
                                output=tmp_path_factory.mktemp("table") / "llama.ipxc").path


def _step(path):
    """(executor of the static program on the CPU, its input names, the position's index, a call's inputs maker)."""
    manifest, program = read_artifact(path)
    record = manifest.decoder
    static, position = static_program(program, record)
    executor = Executor(static, "cpu")
    graph = static.graph
    names = list(graph.inputs)
    caches = {past: graph.values[past] for past, _ in record.cache}
    generator = torch.Generator().manual_seed(0)
    base = {name: torch.randn(1, spec.shape[1], CAPACITY, spec.shape[3], generator=generator).to(
        getattr(torch, spec.dtype)) for name, spec in caches.items()}

    def inputs(token: int, at: int) -> list:
        given = {record.input_ids: torch.tensor([[token]]), position: torch.tensor(at, dtype=torch.int64),
                 **{name: t.clone() for name, t in base.items()}}  # (the step writes its caches in place)
        return [given[n] for n in names]

    dims = {graph.values[record.input_ids].shape[1]: 1, record.cache_dim: CAPACITY - 1, "batch": 1}
    dims = {k: v for k, v in dims.items() if k in graph.dims}
    return executor, names.index(position), inputs, dims


@pytest.mark.parametrize("which", ["tiny", pytest.param("llama", marks=LLAMA_EXPORTS)])
def test_the_gathered_rows_give_the_steps_own_outputs_at_every_position(request, which):
    executor, at, inputs, dims = _step(request.getfixturevalue(f"{which}_path"))
    executor.run(inputs(3, 0), dims)  # (a call with these dims: their dims-only values are kept)
    table = PositionTable.build(executor, at, CAPACITY, inputs(3, 0), dims)
    assert table is not None and table.table.shape[0] == CAPACITY
    replaced = len(executor.main) - len(table.main) + 1
    assert replaced >= 3  # the position's steps (rotary or learned positions, the mask's) went, one gather came
    for p in (0, 1, 7, CAPACITY - 1):
        want = executor.run(inputs(5 + p, p), dims)
        got = executor.run_main(inputs(5 + p, p), dims, table.main)
        for w, g in zip(want, got):
            assert torch.equal(w, g), p
    assert table.holds(torch.tensor(CAPACITY - 1)) and not table.holds(torch.tensor(CAPACITY))
    assert not table.holds(torch.tensor(-1))


@LLAMA_EXPORTS
def test_the_rotary_rows_and_the_mask_are_what_is_tabulated(llama_path):
    executor, at, inputs, dims = _step(llama_path)
    found = index_steps(executor, executor.input_slots[at])
    ops = {executor.main[i].op for i in found.positions}
    nodes = {executor.main[i].node for i in found.positions}
    assert "to_dtype" in ops and {"cos", "sin"} <= nodes, nodes
    assert len(found.frontier) == 3, nodes  # cos and sin in bf16, the mask
    # nothing that reads a layer's values is among them
    assert not any(executor.main[i].op in ("linear", "woq_linear", "sdpa", "rope_kv_write") for i in found.positions)


def test_no_table_past_the_size_limit_or_before_the_dims_ran(tiny_path, monkeypatch):
    executor, at, inputs, dims = _step(tiny_path)
    assert PositionTable.build(executor, at, CAPACITY, inputs(3, 0), dims) is None  # no call with these dims yet
    executor.run(inputs(3, 0), dims)
    monkeypatch.setattr(position_table, "MAX_TABLE_BYTES", 64)
    assert PositionTable.build(executor, at, CAPACITY, inputs(3, 0), dims) is None


def test_no_table_for_an_input_that_is_not_a_scalar(tiny_path):
    executor, at, inputs, dims = _step(tiny_path)
    executor.run(inputs(3, 0), dims)
    assert PositionTable.build(executor, 0, CAPACITY, inputs(3, 0), dims) is None  # the ids [1, 1]
