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
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import torch

from ...ir.ops.aten_allowlist import forget_checked_indices
from ...runtime.position_table import PositionTable
from . import run_scope
from .guards import raise_tripped

if TYPE_CHECKING:
    from ...runtime.static_cache import GreedyFeed

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
    history: Optional[torch.Tensor] = None  # a greedy chain's ids [positions, batch] (GreedyFeed; None: no feed)

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
        self._chains: "OrderedDict[tuple, Captured]" = OrderedDict()  # the same steps + greedy_feed (greedy_chain)
        self._copier: Optional[torch.cuda.Stream] = None  # a greedy chain's ids go to the CPU on this stream
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
        key = _key(inputs, persistent)
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

    def greedy_chain(self, inputs: Sequence[torch.Tensor], dims: dict[str, int], persistent: frozenset[int],
                     positions: dict[int, int], feed: "GreedyFeed") -> Optional["GreedyChain"]:
        """Greedy steps replayed back to back: the plan captured with greedy_feed after it, which writes each step's
        arg-max into the ids input and a history row and moves the position input on, so that a step after the first
        is one replay (no copy in, no arg-max outside the graph) and only its ids come out, copied to the CPU on a
        side stream. `inputs` are the first step's (ids [batch, 1] on the GPU, the position on the CPU, the
        persistent caches); positions as run's, naming feed's position input (its values bound the history). The
        first step is queued (captured on first use: the warm-up runs it). None where these shapes run eagerly, or
        the position is no 0-d CPU value with rows: then run() step by step."""
        at = feed.position_at
        position = inputs[at]
        rows = (positions or {}).get(at, 0)
        if position.device.type != "cpu" or position.dim() != 0 or not 0 <= int(position) < rows:
            return None
        key = _key(inputs, persistent)
        with self._lock, torch.inference_mode():
            self._checked_on_host(inputs)
            entry = self._chains.get(key)
            if entry is None:
                self._first_run(key, inputs, dims, persistent, positions, feed=(feed, rows))
                entry = self._chains[key]  # (the warm-up ran the first step and its feed)
            elif entry.graph is not None:
                self._chains.move_to_end(key)
                entry.load_inputs(inputs)
                entry.graph.replay()
            if entry.graph is None:
                return None
            if self._copier is None:
                self._copier = torch.cuda.Stream(self.gpu)
            return GreedyChain(self, entry, int(position), rows)

    def forget_buffers(self, addresses: set[int]) -> int:
        """Drop the graphs captured on persistent buffers at these addresses (a static cache about to be remade for
        another batch or capacity): each holds its buffers, so kept they would hold GPU memory for nothing, and a
        new buffer may later take an old address. Returns how many were dropped."""
        with self._lock:
            stale = 0
            for graphs in (self._graphs, self._chains):
                keys = [key for key in graphs if any(ptr in addresses for _, _, ptr in key if ptr is not None)]
                for key in keys:
                    del graphs[key]
                stale += len(keys)
            if stale and not self._graphs and not self._chains:
                # torch frees a pool with its last graph; a later capture into the old handle fails an allocator
                # assert (torch 2.11: "use_count > 0"), and those shapes would run eagerly: start a new pool
                self._pool = torch.cuda.graph_pool_handle()
            return stale

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
        def status(e: Captured) -> str:
            return "graph" if e.graph is not None else f"eager: {e.capture_error}"

        found = {" ".join(str(list(shape)) for shape, _, _ in key): status(e) for key, e in self._graphs.items()}
        found.update({" ".join(str(list(shape)) for shape, _, _ in key) + " (greedy chain)": status(e)
                      for key, e in self._chains.items()})
        return found

    def _on_gpu(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return [t.to(self.gpu, non_blocking=True) for t in inputs]

    def _first_run(self, key: tuple, inputs, dims, persistent: frozenset[int] = frozenset(),
                   positions: Optional[dict[int, int]] = None,
                   feed: Optional[tuple["GreedyFeed", int]] = None) -> list[torch.Tensor]:
        """Warm up on a side stream (its results are this call's answer), then capture. A plan writing into
        persistent inputs runs twice here: it must write the same values both times (a KV cache write does).
        feed: (a greedy chain's feed, its history rows): the warm-up's feed runs once after it (the chain's first
        step), the capture ends with it, and the entry is kept among the chains."""
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
        history = None
        if feed is not None:
            spec, rows = feed
            history = torch.zeros((rows, static_inputs[spec.ids_at].shape[0]), dtype=torch.int64, device=self.gpu)
            greedy_feed(outputs[spec.logits_at], static_inputs[spec.ids_at], history, static_inputs[spec.position_at])
        entry = self._capture(static_inputs, dims, None if table is None else table.main,
                              None if feed is None else (feed[0], history))
        entry.table, entry.table_input, entry.table_error, entry.history = table, table_input, table_error, history
        persistent_memory = {static_inputs[i].data_ptr() for i in persistent}
        entry.clone_outputs = [t.data_ptr() not in persistent_memory for t in entry.static_outputs]
        graphs = self._graphs if feed is None else self._chains
        graphs[key] = entry
        while len(graphs) > self.max_graphs:
            graphs.popitem(last=False)
        return outputs

    def _capture(self, static_inputs: list[torch.Tensor], dims, main: Optional[list] = None,
                 feed: Optional[tuple["GreedyFeed", torch.Tensor]] = None) -> Captured:
        """main: the plan's main steps with some replaced (a position table's gather), else its own. feed: (a greedy
        chain's feed, its history): greedy_feed after the steps."""
        graph = torch.cuda.CUDAGraph()
        first: list[BaseException] = []  # the kernel's own error (the capture's end reports a later one)
        run_scope.begin_run()
        try:
            with torch.cuda.graph(graph, pool=self._pool):
                try:
                    static_outputs = self.executor.run(static_inputs, dims) if main is None else \
                        self.executor.run_main(static_inputs, dims, main)
                    if feed is not None:
                        spec, history = feed
                        greedy_feed(static_outputs[spec.logits_at], static_inputs[spec.ids_at], history,
                                    static_inputs[spec.position_at])
                except Exception as e:
                    first.append(e)
                    raise
        except Exception as e:  # a kernel that synchronizes or reads back: these shapes run eagerly
            torch.cuda.synchronize(self.gpu)
            cause = first[0] if first else e
            text = " ".join(" ".join([str(getattr(cause, "problem", cause)), *getattr(cause, "__notes__", [])]).split())
            return Captured(None, capture_error=text[:300] or type(cause).__name__)
        return Captured(graph, static_inputs, list(static_outputs), self.executor.kept_values(dims))


def _key(inputs: Sequence[torch.Tensor], persistent: frozenset[int]) -> tuple:
    """A captured graph's key: each input's shape and dtype, and a persistent input's address (its buffer is read
    where it is)."""
    return tuple((t.shape, t.dtype, t.data_ptr() if i in persistent else None) for i, t in enumerate(inputs))


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


def greedy_feed(logits: torch.Tensor, ids: torch.Tensor, history: torch.Tensor, position: torch.Tensor) -> None:
    """ids[:, 0] = history[position] = logits[:, -1].argmax(-1) (the lowest id on ties), then position += 1: one
    Triton kernel (torch's operators take five: the arg-max, two copies, the index and the add), those where Triton
    is missing."""
    from .kernels import _triton

    last = logits[:, -1]
    if (_triton.triton_missing("") is not None or not (last.is_cuda or _triton.interpreted()) or last.stride(-1) != 1
            or not ids.is_contiguous()):
        chosen = last.argmax(-1)
        ids.copy_(chosen.view(ids.shape))
        history.index_copy_(0, position.clamp(0, history.shape[0] - 1).view(1), chosen.view(1, -1))
        position.add_(1)
        return
    _triton.jit().greedy_feed[(1,)](last, last.stride(0), last.shape[-1], ids, history, position, history.shape[0],
                                    BATCH=last.shape[0], BLOCK=4096, num_warps=8)


class GreedyChain:
    """Greedy steps of one captured graph with greedy_feed at its end (GraphRunner.greedy_chain), its first step
    already queued: step() queues the next replay (after the first) and the copy of that step's ids to the CPU on the
    runner's side stream, so the GPU runs the steps back to back while the CPU reads each step's ids."""

    def __init__(self, runner: GraphRunner, entry: Captured, position: int, rows: int):
        self.runner, self.entry, self.position, self.rows = runner, entry, position, rows
        self.queued = True  # the first step (run by greedy_chain)

    def step(self) -> tuple[torch.Tensor, Callable[[], None]]:
        """(the next step's ids [batch] in pinned CPU memory, a wait for them), that step queued."""
        if self.position >= self.rows:
            raise ValueError(f"position {self.position} is past the {self.rows} the chain was made for")
        with self.runner._lock:
            if not self.queued:
                self.entry.graph.replay()
            self.queued = False
            ready = torch.cuda.Event()
            ready.record()
            copier = self.runner._copier
            copier.wait_event(ready)
            history = self.entry.history
            host = torch.empty(history.shape[1], dtype=history.dtype, pin_memory=True)
            with torch.cuda.stream(copier):
                host.copy_(history[self.position], non_blocking=True)
                done = torch.cuda.Event()
                done.record(copier)
        self.position += 1
        return host, done.synchronize
