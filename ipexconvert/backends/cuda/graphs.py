"""GraphRunner: an Executor's plan on the GPU, replayed from one CUDA graph per set of input shapes.

A launch costs microseconds of CPU time, a kernel at batch 1 often less on the GPU: run op by op, the
GPU waits on Python. So the first call with new shapes runs the plan eagerly on a side stream (the
warm-up: cuDNN picks its algorithms, cuBLAS its workspace, the dims-only values are computed and kept),
then captures it into a CUDA graph; every later call with those shapes copies the inputs into the
graph's static buffers (CPU inputs through pinned memory, so nothing waits), replays it (one launch)
and clones the outputs (the buffers are overwritten by the next replay). All graphs of a runner share
one memory pool: they never run at the same time. Every pass over the plan starts a run (run_scope.py),
so memos kernels keep within a run never outlive it.

A plan that cannot be captured (a kernel that reads a value back to the CPU, e.g. an index check of a
generic ATen op) runs eagerly for those shapes, and `graph_status()` says why. Kernels that must refuse
bad input without a CPU read-back (embedding ids outside the table) raise a flag on the GPU instead;
the runner reads the flags after each run and raises the error then (see guards.py).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Optional, Sequence

import torch

from ...ir.ops.aten_allowlist import forget_checked_indices
from ...runtime.position_table import PositionTable
from . import run_scope
from .guards import raise_tripped

MAX_GRAPHS = 16  # sets of shapes kept captured; the least recently used one is dropped beyond that


@dataclass
class Captured:
    graph: Optional[torch.cuda.CUDAGraph]  # None: these shapes run eagerly (capture_error says why)
    static_inputs: list[torch.Tensor] = field(default_factory=list)
    static_outputs: list[torch.Tensor] = field(default_factory=list)
    kept: list = field(default_factory=list)  # dims-only values the graph reads (held so their memory stays)
    capture_error: Optional[str] = None
    staging: dict = field(default_factory=dict)  # input position -> pinned host buffer for CPU inputs
    copied: Optional[torch.cuda.Event] = None  # recorded after the last call's copies out of `staging`
    clone_outputs: list = field(default_factory=list)  # per output: False where it is a persistent input's buffer
    # the table of the steps that read one scalar input alone (runtime/position_table.py), which that input's
    # value must have a row in for a replay; None: the graph runs those steps
    table: Optional[PositionTable] = None
    table_input: int = -1
    table_error: Optional[str] = None  # why a table was asked for and not made (its steps failed)

    def load_inputs(self, inputs: Sequence[torch.Tensor]) -> None:
        """Copy the call's inputs into the static buffers without waiting for the GPU: a CPU input goes
        through a pinned buffer (a copy from pageable memory would wait for the work queued before it).
        A persistent input is its own static buffer: nothing to copy."""
        for i, (buffer, t) in enumerate(zip(self.static_inputs, inputs)):
            if t is buffer:
                continue
            if t.device.type == "cpu":
                if i not in self.staging:
                    self.staging[i] = torch.empty_like(buffer, device="cpu").pin_memory()
                elif self.copied is not None:
                    self.copied.synchronize()  # the previous call's copy out of this buffer is done
                self.staging[i].copy_(t)
                t = self.staging[i]
            buffer.copy_(t, non_blocking=True)
        self.copied = torch.cuda.Event()
        self.copied.record()


class GraphRunner:
    def __init__(self, executor, gpu: torch.device, max_graphs: int = MAX_GRAPHS):
        self.executor, self.gpu, self.max_graphs = executor, gpu, max_graphs
        self.bf16_compute = executor.bf16_compute
        self.position_tables = True  # captures use position tables where a caller names a position (run's positions)
        self._graphs: "OrderedDict[tuple, Captured]" = OrderedDict()
        self._pool = torch.cuda.graph_pool_handle()
        self._lock = threading.Lock()  # one replay at a time: the static buffers are shared
        # Guards of the steps a replay runs; those of the steps run once per set of dims (ids that are
        # not inputs, e.g. position ids) are read on the first call with those dims, before the capture.
        self._guards, self._all_guards = [], []
        position = {slot: i for i, slot in enumerate(executor.input_slots)}
        for step in executor.steps:
            for guard in getattr(step.kernel, "guards", ()):
                guard.input_position = position.get(step.inputs[guard.reads])
                self._all_guards.append(guard)
                if not step.dims_only:
                    self._guards.append(guard)

    def run(self, inputs: Sequence[torch.Tensor], dims: dict[str, int], persistent: frozenset[int] = frozenset(),
            capture: bool = True, check_guards: bool = True, positions: Optional[dict[int, int]] = None,
            borrow_outputs: bool = False) -> list[torch.Tensor]:
        """persistent: positions of inputs that are GPU buffers the caller keeps and passes on every call (a
        static KV cache, written in place by the plan): the graph reads and writes them where they are, and an
        output that is one of them is returned as is. capture=False: run eagerly, capturing nothing (a prompt's
        one-off shapes). check_guards=False: the guards' flags are not read after a replay (reading them waits for
        the GPU); the caller vouches for the inputs and reads them later (raise_tripped). positions: {input
        position: n} for a scalar int64 input given on the CPU that takes the values 0 .. n - 1 with these shapes
        (a static cache's position): the captured graph gathers the results of the steps that read it alone from
        a table made at the capture (runtime/position_table.py); a call with a value outside runs eagerly.
        borrow_outputs: a replay returns its output buffers themselves, not copies (the caller has queued all its
        reads of them on this stream before its next call, which overwrites them: the greedy loop's arg-max)."""
        key = tuple((t.shape, t.dtype, t.data_ptr() if i in persistent else None) for i, t in enumerate(inputs))
        with self._lock, torch.inference_mode():
            checked = self._checked_on_host(inputs)
            entry = self._graphs.get(key)
            if entry is None and capture:
                return self._first_run(key, inputs, dims, persistent, positions or {})
            if entry is not None:
                self._graphs.move_to_end(key)
            if entry is not None and entry.table is not None and not entry.table.holds(inputs[entry.table_input]):
                entry = None  # (a value the table has no row for: the steps run)
            if entry is None or entry.graph is None:  # eager: may rerun the per-dims steps too, whose guards are read here
                run_scope.begin_run()
                outputs = self.executor.run(self._on_gpu(inputs), dims)
                raise_tripped(self._all_guards)
                return outputs
            entry.load_inputs(inputs)
            entry.graph.replay()
            outputs = [t.clone() if fresh and not borrow_outputs else t
                       for t, fresh in zip(entry.static_outputs, entry.clone_outputs)]
            if not checked and check_guards:
                raise_tripped(self._guards)
            return outputs

    def forget_buffers(self, addresses: set[int]) -> int:
        """Drop the graphs captured on persistent buffers at these addresses (a static cache about to be remade for
        another batch or capacity): each holds its buffers, so kept they would hold GPU memory for nothing, and a
        new buffer may later take an old address. Returns how many were dropped."""
        with self._lock:
            stale = [key for key in self._graphs if any(ptr in addresses for _, _, ptr in key if ptr is not None)]
            for key in stale:
                del self._graphs[key]
            if stale and not self._graphs:
                # torch frees a pool with its last graph; a later capture into the old handle fails an allocator
                # assert (torch 2.11: "use_count > 0"), and those shapes would run eagerly: start a new pool
                self._pool = torch.cuda.graph_pool_handle()
            return len(stale)

    def raise_tripped(self) -> None:
        """The error of any guard tripped since the flags were last read (runs called with check_guards=False)."""
        with self._lock:
            raise_tripped(self._all_guards)

    def _checked_on_host(self, inputs: Sequence[torch.Tensor]) -> bool:
        """Check on the CPU every guarded value that is a model input given on the CPU; True when that covers
        every guard (then the GPU's flags, which cost a wait to read, are not read)."""
        covered = True
        for guard in self._guards:
            if guard.input_position is not None and inputs[guard.input_position].device.type == "cpu":
                guard.check_host(inputs[guard.input_position])
            else:
                covered = False
        return covered

    def profile(self, inputs: Sequence[torch.Tensor], dims: dict[str, int], outputs: list | None = None
                ) -> dict[str, float]:
        """Seconds per kernel kind for one eager run, the GPU synchronized after every step (so each
        kernel's launch and GPU time are both counted; a graph replay has the launches removed)."""
        with self._lock:
            run_scope.begin_run()
            totals = self.executor.profile(self._on_gpu(inputs), dims, sync=torch.cuda.synchronize, outputs=outputs)
            raise_tripped(self._all_guards)
            return totals

    def graph_status(self) -> dict[str, str]:
        """Per captured set of input shapes: "graph" or why it runs eagerly."""
        return {" ".join(str(list(shape)) for shape, _, _ in key): ("graph" if e.graph is not None else f"eager: {e.capture_error}")
                for key, e in self._graphs.items()}

    def _on_gpu(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return [t.to(self.gpu, non_blocking=True) for t in inputs]

    def _first_run(self, key: tuple, inputs, dims, persistent: frozenset[int] = frozenset(),
                   positions: Optional[dict[int, int]] = None) -> list[torch.Tensor]:
        """Warm up on a side stream (its results are this call's answer), then capture. A plan writing into
        persistent inputs runs twice here: it must write the same values both times (a KV cache write does)."""
        static_inputs = [t if i in persistent and t.device == self.gpu else t.to(self.gpu, copy=True).contiguous()
                         for i, t in enumerate(inputs)]
        side = torch.cuda.Stream(self.gpu)
        side.wait_stream(torch.cuda.current_stream(self.gpu))
        with torch.cuda.stream(side):
            run_scope.begin_run()
            outputs = self.executor.run(static_inputs, dims)
            raise_tripped(self._all_guards)  # bad input: refused before anything is kept
            run_scope.begin_run()
            self.executor.run(static_inputs, dims)  # a second run: lazily built kernel state settles
        torch.cuda.current_stream(self.gpu).wait_stream(side)
        # The static buffers get new contents on every replay: an index check the warm-up made on one of
        # them must not let a capture skip it (the check stays for the values fixed per set of dims).
        forget_checked_indices(static_inputs)
        table, table_input, table_error = None, -1, None
        for index, rows in (positions or {}).items() if self.position_tables else ():
            if table is None and inputs[index].device.type == "cpu":  # (a replay checks the value on the CPU)
                try:
                    table, table_input = PositionTable.build(self.executor, index, rows, static_inputs, dims,
                                                             gather=table_row), index
                except Exception as e:  # a step that will not run per value: the graph runs the steps, as without
                    table_error = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
        entry = self._capture(static_inputs, dims, None if table is None else table.main)
        entry.table, entry.table_input, entry.table_error = table, table_input, table_error
        persistent_memory = {static_inputs[i].data_ptr() for i in persistent}
        entry.clone_outputs = [t.data_ptr() not in persistent_memory for t in entry.static_outputs]
        self._graphs[key] = entry
        while len(self._graphs) > self.max_graphs:
            self._graphs.popitem(last=False)
        return outputs

    def _capture(self, static_inputs: list[torch.Tensor], dims, main: Optional[list] = None) -> Captured:
        """main: the plan's main steps with some replaced (a position table's gather), else its own."""
        graph = torch.cuda.CUDAGraph()
        first: list[BaseException] = []  # the kernel's own error (the capture's end reports a later one)
        run_scope.begin_run()
        try:
            with torch.cuda.graph(graph, pool=self._pool):
                try:
                    static_outputs = self.executor.run(static_inputs, dims) if main is None else \
                        self.executor.run_main(static_inputs, dims, main)
                except Exception as e:
                    first.append(e)
                    raise
        except Exception as e:  # a kernel that synchronizes or reads back: these shapes run eagerly
            torch.cuda.synchronize(self.gpu)
            cause = first[0] if first else e
            text = " ".join(" ".join([str(getattr(cause, "problem", cause)), *getattr(cause, "__notes__", [])]).split())
            return Captured(None, capture_error=text[:300] or type(cause).__name__)
        return Captured(graph, static_inputs, list(static_outputs), self.executor.kept_values(dims))


def table_row(table: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    """Row `position` (a 0-d int64 GPU tensor, clamped into the table) of a position table [rows, bytes] (bytes a
    multiple of 16): one Triton kernel (torch's index_select, and the clamp before it, are two)."""
    from .kernels import _triton

    if _triton.triton_missing("") is not None:
        from ...runtime.position_table import torch_row_gather

        return torch_row_gather(table, position)
    import triton

    rows, width = table.shape
    out = torch.empty(width, dtype=torch.uint8, device=table.device)
    words = width // 4
    block = min(1024, triton.next_power_of_2(words))
    _triton.jit().table_row[(triton.cdiv(words, block),)](table.view(torch.int32), position, out.view(torch.int32),
                                                          rows, words, BLOCK=block)
    return out
