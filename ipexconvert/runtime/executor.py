"""Executor: a plan built once at load, then a tight loop of kernel calls.

Values live in a flat slot list; each step frees the slots whose last use it is,
so intermediates are released as soon as possible (liveness-based memory reuse).

Nodes computed from constants and dynamic dims alone (BERT's position ids and mask shapes,
Llama's rotary tables) run once per set of dims: their results are kept for the next call with
the same dims (at most _DIMS_CACHE_SIZE sets and _DIMS_CACHE_BYTES in all). Every op an artifact may hold is pure (ir/ops/aten.py
refuses random and mutating ATen ops), so the same dims give the same values; a kept value is
never a model output and never overwritten by an in-place kernel, an output viewing one is returned
as a copy, and the prelude (which runs before every other step) frees no value those steps read.
"""
from __future__ import annotations

import dataclasses
import json
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

from ..backends import get_backend
from ..backends.base import Backend
from .. import environment
from ..errors import ArtifactError
from ..ir import Program
from ..ir.dims import compile_int
from ..ir.opdef import get_op
from .bound_plan import BoundPlan, PlanTooLarge
from .kernels import CHOOSING_CALLS, Kernel, NodeContext, NonFiniteInput, resolve_kernel
from .view_chain import ViewChain, dims_named, find_chains

_DIMS_CACHE_SIZE = 4  # sets of dims whose dims-only values are kept
_DIMS_CACHE_BYTES = 64 << 20  # and their memory (a causal mask is seq^2: 32 MiB in bf16 at 4096)
_BOUND_PLANS = 2  # bound plans kept of each kind: decode plans (per set of fixed dims: a decoder's batch sizes) and
# fixed plans (per input shape), apart, so that a prompt length called again and again evicts no decode plan
# A model called with the same dims this many times runs from a plan bound to buffers (run_fixed): by then the
# layers that measure two ways in their first calls (backends/cpu/kernels/_in_situ.py) have chosen.
FIXED_PLAN_AFTER = 10
# Then it measures, calls from the plan (the first binds it) and step by step taking turns (the same weights either
# way, so turns and not blocks: less drift between them on a noisy machine), FIXED_PLAN_WARM untimed calls then
# FIXED_PLAN_TIMED timed ones each, and keeps the faster way (the plan copies the results of steps that cannot bind
# into its buffers: BERT-base bf16 b8, whose oneDNN linears do not bind, ran 1.02-1.04 x slower with it).
FIXED_PLAN_WARM, FIXED_PLAN_TIMED = 1, 4
assert FIXED_PLAN_AFTER + 2 * (FIXED_PLAN_WARM + FIXED_PLAN_TIMED) <= CHOOSING_CALLS
_FIXED_PLAN_BYTES = 64 << 20  # buffer memory a fixed plan may hold (it keeps every value's buffer; the executor frees)
_FIXED_PLAN_REFILLS = 0.25  # share of the steps that may run as kernels each call (refills) in a fixed plan kept


@dataclass
class Step:
    node: str
    op: str
    kernel: Callable
    kernel_name: str
    inputs: list[int | None]
    outputs: list[int]
    free_after: list[int]
    in_place: bool = False  # the kernel's in-place variant runs (Kernel.in_place)
    dims_only: bool = False  # reads only constants and dims-only values: runs once per set of dims
    bind: Optional[Callable] = None  # Kernel.bind (runtime/bound_plan.py)
    bind_varying: Optional[Callable] = None  # Kernel.bind_varying
    uses_dims: tuple[str, ...] = ()  # the dynamic dims its attrs name
    output_dims: tuple[tuple[str, ...], ...] = ()  # per output, the dynamic dims its shape names
    view_chain: bool = False


class Executor:
    def __init__(self, program: Program, device: str | Backend = "cpu", widen_bf16: bool | None = None,
                 nan_safe: bool = False, avoid_kernels: frozenset[str] = frozenset()):
        """device: a device name or its Backend (backends/), which picks the kernels and prepares the program.
        widen_bf16: compute bf16 nodes in float32; by default the backend decides (the CPU: where it has no
        native bf16, backends/cpu/compute_precision.py). False runs bf16 as written (tests of the bf16 passes).
        nan_safe: only kernels that propagate NaN (kernels.NodeContext.nan_safe).
        avoid_kernels: factory names or families (e.g. "onednn_direct") not to use (kernels.check_avoid)."""
        backend = get_backend(device) if isinstance(device, str) else device
        device, isa = backend.device, backend.level()
        program, self.bf16_compute = backend.prepare_program(program, widen_bf16)
        graph = program.graph
        self.device = device
        self.capture_calls = backend.capture_calls  # (bound plans: runs of bound calls as one call)
        self.row_copy = backend.row_copy  # (bound plans: the position's rows, chosen by the cache length)
        slot: dict[str, int] = {}

        def slot_of(name: str) -> int:
            if name not in slot:
                slot[name] = len(slot)
            return slot[name]

        for name in graph.inputs:
            slot_of(name)
        self.input_slots = [slot[n] for n in graph.inputs]
        self.input_dims = [dims_named([graph.values[n].shape], graph.dims) for n in graph.inputs]
        constant_slots: dict[int, torch.Tensor] = {}
        constant_tensors: dict[str, torch.Tensor] = {}
        for name in graph.constants:
            tensor = backend.place_constant(program.weights[name], graph.values[name])
            constant_slots[slot_of(name)] = tensor
            constant_tensors[name] = tensor

        # A chain of view nodes runs as one step at its last member, reading the first one's input.
        readers: dict[str, int] = {}
        for node in graph.nodes:
            for v in set(node.inputs) - {None}:
                readers[v] = readers.get(v, 0) + 1
        chains = find_chains(graph.nodes, set(graph.outputs), set(graph.constants), readers)
        in_chain = {i for members in chains.values() for i in members[:-1]}
        step_inputs = {i: graph.nodes[members[0]].inputs for i, members in chains.items()}
        last_use: dict[str, int] = {}
        for i, node in enumerate(graph.nodes):
            if i in in_chain:
                continue
            for v in step_inputs.get(i, node.inputs):
                if v is not None:
                    last_use[v] = i
        keep = set(graph.outputs) | set(graph.constants)
        dims_only = _dims_only_values(graph)

        self.steps: list[Step] = []
        self.keeps_nan = True  # every kernel of the plan propagates NaN (Kernel.keeps_nan)
        float_inputs = {n for n in graph.inputs if graph.values[n].dtype.startswith(("float", "bfloat"))}
        checking: dict[str, list[int]] = {}  # graph input -> steps that run a Kernel.checked_fn on it
        self._plain_fns: dict[int, Callable] = {}  # such a step -> the kernel's fn (drop_finite_checks)
        fresh: set[str] = set()  # values made by fresh_output kernels, not views of anything
        view_makers: set[str] = set()  # values read by a kernel that may return a view of them

        def kernel_of(node) -> Kernel:
            try:
                attrs = get_op(node.op).parse_attrs(node.attrs)
                ctx = NodeContext(
                    op=node.op, attrs=attrs,
                    constants=tuple(constant_tensors.get(v) for v in node.inputs),
                    input_specs=tuple(None if v is None else graph.values[v] for v in node.inputs),
                    output_specs=tuple(graph.values[v] for v in node.outputs), device=device, isa=isa,
                    nan_safe=nan_safe)
                kernel = resolve_kernel(ctx, avoid_kernels)
            except (KeyError, ValueError) as e:  # unknown op, bad attrs (pydantic), refused aten target
                detail = " ".join(str(e.args[0] if isinstance(e, KeyError) else e).split())
                raise ArtifactError(f"node {node.name} ({node.op}) cannot be run: {detail}",
                                    "if a newer ipexconvert wrote this artifact, upgrade; otherwise re-create it "
                                    "with `ipexconvert optimize`") from None
            if get_op(node.op).shapes_sampled and graph.dims:
                kernel = declared_shapes(kernel, node, ctx.output_specs)
            return kernel

        for i, node in enumerate(graph.nodes):
            if i in in_chain:
                continue
            if i in chains:
                members = [graph.nodes[j] for j in chains[i]]
                uses = dims_named([m.attrs for m in members], graph.dims)
                kernel = Kernel(ViewChain([kernel_of(m).fn for m in members], uses), "executor:view_chain")
                node = node.model_copy(update={"inputs": step_inputs[i]})
            else:
                kernel = kernel_of(node)
            self.keeps_nan = self.keeps_nan and kernel.keeps_nan
            fn, in_place = kernel.fn, False
            first = node.inputs[0] if node.inputs else None
            if kernel.checked_fn is not None and not nan_safe and first in float_inputs and kernel.in_place is None:
                checking.setdefault(first, []).append(len(self.steps))
                self._plain_fns[len(self.steps)] = fn
                fn = _naming_the_input(kernel.checked_fn, first)
            if kernel.in_place is not None:
                operand, in_place_fn = kernel.in_place
                v = node.inputs[operand]
                if (v in fresh and v not in view_makers and last_use.get(v) == i and v not in keep
                        and v not in dims_only and node.inputs.count(v) == 1):
                    fn, in_place = in_place_fn, True  # nothing reads v after this node or shares its memory
            if kernel.fresh_output:
                fresh.update(node.outputs)
            else:
                view_makers.update(v for v in node.inputs if v is not None)
            inputs = [None if v is None or j in kernel.consumed_inputs else slot_of(v) for j, v in enumerate(node.inputs)]
            outputs = [slot_of(v) for v in node.outputs]
            dead = {v for v in node.inputs if v is not None and last_use.get(v) == i and v not in keep}
            dead |= {v for v in node.outputs if v not in last_use and v not in keep}  # unused outputs
            attrs = [graph.nodes[j].attrs for j in chains[i]] if i in chains else [node.attrs]
            self.steps.append(Step(node.name, node.op, fn, kernel.name, inputs, outputs,
                                   sorted(slot[v] for v in dead if v in slot), in_place,
                                   all(v in dims_only for v in node.outputs),
                                   kernel.bind_in_place if in_place else kernel.bind,
                                   None if in_place else kernel.bind_varying,
                                   dims_named(attrs, graph.dims),
                                   tuple(dims_named([graph.values[v].shape], graph.dims) for v in node.outputs),
                                   i in chains))
        # The float inputs that only checking steps read, at their first input (the model does not scan them).
        readers: dict[int, set[int]] = {}
        for index, step in enumerate(self.steps):
            for position, s in enumerate(step.inputs):
                if s is not None:
                    readers.setdefault(s, set()).add(index if position == 0 else -1)
        self.finite_checked_inputs = frozenset(
            name for name, steps in checking.items()
            if name not in graph.outputs and readers.get(slot[name], set()) <= set(steps))
        # Constants that every reader took over (e.g. prepacked) need not stay in memory.
        still_read = {s for step in self.steps for s in step.inputs if s is not None} | set(slot[o] for o in graph.outputs if o in slot)
        constant_slots = {s: t for s, t in constant_slots.items() if s in still_read}
        self.output_slots = [slot_of(n) for n in graph.outputs]
        self.base_env: list[torch.Tensor | None] = [None] * len(slot)
        for s, tensor in constant_slots.items():
            self.base_env[s] = tensor
        self.prelude = [step for step in self.steps if step.dims_only]
        self.main = [step for step in self.steps if not step.dims_only]
        read_by_main = {s for step in self.main for s in step.inputs if s is not None}
        self._kept_slots = sorted({s for step in self.prelude for s in step.outputs} & read_by_main)
        # The prelude runs before every main step: a value a main step reads outlives it, even where that value's
        # last reader in graph order is a prelude step.
        for step in self.prelude:
            step.free_after = [s for s in step.free_after if s not in read_by_main]
        # dims -> (values, bytes, their storages' addresses: an output viewing one is copied, _execute)
        self._dims_cache: dict[tuple, tuple[list[torch.Tensor], int, frozenset[int]]] = {}
        self._dims_lock = threading.Lock()  # a model may be called from several threads (guards _bound's evictions too)
        self._bound: dict[tuple, BoundPlan] = {}  # (varying dims, the other dims, threads) -> plan
        self._fixed_calls: dict[tuple, int] = {}  # (dims, threads) -> calls so far; -1: its plan was not worth keeping
        self._fixed_times: dict[tuple, tuple[list[float], list[float]]] = {}  # (dims, threads) -> (planned, stepped)
        self.fixed_plans = not environment.switched_off("IPEXCONVERT_FIXED_PLANS")

    def drop_finite_checks(self) -> None:
        """The checking steps run their kernels' plain fn again (a model that needs no finite inputs)."""
        for index, fn in self._plain_fns.items():
            self.steps[index].kernel = fn
        self._plain_fns, self.finite_checked_inputs = {}, frozenset()

    def run_bound(self, inputs: Sequence[torch.Tensor], dims: dict[str, int], varying: frozenset[str],
                  max_bytes: Optional[int] = None) -> list[torch.Tensor]:
        """A run from a plan bound to buffers made once (runtime/bound_plan.py), for calls whose dims differ
        only in `varying` (a decoder's decode steps: the cache length); the first call with a set of the other
        dims binds it. Same results as run(); a plan busy in another thread leaves this call to run()."""
        key = (varying, tuple(sorted((k, v) for k, v in dims.items() if k not in varying)), torch.get_num_threads())
        plan = self._bound.get(key)
        if plan is not None:
            if not plan.lock.acquire(blocking=False):
                return self.run(inputs, dims)
            try:
                outputs = plan.run(inputs, dims)
            finally:
                plan.lock.release()
            if outputs is not None:
                return outputs
            # (its recorded steps cannot take this call: another cache, or one past their buffers; bind again)
        with self._dims_lock:
            self._bound.pop(key, None)
            same_kind = [k for k in self._bound if bool(k[0]) == bool(varying)]  # (oldest first)
            for old in same_kind[:max(len(same_kind) - _BOUND_PLANS + 1, 0)]:
                self._bound.pop(old)
        plan = BoundPlan(self, inputs, dims, varying, max_bytes)
        self._bound[key] = plan
        outputs, plan.first_outputs = plan.first_outputs, []  # (the plan must not keep this call's caches alive)
        return outputs

    def run_fixed(self, inputs: Sequence[torch.Tensor], dims: dict[str, int]) -> list[torch.Tensor]:
        """run(), or, for dims met FIXED_PLAN_AFTER times, a run from a plan bound to buffers made once (a CNN or
        encoder called again and again with one input shape): its consecutive bound calls run as one native call,
        with no Python, allocation or argument checks between the layers (ResNet-50 int8 b1 on a 2-core AMX Xeon
        0.78-0.93 x the time). A plan where more than _FIXED_PLAN_REFILLS of the steps cannot bind, that holds more
        than _FIXED_PLAN_BYTES of buffers, or whose calls measured slower than step by step (FIXED_PLAN_WARM /
        _TIMED) is dropped, and those dims run step by step from then on."""
        if not self.fixed_plans or self.device != "cpu":
            return self.run(inputs, dims)
        key = (tuple(sorted(dims.items())), torch.get_num_threads())
        with self._dims_lock:
            calls = self._fixed_calls.get(key, 0)
            if calls >= 0:
                if len(self._fixed_calls) >= 64 and key not in self._fixed_calls:  # many shapes: keep the memo small
                    self._fixed_calls.clear()
                self._fixed_calls[key] = calls + 1
        if calls < FIXED_PLAN_AFTER:
            return self.run(inputs, dims)
        measuring = 2 * (FIXED_PLAN_WARM + FIXED_PLAN_TIMED)
        measured = calls - FIXED_PLAN_AFTER  # calls into the measuring: even ones from the plan, odd ones step by step
        if measured < measuring and measured % 2:
            start = time.perf_counter()
            outputs = self.run(inputs, dims)
            self._time_fixed(key, measured, time.perf_counter() - start)
            return outputs
        plan_key = (frozenset(), key[0], key[1])
        new = plan_key not in self._bound
        start = time.perf_counter()
        try:
            outputs = self.run_bound(inputs, dims, frozenset(), max_bytes=_FIXED_PLAN_BYTES)
        except PlanTooLarge:
            outputs = None
        seconds = time.perf_counter() - start
        plan = self._bound.get(plan_key)
        if outputs is None or (new and plan is not None
                               and not plan.worth_keeping(_FIXED_PLAN_REFILLS * len(self.main), _FIXED_PLAN_BYTES)):
            self._drop_fixed(key)
        elif measured < measuring or key in self._fixed_times:  # (undecided past the turns: a turn raised)
            self._time_fixed(key, measured, seconds)
        return self.run(inputs, dims) if outputs is None else outputs

    def _time_fixed(self, key: tuple, measured: int, seconds: float) -> None:
        """A measured call's time (even: from the plan, odd: step by step); after the last, the plan is kept only
        where its median was the lower."""
        measuring = 2 * (FIXED_PLAN_WARM + FIXED_PLAN_TIMED)
        with self._dims_lock:
            times = self._fixed_times.setdefault(key, ([], []))
            if 2 * FIXED_PLAN_WARM <= measured < measuring:
                times[measured % 2].append(seconds)
            planned, stepped = self._fixed_times.pop(key) if measured >= measuring - 1 else (None, None)
        if planned is not None and not keeps_fixed_plan(planned, stepped):
            self._drop_fixed(key)

    def _drop_fixed(self, key: tuple) -> None:
        """These dims run step by step from now on."""
        with self._dims_lock:
            self._bound.pop((frozenset(), key[0], key[1]), None)
            self._fixed_calls[key] = -1

    def run(self, inputs: Sequence[torch.Tensor], dims: dict[str, int], persistent: frozenset[int] = frozenset(),
            capture: bool = True, check_guards: bool = True, positions: Optional[dict[int, int]] = None,
            borrow_outputs: bool = False) -> list[torch.Tensor]:
        """persistent, capture, check_guards, positions and borrow_outputs matter to runners that capture the plan (backends/cuda/graphs.py);
        the executor runs every call as it comes, its kernels checking their inputs as they run."""
        return self._execute(inputs, dims, None)

    def raise_tripped(self) -> None:
        """(A GPU runner's deferred input checks; on the CPU every check raised when it ran.)"""

    def forget_buffers(self, addresses: set[int]) -> int:
        """(A GPU runner drops the graphs captured on these persistent buffers; the executor captures nothing.)"""
        return 0

    def profile(self, inputs: Sequence[torch.Tensor], dims: dict[str, int],
                sync: Callable[[], None] | None = None, outputs: list | None = None) -> dict[str, float]:
        """Seconds spent per kernel kind for one run; `sync` waits for the device after each step (a GPU's
        kernels run after their launch returns). The run's outputs are appended to `outputs` if given (a decoder's
        profiled step hands its caches on, as a call's would)."""
        totals: dict[str, float] = {}
        results = self._execute(inputs, dims, totals, sync)
        if outputs is not None:
            outputs.extend(results)
        return totals

    @property
    def kept_slots(self) -> list[int]:
        """The slots of the dims-only values the main steps read (kept per set of dims)."""
        return list(self._kept_slots)

    def env_for(self, inputs: Sequence[torch.Tensor], dims: dict[str, int]) -> Optional[list]:
        """A slot list holding the constants, these inputs and the dims-only values kept for these dims (None where
        none are kept: a call with these dims has not run, or they were too big to keep)."""
        env = list(self.base_env)
        for s, t in zip(self.input_slots, inputs):
            env[s] = t
        if self.prelude:
            entry = self._dims_cache.get(tuple(sorted(dims.items())))
            if entry is None:
                return None
            for s, t in zip(self._kept_slots, entry[0]):
                env[s] = t
        return env

    def run_main(self, inputs: Sequence[torch.Tensor], dims: dict[str, int], main: list[Step]) -> list[torch.Tensor]:
        """run() with these main steps in place of the plan's own (the same plan with some steps replaced, e.g. by
        a position table's gather: runtime/position_table.py)."""
        return self._execute(inputs, dims, None, main=main)

    def kept_values(self, dims: dict[str, int]) -> list:
        """The dims-only values kept for these dims (a captured CUDA graph reads them: its owner holds them)."""
        entry = self._dims_cache.get(tuple(sorted(dims.items())))
        return [] if entry is None else list(entry[0])

    def _execute(self, inputs, dims, totals: dict[str, float] | None, sync=None,
                 main: Optional[list[Step]] = None) -> list[torch.Tensor]:
        env = list(self.base_env)
        for s, t in zip(self.input_slots, inputs):
            env[s] = t
        kept_memory: frozenset[int] = frozenset()
        with torch.inference_mode():
            if self.prelude:
                key = tuple(sorted(dims.items()))
                entry = self._dims_cache.get(key)
                if entry is None:
                    _run_steps(self.prelude, env, dims, totals, sync)
                    entry = self._keep(key, [env[s] for s in self._kept_slots])
                else:
                    for s, t in zip(self._kept_slots, entry[0]):
                        env[s] = t
                kept_memory = frozenset() if entry is None else entry[2]  # (values not kept: fresh every call)
            _run_steps(self.main if main is None else main, env, dims, totals, sync)
            # an output that is a view of a kept value (a main step's view of it) is the caller's to write into:
            # a copy, so the next call with these dims does not read what the caller wrote
            return [t.clone() if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() in kept_memory else t
                    for t in (env[s] for s in self.output_slots)]

    def _keep(self, key: tuple, values: list) -> tuple | None:
        """Keep one set's values, dropping the oldest sets to stay within the count and byte limits; the entry kept,
        or None where the values are too big to keep."""
        size = sum(t.untyped_storage().nbytes() for t in values if isinstance(t, torch.Tensor))
        if size > _DIMS_CACHE_BYTES:
            return None  # too big to keep: these dims run their dims-only steps on every call
        entry = (values, size, frozenset(t.untyped_storage().data_ptr() for t in values if isinstance(t, torch.Tensor)))
        with self._dims_lock:
            total = sum(e[1] for e in self._dims_cache.values())
            while self._dims_cache and (len(self._dims_cache) >= _DIMS_CACHE_SIZE
                                        or total + size > _DIMS_CACHE_BYTES):
                total -= self._dims_cache.pop(next(iter(self._dims_cache)))[1]  # the oldest
            self._dims_cache[key] = entry
        return entry


def keeps_fixed_plan(planned: list[float], stepped: list[float]) -> bool:
    """Whether a fixed plan's measured calls (seconds) beat those step by step."""
    return bool(planned and stepped) and statistics.median(planned) <= statistics.median(stepped)


def declared_shapes(kernel: Kernel, node, specs: Sequence) -> Kernel:
    """kernel, checking on each call that it made as many outputs as the node declares, each of its declared shape at
    the call's dims, where those depend on the dims (symbolic sizes, or `$sym` arguments): the loader compared them
    at one sample point only (OpDef.shapes_sampled), and the kernels after this node trust the declared shapes."""
    shapes = [[d if isinstance(d, int) else compile_int(d) for d in spec.shape] for spec in specs]
    if all(isinstance(d, int) for shape in shapes for d in shape) and "$sym" not in json.dumps(node.attrs):
        return kernel
    fn, bind = kernel.fn, kernel.bind

    def check(result, dims: dict[str, int]) -> None:
        made = list(result) if isinstance(result, (tuple, list)) else [result]
        wanted = [[d if isinstance(d, int) else d(dims) for d in shape] for shape in shapes]
        got = [list(t.shape) if isinstance(t, torch.Tensor) else None for t in made]
        if got != wanted:
            raise ArtifactError(f"node {node.name} ({node.attrs.get('target', node.op)}) made outputs of shapes {got} "
                                f"where the artifact declares {wanted} at {dims}",
                                "re-create the artifact with `ipexconvert optimize`")

    def checked(inputs: list, dims: dict[str, int]):
        result = fn(inputs, dims)
        check(result, dims)
        return result

    def checked_bind(inputs: list, dims: dict[str, int]):
        bound = bind(inputs, dims)
        if bound is not None:  # (a bound call's outputs are made once, before it runs: checked once)
            check(bound[1], dims)
        return bound

    return dataclasses.replace(kernel, fn=checked, in_place=None, bind=None if bind is None else checked_bind,
                               bind_in_place=None, bind_varying=None, checked_fn=None)


def _naming_the_input(checked_fn: Callable, name: str) -> Callable:
    """checked_fn, its NonFiniteInput naming the graph input it read."""
    def checked(inputs: list, dims: dict[str, int]):
        try:
            return checked_fn(inputs, dims)
        except NonFiniteInput:
            raise NonFiniteInput(name) from None
    return checked


def _run_steps(steps: list[Step], env: list, dims: dict[str, int], totals: dict[str, float] | None,
               sync: Callable[[], None] | None = None) -> None:
    step = None
    try:
        for step in steps:
            start = time.perf_counter() if totals is not None else 0.0
            result = step.kernel([None if i is None else env[i] for i in step.inputs], dims)
            if totals is not None:
                if sync is not None:
                    sync()
                totals[step.kernel_name] = totals.get(step.kernel_name, 0.0) + time.perf_counter() - start
            if len(step.outputs) == 1:
                env[step.outputs[0]] = result
            else:
                for s, r in zip(step.outputs, result):
                    env[s] = r
            for s in step.free_after:
                env[s] = None
    except Exception as e:  # say where (tracebacks, and why a CUDA graph capture failed)
        if step is not None:
            e.add_note(f"in node {step.node} ({step.kernel_name})")
        raise


def _dims_only_values(graph) -> set[str]:
    """Values computed from constants and dynamic dims alone, none of them a model output (the
    caller may write into what it gets back)."""
    known, outputs = set(graph.constants), set(graph.outputs)
    found: set[str] = set()
    for node in graph.nodes:
        if all(v is None or v in known for v in node.inputs) and not outputs & set(node.outputs):
            found.update(node.outputs)
            known.update(node.outputs)
    return found
