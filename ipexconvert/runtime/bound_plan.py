"""A plan bound to buffers made once: the CPU's answer to a decode step's per-kernel Python.

A decoder's decode step runs ~240 kernels whose shapes never change from token to token, and each one reached
through the executor costs microseconds of Python and torch (an output tensor made, shapes checked, the slot list
updated) in a cache the weight stream has just evicted: 7-8 ms of a 30-37 ms int8 step on a 2-core Xeon, while
the same native calls replayed back to back take 1.5 ms beyond the weight-only GEMVs
(benchmarks/results/session38-bound-decode-step.md). A bound plan does for the CPU what a captured CUDA graph does
for a GPU: the first call with a set of fixed dims runs every step once, giving each fixed-shape value a buffer of
its own; later calls whose dims differ only in the `varying` ones (the cache length) run

- a **bound call** for a step whose kernel can bind (Kernel.bind: its native call with every argument made
  once, writing into its own output buffer; no Python of the kernel's runs). Consecutive bound calls are recorded
  once where the backend can (Backend.capture_calls): on the CPU one native call then makes them all, with no
  Python, argument conversion or GIL hand-off between the kernels;
- nothing for a view of a bound buffer (made once: the buffer is refilled in place);
- a **recorded step** for a step reading the varying values whose kernel can record one (the rotary cache append
  and attention over the cache on the CPU: RecordedStep): one native call that reads the cache length from the
  plan's length cell when it runs, writing into (reading from) the caches' buffers, whose spare positions bound
  the lengths the plan takes; its varying outputs (the presents) are views made before each call runs, and a
  varying value it reads from a refill (the attention mask) is copied into a buffer of the caches' capacity.
  Recorded steps join the bound calls' recorded runs, so a decode step's layers are one native call each;
- the kernel as usual for every other step, copying a fixed-shape result into its buffer for the bound steps that
  read it. The rotary tables and mask for the position (steps whose attrs depend on a varying dim) are of this
  kind, and so are kernels that cannot bind.

A call the recorded steps cannot take (a cache that is not the one the plan's last call returned, or longer than
its buffers hold) makes run() return None: the executor then binds a new plan for it.

Fixed-shape graph inputs are copied into buffers of their own; varying ones (the caches) are passed as given. The
outputs handed back are copies of the buffers (a caller may keep them while the next call refills the buffers).
A plan is used by one call at a time (a second thread runs the executor's own way meanwhile).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import torch

from .view_chain import shares_memory


_TABLE_ROWS = 1024  # lengths a plan's position tables hold at most (a longer cache binds a new plan)
_TABLE_BLOCK = 32  # lengths computed ahead at a time


@dataclass
class RecordedStep:
    """A varying step as one native call that reads the cache length from the plan's length cell when it runs
    (record() of the function Kernel.bind_varying returns)."""

    call: Callable[[], object]  # the native call (a capture records it; without one the plan makes it)
    max_length: int  # the longest cache (the cell's value) the call can take
    # output index -> (the buffer it writes, the axis it grows along): the varying output is the view of its first
    # length + `added` positions, made before each run; later steps' record() read the buffer itself
    buffers: dict[int, tuple[torch.Tensor, int]] = field(default_factory=dict)
    added: int = 0  # positions a call adds along that axis
    # input index -> output index: the next call's input must be this very output of this call (a cache handed back)
    feeds: dict[int, int] = field(default_factory=dict)


class _Refill:
    """A step run as a kernel function (its own, or the one Kernel.bind_varying made): its fixed-shape results
    copied into the buffers that bound steps read, its varying ones (a longer cache each token) put in the call's
    slot list."""

    def __init__(self, fn, inputs: list, copies: list[tuple[int, int]], passes: list[tuple[int, int]], single: bool,
                 length_only: bool = False):
        self.fn, self.inputs, self.single = fn, inputs, single
        self.length_only = length_only  # a function of the dims alone (Step.dims_only): the position's steps
        self.copies, self.passes = copies, passes  # (index among the step's outputs, slot)
        # (index among the step's outputs, buffer, axis, its size for a call's dims): varying results that
        # recorded steps read from a buffer of the caches' capacity
        self.stages: list[tuple[int, torch.Tensor, int, Callable[[dict[str, int]], int]]] = []

    def __call__(self, env: list, dims: dict[str, int]) -> None:
        result = self.fn([None if i is None else env[i] for i in self.inputs], dims)
        results = (result,) if self.single else result
        for index, s in self.passes:
            env[s] = results[index]
        for index, s in self.copies:
            env[s].copy_(results[index])
        for index, buffer, axis, size_of in self.stages:
            value = results[index]
            if value.shape[axis] != size_of(dims):  # (what the recorded reader will read)
                raise RuntimeError(f"a bound plan's staged value has {value.shape[axis]} positions where its reader "
                                   f"reads {size_of(dims)}")
            buffer.narrow(axis, 0, value.shape[axis]).copy_(value)


def _runs_captured(entries: list, capture_calls) -> list:
    """Each run of two or more consecutive bound calls as one call, where the backend records them
    (Backend.capture_calls: on the CPU, one native call makes the run's kernels with no Python between them)."""
    merged: list = []
    run: list = []

    def close_run() -> None:
        merged.extend(_captured(run, capture_calls))
        run.clear()

    for call, refill in entries:
        if call is not None:
            run.append(call)
            continue
        close_run()
        merged.append((None, refill))
    close_run()
    return merged


def _captured(run: list, capture_calls) -> list:
    """Entries making the bound calls of `run` in order: the whole run as one recorded call; where the backend
    refuses that, each stretch of it between the calls it cannot record alone (a call of torch's) as one."""
    if len(run) < 2:
        return [(call, None) for call in run]
    whole = capture_calls(run)
    if whole is not None:
        return [(whole, None)]
    # (a call of torch's runs when offered: harmless, each buffer is written again before a later call reads it)
    recordable = [capture_calls([call]) is not None for call in run]
    if all(recordable) or not any(recordable):
        return [(call, None) for call in run]
    entries: list = []
    stretch: list = []
    for call, alone in zip(run, recordable):
        if alone:
            stretch.append(call)
            continue
        entries += _captured(stretch, capture_calls) + [(call, None)]
        stretch = []
    return entries + _captured(stretch, capture_calls)


def _buffer_like(t: torch.Tensor) -> torch.Tensor:
    """An uninitialised tensor like t: its strides where t is dense (the views taken of it then match t's),
    contiguous where t overlaps itself (an expanded tensor). From the pool of a fixed plan being bound."""
    if _building.pool is None:
        return torch.empty_like(t, memory_format=torch.preserve_format)
    return buffer(t.shape, t.dtype, _dense_strides(t))


def _dense_strides(t: torch.Tensor) -> Optional[tuple[int, ...]]:
    """t's strides where they lay its elements out densely (a permutation of a contiguous layout), else None."""
    expected = 1
    for d in sorted(range(t.dim()), key=lambda d: (t.stride(d), t.shape[d])):
        if t.shape[d] > 1 and t.stride(d) != expected:
            return None
        expected *= t.shape[d]
    return tuple(t.stride())


class _Building(threading.local):
    pool: Optional["_BufferPool"] = None


_building = _Building()


def buffer(size: Sequence[int], dtype: torch.dtype, stride: Optional[Sequence[int]] = None) -> torch.Tensor:
    """An uninitialised tensor for a bound call's output (Kernel.bind): from the pool of the fixed plan being bound
    on this thread (memory that no later step reads again), else new. stride: dense strides (default contiguous)."""
    pool = _building.pool
    if pool is None:
        return torch.empty(size, dtype=dtype) if stride is None else torch.empty_strided(size, stride, dtype=dtype)
    return pool.take(tuple(size), dtype, None if stride is None else tuple(stride))


class _taking_from:
    """Kernel binds on this thread take their outputs from `pool` (None: new tensors) while in the block."""

    def __init__(self, pool: Optional["_BufferPool"]):
        self.pool = pool

    def __enter__(self):
        self.saved, _building.pool = _building.pool, self.pool

    def __exit__(self, *exc):
        _building.pool = self.saved


_ALIGN = 64  # bytes: a buffer starts on a cache line


@dataclass(eq=False)  # (compared by identity)
class _Block:
    memory: torch.Tensor  # uint8
    free: bool = False
    last_read: float = -1  # the last step reading a value in it (inf: an output, or read by no value we know of)
    freed_at: int = -1  # the step after which it was last handed back


class _BufferPool:
    """Memory for a fixed plan's values, each block handed to a later request once every step reading the values
    in it has run (the executor's liveness: a value dies after its last reader; a view or an in-place result lives
    in its base's block and keeps it): the plan's buffers then take about what the executor's freed memory does,
    and a step writes into memory a step before it just read, still in cache. A block no value of the plan names
    (a bind's own scratch) is never handed on."""

    def __init__(self, steps: list, output_slots: list[int]):
        self.last_read: dict[int, float] = {}
        for index, step in enumerate(steps):
            for s in step.inputs:
                if s is not None:
                    self.last_read[s] = index
        for s in output_slots:
            self.last_read[s] = float("inf")
        self.blocks: list[_Block] = []
        self.by_storage: dict[int, _Block] = {}
        self.taken: list[_Block] = []  # blocks taken by the step being bound
        self.bytes = 0

    def take(self, size: tuple, dtype: torch.dtype, stride: Optional[tuple]) -> torch.Tensor:
        if stride is None:
            stride, step = [], 1
            for n in reversed(size):
                stride.insert(0, step)
                step *= max(n, 1)
            stride = tuple(stride)
        itemsize = torch.empty((), dtype=dtype).element_size()
        span = 1 + sum((n - 1) * st for n, st in zip(size, stride)) if all(n > 0 for n in size) else 0
        nbytes = max(-(-span * itemsize // _ALIGN) * _ALIGN, _ALIGN)
        fits = [b for b in self.blocks if b.free and b.memory.numel() >= nbytes]
        # the block freed last among those not more than twice the size (its values were read last: in cache)
        close = [b for b in fits if b.memory.numel() <= 2 * nbytes]
        block = max(close, key=lambda b: b.freed_at) if close else min(fits, key=lambda b: b.memory.numel()) if fits else None
        if block is None:
            block = _Block(torch.empty(nbytes, dtype=torch.uint8))
            self.blocks.append(block)
            self.by_storage[block.memory.untyped_storage().data_ptr()] = block
            self.bytes += nbytes
        block.free, block.last_read = False, float("inf")  # (until a value of the step names it: settle)
        self.taken.append(block)
        return block.memory[:nbytes].view(dtype).as_strided(size, stride)

    def settle(self, index: int, outputs: list[int], env: list) -> None:
        """After step `index` is bound: its outputs' blocks live until their last readers; blocks whose readers
        have all run are free for the next steps."""
        named: set[int] = set()
        taken = {id(b) for b in self.taken}
        for s in outputs:
            t = env[s]
            block = self.by_storage.get(t.untyped_storage().data_ptr()) if isinstance(t, torch.Tensor) else None
            if block is None:
                continue
            if id(block) in taken and id(block) not in named:  # (taken now: its liveness starts with this value)
                named.add(id(block))
                block.last_read = -1
            block.last_read = max(block.last_read, self.last_read.get(s, index))
        self.taken = []  # (a block taken now that no output names stays taken: a scratch its call keeps)
        for block in self.blocks:
            if not block.free and block.last_read <= index:
                block.free, block.freed_at = True, index



class PlanTooLarge(Exception):
    """A plan's buffers passed the bytes it was given (BoundPlan's max_bytes); nothing of it is kept."""


class BoundPlan:
    def __init__(self, executor, inputs: Sequence[torch.Tensor], dims: dict[str, int], varying: frozenset[str],
                 max_bytes: Optional[int] = None):
        """Binds while running the call it is built for (its outputs: self.first_outputs). max_bytes: raise
        PlanTooLarge as soon as the buffers it made pass that (a fixed plan's bound, checked as it goes so that a
        plan too large for it never holds more than that)."""
        self.lock = threading.Lock()
        self._max_bytes = max_bytes
        self.output_slots = executor.output_slots
        env: list = list(executor.base_env)
        varying_slots: set[int] = set()  # slots whose shape or content changes with the varying dims
        settled = {s for s, t in enumerate(env) if t is not None}  # the same in every call: constants, and what
        # steps made from them alone (computed here once)
        self.staged: list[tuple[int, int]] = []  # (index among the graph inputs, slot of its buffer)
        self.passed: list[tuple[int, int]] = []  # (index among the graph inputs, slot): given as they come
        for index, (s, t) in enumerate(zip(executor.input_slots, inputs)):
            if set(executor.input_dims[index]) & varying or not varying:  # (a fixed-shape plan: its input readers
                # run as kernels each call, e.g. a CNN's image check and conversion, so the input is not copied)
                env[s] = t
                varying_slots.add(s)
                self.passed.append((index, s))
            else:
                env[s] = t.clone(memory_format=torch.contiguous_format)
                self.staged.append((index, s))
        self.bound_steps = 0  # steps run as bound calls or recorded steps (tests and benchmarks read it)
        self.recorded_steps = 0  # of which recorded steps
        self.refills = 0  # steps run as their kernels each call, their results copied into the plan's buffers
        self.entries: list[tuple[Optional[Callable[[], object]], Optional[_Refill]]] = []
        # Recorded steps (one varying dim: the cache length, held by the length cell they read when they run)
        self.length_dim = next(iter(varying)) if len(varying) == 1 and set(varying) <= set(dims) else None
        self.length_at = torch.tensor([dims[self.length_dim] if self.length_dim else 0], dtype=torch.int64)
        self._length = self.length_at.numpy()  # (the cell written without torch: a numpy view of it)
        self.max_length = 1 << 62
        self._passed_index = {s: index for index, s in self.passed}
        self._refilled: dict[int, tuple[_Refill, int]] = {}  # varying slot -> the refill making it, output index
        self._slot_buffers: dict[int, tuple[torch.Tensor, int]] = {}  # varying slot -> (buffer it views, axis)
        self._staged: dict[int, tuple[torch.Tensor, int, Callable[[int], int]]] = {}
        self._views: list[tuple[int, torch.Tensor, int, int]] = []  # (slot, buffer, axis, added): views made per call
        self._feeds: list[tuple[int, int]] = []  # (graph input index, the output slot it must be next call)
        steps = executor.prelude + executor.main
        # A fixed plan (no varying dims) takes its buffers from a pool that hands a buffer on once every step reading
        # it has run (_BufferPool), so its values share memory as the executor's freed ones do
        self._pool = _BufferPool(steps, executor.output_slots) if not varying else None
        with torch.inference_mode(), _taking_from(self._pool):
            for index, step in enumerate(steps):
                self._bind_step(step, env, dims, varying, varying_slots, settled)
                if self._pool is not None:
                    self._pool.settle(index, step.outputs, env)
                    self._check_bytes()
        self._rows_end, self._fill = 1 << 62, None  # (the position's tables: none unless _tabulate makes them)
        if self.recorded_steps:
            self._tabulate(executor.row_copy, env, dims, varying_slots)
        self.varying_outputs = [s in varying_slots for s in self.output_slots]
        # (taken before capturing: a call of torch's among the bound calls runs again when offered to the capture,
        # and its inputs' memory may hold later values by then, a fixed plan's pool having handed it on)
        self.first_outputs = self._outputs(env)
        self.bound_calls = [call for call, _ in self.entries if call is not None]  # (the captured lists' tensors)
        self.entries = _runs_captured(self.entries, executor.capture_calls)
        self._expected = [(index, env[s]) for index, s in self._feeds]  # the inputs the next call must pass
        for s in varying_slots:  # every call sets these before reading them; the plan must not keep old caches alive
            env[s] = None
        self.env = env

    def _bind_step(self, step, env: list, dims: dict[str, int], varying: frozenset[str], varying_slots: set[int],
                   settled: set[int]) -> None:
        """One step of the plan: a bound call, a recorded step, a view made once, a value made once, or a refill."""
        reads = [i for i in step.inputs if i is not None]
        args = [None if i is None else env[i] for i in step.inputs]
        if any(i in varying_slots for i in reads) or set(step.uses_dims) & varying:
            fixed = [not set(d) & varying for d in step.output_dims]
            changing = frozenset(j for j, i in enumerate(step.inputs) if i is not None and i in varying_slots)
            # (a fixed plan's inputs are passed only so that they are not copied: their readers run as kernels)
            fn = step.bind_varying(args, dims, changing) if step.bind_varying is not None and varying else None
            if fn is not None:  # its fixed-shape results are the same tensors every call: no copies
                result = fn(args, dims)
                if not self._record(step, fn, args, result, env, varying_slots, fixed, dims):
                    self._refill(step, result, env, varying_slots, fixed, fn=fn, copy=False)
                self.bound_steps += 1
            else:
                self._refill(step, step.kernel(args, dims), env, varying_slots, fixed)
            return
        if all(i in settled for i in reads):
            result = step.kernel(args, dims)  # the same every call
            for s, r in zip(step.outputs, (result,) if len(step.outputs) == 1 else result):
                env[s] = r
                settled.add(s)
            return
        bound = step.bind(args, dims) if step.bind is not None else None
        if bound is not None:
            call, outputs = bound
            call()
            for s, t in zip(step.outputs, outputs):
                env[s] = t
            self.entries.append((call, None))
            self.bound_steps += 1
            return
        result = step.kernel(args, dims)
        if step.view_chain and shares_memory(result, args[0]):
            env[step.outputs[0]] = result  # a view of a buffer refilled in place: made once
            return
        self._refill(step, result, env, varying_slots, [True] * len(step.outputs))

    def _record(self, step, fn, args: list, result, env: list, varying_slots: set[int], fixed: list[bool],
                dims: dict[str, int]) -> bool:
        """Keep the step as the recorded step its function makes, if it makes one (RecordedStep); False if not."""
        record = getattr(fn, "record", None)
        known = set(self._passed_index) | set(self._slot_buffers) | set(self._refilled)
        if record is None or self.length_dim is None or not {s for s in step.inputs if s in varying_slots} <= known:
            return False  # (a varying input neither given, nor a recorded step's buffer, nor a refill's to stage)
        results = (result,) if len(step.outputs) == 1 else result

        def buffer_for(j: int, axis: int, capacity: Optional[int] = None,
                       size_of: Optional[Callable[[int], int]] = None) -> Optional[torch.Tensor]:
            """The buffer a recorded read of input j finds its values in: the one a recorded step's output views,
            or one of `capacity` along `axis` that a refill's result is copied into each call."""
            s = step.inputs[j]
            if s in self._slot_buffers:
                buffer, along = self._slot_buffers[s]
                return buffer if along == axis else None
            if s not in self._refilled or capacity is None or size_of is None:
                return None
            length = dims[self.length_dim]
            if s in self._staged:
                buffer, along, first = self._staged[s]
                same = along == axis and buffer.shape[axis] == capacity and all(
                    first(n) == size_of(n) for n in (length, length + 1))
                return buffer if same else None
            value = env[s]
            if value.shape[axis] != size_of(length):
                return None
            shape = list(value.shape)
            shape[axis] = capacity
            buffer = torch.zeros(shape, dtype=value.dtype)
            buffer.narrow(axis, 0, value.shape[axis]).copy_(value)
            refill, index = self._refilled[s]
            refill.stages.append((index, buffer, axis, lambda call_dims: size_of(call_dims[self.length_dim])))
            self._staged[s] = (buffer, axis, size_of)
            return buffer

        recorded = record(args, result, self.length_at, buffer_for)
        if recorded is None:
            return False
        made = set(recorded.buffers)
        graph_inputs = [self._passed_index.get(step.inputs[j]) for j in recorded.feeds]
        if any(index not in made for index, is_fixed in enumerate(fixed) if not is_fixed) or None in graph_inputs:
            return False  # (a varying output it does not make, or a fed input that is not a graph input)
        for index, (s, r) in enumerate(zip(step.outputs, results)):
            env[s] = r
            if index in made:
                varying_slots.add(s)
        for index, (buffer, axis) in recorded.buffers.items():
            self._slot_buffers[step.outputs[index]] = buffer, axis
            self._views.append((step.outputs[index], buffer, axis, recorded.added))
        self._feeds += [(g, step.outputs[out]) for g, out in zip(graph_inputs, recorded.feeds.values())]
        self.max_length = min(self.max_length, recorded.max_length)
        self.entries.append((recorded.call, None))
        self.recorded_steps += 1
        return True

    def _tabulate(self, row_copy, env: list, dims: dict[str, int], varying_slots: set[int]) -> None:
        """The refills that depend on the dims alone (a decode step's position: its rotary rows and mask) computed
        ahead, a block of lengths at a time, into tables with a row per length; each call then copies its rows into
        the buffers that bound and recorded steps read, by recorded calls that read the length cell (row_copy:
        Backend.row_copy), so no Python runs for the position. Not where one of their varying results is read by
        another refill or is an output (it would have to be made each call)."""
        length_refills = [r for _, r in self.entries if r is not None and r.length_only]
        others = [r for _, r in self.entries if r is not None and not r.length_only]
        read = {i for r in others for i in r.inputs if i is not None} | set(self.output_slots)
        if (not length_refills or any(s in read for r in length_refills for _, s in r.passes)
                or any(s in self.output_slots for r in length_refills for _, s in r.copies)):
            return
        first = int(self.length_at)
        rows = min(self.max_length - first + 1, _TABLE_ROWS)
        # the buffers a call's rows land in (fixed-shape results, staged values), and their tables
        targets = [env[s] for r in length_refills for _, s in r.copies] + [b for r in length_refills for _, b, _, _ in r.stages]
        tables = [torch.empty((rows, *t.shape), dtype=t.dtype) for t in targets]
        copies = [row_copy(table, target, self.length_at, first) for table, target in zip(tables, targets)]
        if not copies or any(c is None for c in copies):
            return
        # the refills' varying results (their fixed ones land in the targets); no cache this call was given
        scratch = [None if s in varying_slots else t for s, t in enumerate(env)]

        def fill(end: int) -> None:
            """The rows of lengths up to `end` (exclusive): the refills run as a call of each length runs them."""
            end = min(end, first + rows)
            for length in range(self._rows_end, end):
                length_dims = {**dims, self.length_dim: length}
                for refill in length_refills:
                    refill(scratch, length_dims)
                for table, target in zip(tables, targets):
                    table[length - first].copy_(target)
            self._rows_end = max(self._rows_end, end)

        self._rows_end, self._fill = first, fill
        with torch.inference_mode():
            fill(first + _TABLE_BLOCK)
        self.max_length = min(self.max_length, first + rows - 1)
        at = next(i for i, (_, r) in enumerate(self.entries) if r is not None and r.length_only)
        kept = [e for e in self.entries if e[1] is None or not e[1].length_only]
        self.entries = kept[:at] + [(copy, None) for copy in copies] + kept[at:]

    def _refill(self, step, result, env: list, varying_slots: set[int], fixed: list[bool], fn=None,
                copy: bool = True) -> None:
        """Keep the step's result (fixed-shape tensors in buffers of their own, unless `fn` returns the same ones
        every call) and add it to the entries."""
        results = (result,) if len(step.outputs) == 1 else result
        copies, passes = [], []
        for index, (s, r, is_fixed) in enumerate(zip(step.outputs, results, fixed)):
            if is_fixed and isinstance(r, torch.Tensor):
                env[s] = _buffer_like(r) if copy else r
                if copy:
                    env[s].copy_(r)
                    copies.append((index, s))
            else:
                env[s] = r
                varying_slots.add(s)
                passes.append((index, s))
        self.refills += 1
        refill = _Refill(fn or step.kernel, step.inputs, copies, passes, len(step.outputs) == 1, step.dims_only)
        self._refilled.update({s: (refill, index) for index, s in passes})
        self.entries.append((None, refill))

    def _check_bytes(self) -> None:
        if self._max_bytes is not None and self.buffer_bytes() > self._max_bytes:
            raise PlanTooLarge(f"a bound plan's buffers pass {self._max_bytes} bytes")

    def worth_keeping(self, max_refills: float, max_bytes: int) -> bool:
        """Whether at most `max_refills` steps run as kernels copying their results into the plan's buffers and
        those buffers hold at most `max_bytes` (a fixed plan's test: one of mostly refills would copy what most steps
        make, and it keeps every value's buffer where the executor frees them as it goes)."""
        return self.refills <= max_refills and self.buffer_bytes() <= max_bytes

    def buffer_bytes(self) -> int:
        """The bytes of a fixed plan's buffers (its pool's blocks; a decode plan's buffers are not pooled: 0)."""
        return self._pool.bytes if self._pool is not None else 0

    def _outputs(self, env: list) -> list:
        return [env[s] if varying else env[s].clone() for s, varying in zip(self.output_slots, self.varying_outputs)]

    def run(self, inputs: Sequence[torch.Tensor], dims: dict[str, int]) -> Optional[list[torch.Tensor]]:
        """This call's outputs; None where its recorded steps cannot take it (caches other than the ones the last
        call returned, or longer than their buffers hold)."""
        if self.recorded_steps:
            length = dims[self.length_dim]
            if length > self.max_length or any(inputs[index] is not t for index, t in self._expected):
                return None
            if length >= self._rows_end:  # (the position's rows of the next lengths)
                with torch.inference_mode():
                    self._fill(max(length + 1, self._rows_end + _TABLE_BLOCK))
        env = list(self.env)  # varying values live in this call's list only
        for index, s in self.staged:
            env[s].copy_(inputs[index])
        for index, s in self.passed:
            env[s] = inputs[index]
        with torch.inference_mode():
            if self.recorded_steps:
                self._length[0] = length
                for s, buffer, axis, added in self._views:  # (their contents are written by the recorded calls below)
                    env[s] = buffer.narrow(axis, 0, length + added)
            for call, refill in self.entries:
                if call is not None:
                    call()
                else:
                    refill(env, dims)
        if self.recorded_steps:
            self._expected = [(index, env[s]) for index, s in self._feeds]
        return self._outputs(env)
