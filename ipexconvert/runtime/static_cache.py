"""Static-cache decoding: a decoder's graph rewritten at load so that every decode step has the same shapes and
buffers, and a GPU replays it from one captured CUDA graph instead of capturing a new one per token.

The artifact's graph takes the past cache [b, kv_heads, past, d] and returns present = cat(past, new) with past +
seq positions: every token has new shapes. The static program takes caches of a fixed capacity C instead
(buffers the session owns) and one more input, `position` (int64, 0-d: the positions already written). It runs
with the dims past = C - seq, so every size the graph derives from past + seq (the caches, the key count of the
causal mask) is C, while the places that use past as a number (the first new position: `arange(past, past +
seq)`, `arange(seq) + past`) read `position`. kv_append and rope_kv_append become kv_write and rope_kv_write
(ir/ops), which write the new positions into the buffers in place. Keys past the written ones are hidden by the
graph's own causal mask (key index <= query position), which now spans C keys.

A graph that uses past any other way is not rewritten: static_program raises NotStatic with the reason, and
generation keeps the growing cache (runtime/decoder.py).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import sympy
import torch

from ..errors import ArtifactError
from ..ir import Program, dtypes
from ..ir.dims import parse_sympy, simplify
from ..ir.graph import Node, attr_expressions
from ..ir.ops.kv_append import appended_caches
from ..ir.opdef import get_op
from ..ir.spec import TensorSpec
from ..ir.validate import NodeError, check_nodes
from ..manifest import DecoderRecord

_ARANGE = "aten.arange.start_step"
_ADD = "aten.add.Tensor"
# op appending to the cache -> (its static form, which of its inputs are the caches)
_WRITES = {"kv_append": "kv_write", "rope_kv_append": "rope_kv_write"}  # each appending op (APPENDS) -> its static form
STATIC_WRITES = frozenset(_WRITES.values())  # the ops that write a static cache (a decoder's graph, rewritten)


class NotStatic(Exception):
    """The graph cannot run with a static cache (why)."""


def static_program(program: Program, record: DecoderRecord) -> tuple[Program, str]:
    """(the static program, the name of its `position` input). The weights are shared with `program`."""
    graph = program.graph
    past = record.cache_dim
    seq = _seq_dim(graph, record)
    new = Program(graph.model_copy(deep=True), program.weights)
    g = new.graph
    position = new.fresh_name("position")
    g.inputs.append(position)
    g.values[position] = TensorSpec(dtype="int64", shape=[])
    caches = {past for past, _ in record.cache}
    for name in caches:
        spec = g.values[name]
        g.values[name] = spec.model_copy(update={"shape": [*spec.shape[:2], simplify(f"{past} + {seq}"), spec.shape[3]]})
    nodes: list[Node] = []
    for node in g.nodes:
        reads_cache = [v for v in node.inputs if v in caches]
        if node.op in _WRITES and reads_cache and \
                [node.inputs[i] for i, _ in appended_caches(node.op, node.inputs)] == reads_cache:
            nodes.append(node.model_copy(update={"op": _WRITES[node.op], "inputs": [*node.inputs, position]}))
        elif reads_cache:
            raise NotStatic(f"node {node.name} ({node.op}) reads the cache {reads_cache[0]} other than by appending to it")
        elif node.op == "aten":
            nodes.extend(_aten_positions(new, node, past, seq, position))
        else:
            nodes.append(node)
    g.nodes = nodes
    for name, spec in g.values.items():
        for d in spec.shape:
            if isinstance(d, str) and name not in caches:
                _check_size(d, past, seq, f"value {name}")
    for node in g.nodes:
        for expr in attr_expressions(get_op(node.op).parse_attrs(node.attrs)):
            _check_size(expr, past, seq, f"node {node.name}")
    try:
        check_nodes(g)  # every rewritten node fits its op, as the loader checked the artifact's own
    except NodeError as e:
        raise NotStatic(f"the rewritten graph does not check: {e}") from None
    return new, position


def _seq_dim(graph, record: DecoderRecord) -> str:
    """The new tokens' dim, once the record is seen to name what a decoder has (the loader checks the record
    against the graph only when generation starts; a rewrite at load must not trip over a hostile one first)."""
    ids = graph.values.get(record.input_ids)
    if record.input_ids not in graph.inputs or ids is None or ids.rank != 2:
        raise NotStatic(f"the decoder record's ids {record.input_ids} are not a [batch, seq] input")
    if record.logits not in graph.outputs or graph.values[record.logits].rank < 1:
        raise NotStatic(f"the decoder record's logits {record.logits} are not an output")
    for past, present in record.cache:
        spec = graph.values.get(past)
        if past not in graph.inputs or present not in graph.outputs or spec is None or spec.rank != 4:
            raise NotStatic(f"the decoder record's cache {past} / {present} is not a rank-4 input and an output")
    if not isinstance(ids.shape[1], str) or ids.shape[1] not in graph.dims or record.cache_dim not in graph.dims:
        raise NotStatic(f"{record.input_ids} ({ids.describe()}) or the cache dim {record.cache_dim} is not dynamic")
    return ids.shape[1]


def _aten_positions(program: Program, node: Node, past: str, seq: str, position: str) -> list[Node]:
    """The aten node with its uses of past as a number reading `position` (one or two nodes)."""
    target, args = node.attrs.get("target"), node.attrs.get("args", [])
    bare = {"$sym": past}
    if target == _ADD and len(args) == 2 and args[1] == bare and node.attrs.get("kwargs", {}) in ({}, None):
        attrs = {**node.attrs, "args": [args[0], {"$in": len(node.inputs)}]}
        return [node.model_copy(update={"attrs": attrs, "inputs": [*node.inputs, position]})]
    if target == _ARANGE and len(args) >= 2 and args[0] == bare:
        if not (len(args) == 2 or args[2] == 1) or not isinstance(args[1], dict) or "$sym" not in args[1]:
            raise NotStatic(f"node {node.name} is an arange from {past} with a step or end it cannot shift")
        count = simplify(f"({args[1]['$sym']}) - {past}")
        if past in _symbols(count):
            raise NotStatic(f"node {node.name} counts {count} positions, which depend on {past}")
        counted = program.fresh_name(f"{node.outputs[0]}_from_zero")
        program.graph.values[counted] = program.graph.values[node.outputs[0]].model_copy()
        start = node.model_copy(update={"outputs": [counted], "attrs": {**node.attrs, "args": [0, _sym(count), *args[2:]]}})
        shift = Node(name=program.fresh_name(f"{node.name}_at_position"), op="aten", inputs=[counted, position],
                     outputs=list(node.outputs), attrs={"target": _ADD, "args": [{"$in": 0}, {"$in": 1}], "kwargs": {}})
        return [start, shift]
    if bare in _sym_dicts(node.attrs):
        raise NotStatic(f"node {node.name} ({target}) uses {past} as a number")
    return [node]


def _sym(expr) -> Any:
    return expr if isinstance(expr, int) else {"$sym": expr}


def _check_size(expr: str, past: str, seq: str, where: str) -> None:
    """A size may depend on past only through past + seq (which the static program holds at the capacity)."""
    e = parse_sympy(expr)
    p, s = sympy.Symbol(past), sympy.Symbol(seq)
    if p in e.free_symbols and sympy.simplify(sympy.diff(e, p) - sympy.diff(e, s)) != 0:
        raise NotStatic(f"{where} has the size {expr}, which depends on {past} other than through {past} + {seq}")


def _symbols(expr) -> set[str]:
    return {str(x) for x in parse_sympy(expr).free_symbols} if isinstance(expr, str) else set()


def _sym_dicts(value: Any) -> list[dict]:
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if set(item) == {"$sym"}:
                found.append(item)
            else:
                stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


CAPACITY_STEP = 256  # caches are made with room for a multiple of this many positions
# greedy() on a runner with greedy_chain (a GPU's): the steps chained in one captured graph that feeds each arg-max to
# the next step (backends/cuda/graphs.py, GreedyChain); False: a replay, an arg-max and copies in and out a step.
# Read at load (benchmarks/gpu_decode.py's "+chain" / "+nochain"): TinyLlama int4 decode on an H100 0.912 ms a token
# against 0.923 step by step, the same tokens (benchmarks/results/session62-gpu-decode-chain-h100.md).
CHAINED = True


@dataclass(frozen=True)
class GreedyFeed:
    """Where a greedy step's choice goes back in (a runner's greedy_chain: backends/cuda/graphs.py): the ids input
    [batch, 1] (int64), the position input (0-d int64, one more each step), the logits output [batch, seq, vocab]
    (its last position read)."""
    ids_at: int
    position_at: int
    logits_at: int


class StaticCache:
    """A decoder's steps over static caches: start() runs the prompt into fresh buffers with room for the whole
    generation, advance() one token more. The buffers are kept for the next generation of the same batch and
    capacity, so a GPU's captured decode step (keyed by their addresses) is replayed across generate() calls."""

    def __init__(self, program: Program, position: str, record: DecoderRecord, runner):
        """runner: the backend's runner of the static program's plan (`make_runner`: run(inputs, dims, persistent,
        capture, check_guards) and raise_tripped())."""
        graph = program.graph
        self.runner, self.record = runner, record
        self.max_positions = graph.dims[record.cache_dim].max + 1  # the cache holds up to the dim's max + 1 positions
        self.names = list(graph.inputs)
        self.caches = [past for past, _ in record.cache]
        self.persistent = frozenset(self.names.index(c) for c in self.caches)
        self.logits_at = graph.outputs.index(record.logits)
        self.present_at = {past: graph.outputs.index(present) for past, present in record.cache}
        self.specs = {name: graph.values[name] for name in self.caches}
        ids = graph.values[record.input_ids].shape
        self.batch_dim = ids[0] if isinstance(ids[0], str) else None
        self.seq_dim, self.past_dim, self.position = ids[1], record.cache_dim, position
        self.position_at = self.names.index(position)
        unbound = set(graph.dims) - {self.batch_dim, self.seq_dim, self.past_dim}
        if unbound:
            raise NotStatic(f"the graph has dims other than the batch, the new tokens and the cache: {sorted(unbound)}")
        self.buffers: dict[str, torch.Tensor] = {}
        self.written = 0  # positions in the buffers
        self.in_use = threading.Lock()  # held by the generation using the buffers (runtime/decoder.py)
        self.chained = CHAINED
        # greedy() may feed its own arg-max ids back unchecked: only where every id the logits can name is a row of
        # each embedding table the ids index
        tables = [graph.values[n.inputs[0]].shape[0] for n in graph.nodes
                  if n.op == "embedding" and n.inputs[1] == record.input_ids]
        width = graph.values[record.logits].shape[-1]
        self.pipelines = bool(tables) and isinstance(width, int) and all(isinstance(r, int) and width <= r for r in tables)

    def start(self, ids: torch.Tensor, total: int, device: torch.device) -> torch.Tensor:
        """The prompt's logits, its positions written into buffers with room for `total` positions."""
        capacity = min(self.max_positions, -(-total // CAPACITY_STEP) * CAPACITY_STEP)
        batch = ids.shape[0]
        first = self.buffers.get(self.caches[0])
        if first is None or first.shape[0] != batch or first.shape[2] != capacity or first.device != device:
            if self.buffers:  # a GPU's graphs captured on the old buffers go with them
                self.runner.forget_buffers({t.data_ptr() for t in self.buffers.values()})
            self.buffers = {}  # the old ones go before the new ones are made
            for name in self.caches:
                spec = self.specs[name]
                self.buffers[name] = torch.zeros((batch, spec.shape[1], capacity, spec.shape[3]),
                                                 dtype=dtypes.to_torch(spec.dtype), device=device)
        self.written = 0
        return self._run(ids, capture=False)

    def advance(self, ids: torch.Tensor) -> torch.Tensor:
        """The next tokens' logits (a GPU replays one captured graph for every call of the same shapes)."""
        return self._run(ids, capture=True)

    def greedy(self, ids: torch.Tensor, total: int, device: torch.device, count: int) -> Iterator[torch.Tensor]:
        """`count` greedy steps (arg-max, the lowest id on ties), yielding each step's ids [batch] on the CPU. The ids
        stay on the device and feed the next step, which is queued before this step's ids are read back: a GPU
        computes token k + 1 while the CPU hands token k over. Needs `pipelines` (the ids go unchecked)."""
        logits = self.start(ids, total, device)
        chosen = logits[:, -1].argmax(-1)
        chain = self._greedy_chain(chosen) if count > 1 and self.chained else None
        if chain is not None:  # the GPU's steps back to back, each feeding its own arg-max to the next
            pending = [_copy_to_host(chosen), chain.step()]
            self.written += 1
            for step in range(count):
                if step + 2 < count:
                    pending.append(chain.step())
                    self.written += 1
                host, wait = pending.pop(0)
                wait()
                yield host
            self.runner.raise_tripped()
            return
        for step in range(count):
            host, wait = _copy_to_host(chosen)
            if step + 1 < count:
                # (the arg-max below is queued before the next step overwrites a GPU's logits: no copy of them)
                logits = self._run(chosen.unsqueeze(1), capture=True, check_guards=False, borrow=True)
                chosen = logits[:, -1].argmax(-1)
            wait()
            yield host
        self.runner.raise_tripped()  # the unchecked steps' guards (an id outside a table), read once

    def _greedy_chain(self, chosen: torch.Tensor):
        """The runner's chain of greedy steps from `chosen` [batch] at the next position (backends/cuda/graphs.py),
        its first step queued; None where the runner has none or these steps do not chain (then step by step)."""
        chain_of = getattr(self.runner, "greedy_chain", None)
        if chain_of is None:
            return None
        inputs, dims, positions = self._step_inputs(chosen.unsqueeze(1))
        feed = GreedyFeed(ids_at=self.names.index(self.record.input_ids), position_at=self.position_at,
                          logits_at=self.logits_at)
        return chain_of(inputs, dims, self.persistent, positions, feed)

    def _step_inputs(self, ids: torch.Tensor) -> tuple[list, dict[str, int], dict[int, int]]:
        """(the graph's inputs for `ids` [batch, seq] at the next position, its dims, {the position input: the values
        it takes}) for the runner; the position takes 0 .. capacity - seq, so a GPU's runner tabulates the steps that
        read it alone."""
        batch, seq = ids.shape
        capacity = self.buffers[self.caches[0]].shape[2]
        if self.written + seq > capacity:
            raise ValueError(f"{self.written} + {seq} positions do not fit the cache of {capacity}")
        given = {self.record.input_ids: ids, self.position: torch.tensor(self.written, dtype=torch.int64), **self.buffers}
        dims = {self.seq_dim: seq, self.past_dim: capacity - seq}
        if self.batch_dim is not None:
            dims[self.batch_dim] = batch
        return [given[n] for n in self.names], dims, {self.position_at: capacity - seq + 1}

    def _run(self, ids: torch.Tensor, capture: bool, check_guards: bool = True, borrow: bool = False) -> torch.Tensor:
        inputs, dims, positions = self._step_inputs(ids)
        outputs = self.runner.run(inputs, dims, persistent=self.persistent, capture=capture, check_guards=check_guards,
                                  positions=positions, borrow_outputs=borrow)
        seq = ids.shape[1]
        for past, at in self.present_at.items():  # on a GPU the same buffers, written in place
            self.buffers[past] = outputs[at]
        self.written += seq
        return outputs[self.logits_at]


def _copy_to_host(t: torch.Tensor) -> tuple[torch.Tensor, Callable[[], None]]:
    """(a CPU copy of t, a wait for it): from a GPU, queued into pinned memory, so nothing waits until wait()."""
    if t.device.type != "cuda":
        return t.clone(), lambda: None
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    host.copy_(t, non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()
    return host, copied.synchronize


def build_static_cache(program: Program, record: DecoderRecord, backend,
                       make_executor) -> tuple[Optional[StaticCache], Optional[str]]:
    """(the static-cache steps of this decoder on this backend, None) or (None, why not): a graph the rewrite
    cannot follow, or a plan of it that cannot be built, leaves the artifact's own (growing) steps."""
    try:
        static, position = static_program(program, record)
        executor = make_executor(static)
        return StaticCache(static, position, record, backend.make_runner(executor)), None
    except NotStatic as e:
        return None, str(e)
    except ArtifactError as e:
        return None, f"its plan cannot be built: {e.problem}"
