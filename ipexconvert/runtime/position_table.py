"""Position tables: the steps of a plan that depend on one scalar input alone (a static-cache decode step's
`position`: its rotary rows and causal mask), computed ahead for every value that input can take, so that a call
gathers one row of a table instead of running them.

A GPU's decode step replays one CUDA graph (backends/cuda/graphs.py); of its ~130 kernels about a dozen are the
token's position (the position added to an arange, times the inverse frequencies, cat, cos, sin, the mask's
compare, not and where, the casts), each a few microseconds with its boundary, before the first layer can start.
They read nothing but the position, constants and values computed from the dims alone (runtime/executor.py's
prelude), so their results for position p are the same on every call: a table with a row per position, filled
once by running those very steps (same kernels, same bits), and one gather step in their place that copies row p
(clamped into the table; the caller vouches that p is inside it, and the runner checks the value on the CPU).

The CPU's bound plans tabulate the same steps their own way (runtime/bound_plan.py, per cache length)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from .executor import Executor, Step, _run_steps

MAX_TABLE_BYTES = 32 << 20  # a table larger than this (a long cache's mask rows: 2 bytes a key a position) is not made
_ALIGN = 16  # bytes: each tabulated value starts at a multiple of this in a row (any dtype's view of it is aligned)

# (table [rows, row_bytes] uint8, position 0-d int64 tensor) -> that row [row_bytes] (a fresh tensor)
RowGather = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def torch_row_gather(table: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    """The row of the position, clamped into the table (two kernels on a GPU; backends/cuda has one of its own)."""
    return table.index_select(0, position.reshape(1).clamp(0, table.shape[0] - 1))[0]


@dataclass
class IndexSteps:
    """The main steps that read `slot` (a scalar input) and otherwise only constants, dims-only values and each
    other's results, and which of their results the rest of the plan reads (the frontier)."""

    positions: list[int]  # indices into executor.main, in order
    frontier: list[int]  # slots


def index_steps(executor: Executor, slot: int) -> Optional[IndexSteps]:
    """The steps that depend on the scalar input in `slot` alone, or None where there are none worth a table (or one
    of their results is a model output, or one has a guard: its check must run on every call)."""
    known = {s for s, t in enumerate(executor.base_env) if t is not None} | set(executor.kept_slots) | {slot}
    derived = {slot}
    chosen: list[int] = []
    for i, step in enumerate(executor.main):
        read = [s for s in step.inputs if s is not None]
        if read and all(s in known for s in read) and any(s in derived for s in read) \
                and not getattr(step.kernel, "guards", ()):
            chosen.append(i)
            known.update(step.outputs)
            derived.update(step.outputs)
    if not chosen or derived & set(executor.output_slots):
        return None
    inside = set(chosen)
    read_elsewhere = {s for i, step in enumerate(executor.main) if i not in inside for s in step.inputs}
    frontier = sorted((derived - {slot}) & read_elsewhere)
    return IndexSteps(chosen, frontier) if frontier else None


@dataclass
class PositionTable:
    """The table of one scalar input's index steps for one set of dims, and the plan's main steps with one gather
    step in their place (run them with Executor.run_main)."""

    rows: int  # the input takes values 0 .. rows - 1
    table: torch.Tensor  # [rows, row_bytes] uint8
    main: list[Step] = field(default_factory=list)

    @classmethod
    def build(cls, executor: Executor, input_index: int, rows: int, inputs: list, dims: dict[str, int],
              gather: RowGather = torch_row_gather) -> Optional["PositionTable"]:
        """The table for the input at `input_index` taking values 0 .. rows - 1, filled by running its index steps
        once per value with `inputs` and `dims` (a call with these dims has run, so its dims-only values are kept),
        or None where there is nothing to tabulate or the table would pass MAX_TABLE_BYTES."""
        slot = executor.input_slots[input_index]
        given = inputs[input_index]
        found = index_steps(executor, slot)
        if found is None or rows < 1 or given.dim() != 0 or given.dtype != torch.int64:
            return None
        env = executor.env_for(inputs, dims)
        if env is None:
            return None  # (these dims' values are not kept: a plan that recomputes them each call)
        device = given.device  # (the runner's static buffer: where the plan runs)
        steps = [executor.main[i] for i in found.positions]
        values = torch.arange(rows, dtype=torch.int64, device=device)

        def run_at(p: int) -> list:
            at = list(env)  # (a step frees the values it reads last: each run starts from the whole list)
            at[slot] = values[p]
            _run_steps(steps, at, dims, None)
            return at

        first = run_at(0)
        layout, row_bytes = [], 0
        for s in found.frontier:
            t = first[s]
            if not isinstance(t, torch.Tensor):
                return None
            layout.append((s, row_bytes, t.dtype, tuple(t.shape)))
            row_bytes += -(-t.numel() * t.element_size() // _ALIGN) * _ALIGN
        if rows * row_bytes > MAX_TABLE_BYTES:
            return None
        table = torch.empty((rows, row_bytes), dtype=torch.uint8, device=device)
        with torch.inference_mode():
            for p in range(rows):
                at = first if p == 0 else run_at(p)
                for s, offset, dtype, shape in layout:
                    _view(table[p], offset, dtype, shape).copy_(at[s])

        def row_of(step_inputs: list, _dims: dict[str, int]):
            row = gather(table, step_inputs[0])
            views = [_view(row, offset, dtype, shape) for _, offset, dtype, shape in layout]
            return views[0] if len(views) == 1 else views

        gather_step = Step(node="position_table", op="position_table", kernel=row_of,
                           kernel_name="runtime:position_table", inputs=[slot], outputs=[s for s, *_ in layout],
                           free_after=[])
        skipped = set(found.positions)
        main = [step for i, step in enumerate(executor.main) if i not in skipped]
        main.insert(found.positions[0], gather_step)  # (every reader of the frontier comes after the first index step)
        return cls(rows, table, main)

    def holds(self, position: torch.Tensor) -> bool:
        """Whether this call's value (a CPU tensor) has a row."""
        return position.device.type == "cpu" and 0 <= int(position) < self.rows


def _view(row: torch.Tensor, offset: int, dtype: torch.dtype, shape: tuple) -> torch.Tensor:
    count = 1
    for d in shape:
        count *= d
    return row[offset:offset + count * torch.empty((), dtype=dtype).element_size()].view(dtype).view(shape)
