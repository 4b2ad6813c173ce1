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
- the kernel as usual for every other step, copying a fixed-shape result into its buffer for the bound steps that
  read it. Steps whose inputs or attrs depend on a varying dim (the cache append, attention over the cache, the
  rotary tables and mask for the position) are of this kind, and so are kernels that cannot bind.

Fixed-shape graph inputs are copied into buffers of their own; varying ones (the caches) are passed as given. The
outputs handed back are copies of the buffers (a caller may keep them while the next call refills the buffers).
A plan is used by one call at a time (a second thread runs the executor's own way meanwhile).
"""
from __future__ import annotations

import threading
from typing import Callable, Optional, Sequence

import torch

from .view_chain import shares_memory


class _Refill:
    """A step run as a kernel function (its own, or the one Kernel.bind_varying made): its fixed-shape results
    copied into the buffers that bound steps read, its varying ones (a longer cache each token) put in the call's
    slot list."""

    def __init__(self, fn, inputs: list, copies: list[tuple[int, int]], passes: list[tuple[int, int]], single: bool):
        self.fn, self.inputs, self.single = fn, inputs, single
        self.copies, self.passes = copies, passes  # (index among the step's outputs, slot)

    def __call__(self, env: list, dims: dict[str, int]) -> None:
        result = self.fn([None if i is None else env[i] for i in self.inputs], dims)
        results = (result,) if self.single else result
        for index, s in self.passes:
            env[s] = results[index]
        for index, s in self.copies:
            env[s].copy_(results[index])


def _runs_captured(entries: list, capture_calls) -> list:
    """Each run of two or more consecutive bound calls as one call, where the backend records them
    (Backend.capture_calls: on the CPU, one native call makes the run's kernels with no Python between them)."""
    merged: list = []
    run: list = []

    def close_run() -> None:
        replay = capture_calls(run) if len(run) > 1 else None
        merged.extend([(replay, None)] if replay is not None else [(call, None) for call in run])
        run.clear()

    for call, refill in entries:
        if call is not None:
            run.append(call)
            continue
        close_run()
        merged.append((None, refill))
    close_run()
    return merged


def _buffer_like(t: torch.Tensor) -> torch.Tensor:
    """An uninitialised tensor like t: its strides where t is dense (the views taken of it then match t's),
    contiguous where t overlaps itself (an expanded tensor)."""
    return torch.empty_like(t, memory_format=torch.preserve_format)


class BoundPlan:
    def __init__(self, executor, inputs: Sequence[torch.Tensor], dims: dict[str, int], varying: frozenset[str]):
        """Binds while running the call it is built for (its outputs: self.first_outputs)."""
        self.lock = threading.Lock()
        self.output_slots = executor.output_slots
        env: list = list(executor.base_env)
        varying_slots: set[int] = set()  # slots whose shape or content changes with the varying dims
        settled = {s for s, t in enumerate(env) if t is not None}  # the same in every call: constants, and what
        # steps made from them alone (computed here once)
        self.staged: list[tuple[int, int]] = []  # (index among the graph inputs, slot of its buffer)
        self.passed: list[tuple[int, int]] = []  # (index among the graph inputs, slot): given as they come
        for index, (s, t) in enumerate(zip(executor.input_slots, inputs)):
            if set(executor.input_dims[index]) & varying:
                env[s] = t
                varying_slots.add(s)
                self.passed.append((index, s))
            else:
                env[s] = t.clone(memory_format=torch.contiguous_format)
                self.staged.append((index, s))
        self.bound_steps = 0  # steps run as bound calls (tests and benchmarks read it)
        self.entries: list[tuple[Optional[Callable[[], object]], Optional[_Refill]]] = []
        with torch.inference_mode():
            for step in executor.prelude + executor.main:
                reads = [i for i in step.inputs if i is not None]
                args = [None if i is None else env[i] for i in step.inputs]
                if any(i in varying_slots for i in reads) or set(step.uses_dims) & varying:
                    fixed = [not set(d) & varying for d in step.output_dims]
                    changing = frozenset(j for j, i in enumerate(step.inputs) if i is not None and i in varying_slots)
                    fn = step.bind_varying(args, dims, changing) if step.bind_varying is not None else None
                    if fn is not None:  # its fixed-shape results are the same tensors every call: no copies
                        self._refill(step, fn(args, dims), env, varying_slots, fixed, fn=fn, copy=False)
                        self.bound_steps += 1
                    else:
                        self._refill(step, step.kernel(args, dims), env, varying_slots, fixed)
                    continue
                if all(i in settled for i in reads):
                    result = step.kernel(args, dims)  # the same every call
                    for s, r in zip(step.outputs, (result,) if len(step.outputs) == 1 else result):
                        env[s] = r
                        settled.add(s)
                    continue
                bound = step.bind(args, dims) if step.bind is not None else None
                if bound is not None:
                    call, outputs = bound
                    call()
                    for s, t in zip(step.outputs, outputs):
                        env[s] = t
                    self.entries.append((call, None))
                    self.bound_steps += 1
                    continue
                result = step.kernel(args, dims)
                if step.view_chain and shares_memory(result, args[0]):
                    env[step.outputs[0]] = result  # a view of a buffer refilled in place: made once
                    continue
                self._refill(step, result, env, varying_slots, [True] * len(step.outputs))
        self.bound_calls = [call for call, _ in self.entries if call is not None]  # (the captured lists' tensors)
        self.entries = _runs_captured(self.entries, executor.capture_calls)
        self.varying_outputs = [s in varying_slots for s in self.output_slots]
        self.first_outputs = self._outputs(env)
        for s in varying_slots:  # every call sets these before reading them; the plan must not keep old caches alive
            env[s] = None
        self.env = env

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
        self.entries.append((None, _Refill(fn or step.kernel, step.inputs, copies, passes, len(step.outputs) == 1)))

    def _outputs(self, env: list) -> list:
        return [env[s] if varying else env[s].clone() for s, varying in zip(self.output_slots, self.varying_outputs)]

    def run(self, inputs: Sequence[torch.Tensor], dims: dict[str, int]) -> list[torch.Tensor]:
        env = list(self.env)  # varying values live in this call's list only
        for index, s in self.staged:
            env[s].copy_(inputs[index])
        for index, s in self.passed:
            env[s] = inputs[index]
        with torch.inference_mode():
            for call, refill in self.entries:
                if call is not None:
                    call()
                else:
                    refill(env, dims)
        return self._outputs(env)
