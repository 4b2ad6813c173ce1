"""The precision a bf16 artifact computes in on this CPU, decided once at load.

bf16 in an artifact is a storage format as much as a compute one: weights take half the bytes.
CPUs with native bf16 arithmetic (the avx512_bf16 and amx levels) compute bf16 nodes in bf16.
Below that level nothing computes bf16 well: oneDNN has no bf16 at all on AVX2 (no bf16 pooling
primitive, so bf16 CNNs failed) and emulates it on AVX-512 without bf16 at 3-4x the fp32 time
(oneDNN's data-type docs), and torch's bf16 matmul falls to slow internal loops (a bf16 MiniLM
ran at 0.23x of eager fp32 on an AVX2 EPYC). So there the loader widens the graph: every bf16
value, constant and dtype attribute becomes float32 (weights are converted once, at load), and
casts that became float32 -> float32 are dropped. The model then computes what the fp32
artifact computes (more accurately than bf16), and the signature is unchanged: bf16 graph
inputs and outputs keep their dtype, with one cast at each edge.

Native bf16 is not always faster either. On Intel CPUs at the avx512_bf16 level without AMX (Cooper
Lake; Xeons whose hypervisor hides AMX), vdpbf16ps issues on one port and FMA on two, so bf16 does
no more arithmetic a cycle than float32, and torch's and oneDNN's bf16 kernels ran 1.1-1.6x slower
than the float32 artifact (BERT-base, ResNet-50: benchmarks/results/session22-xeon-avx512bf16.md).
There compute-bound graphs widen too.

A decoder (a graph that appends to its KV cache) keeps bf16 on every level: its decode steps read
every weight once a token, and bf16 halves those bytes (59 against 78 ms a token on the Qwen2-0.5B
shape at avx512_bf16). Below avx512_bf16 its kernels compute in float32 from the bf16 values
(kernels/linear.py bf16_storage: bf16_gemv for decode rows, bf16_gemm for a prompt, both widening
the plain bf16 weight as they read it; sdpa casts a prompt's q/k/v to float32 for attention_f32),
so nothing bf16 reaches an emulating library there either. Widening such a decoder whole cost 6-11 % of decode time
against its fp32 artifact (float32 weights read, the bf16 caches cast each step: session 32).
"""
from __future__ import annotations

import re
from typing import Any

import torch

from ...ir import Program
from ...ir.graph import Graph, Node
from .isa import ISA_LEVELS

_CACHE_INPUT = re.compile(r"^past_(key|value)_[0-9]+$")  # the decoder contract's cache inputs
NATIVE_BF16_LEVEL = "avx512_bf16"  # avx512_bf16 (vdpbf16ps) and amx (tiles) compute bf16 natively
_BF16, _FP32 = "bfloat16", "float32"


def bf16_compute_dtype(isa: str) -> str:
    """What bf16 nodes compute in at this ISA level."""
    return _BF16 if ISA_LEVELS.index(isa) >= ISA_LEVELS.index(NATIVE_BF16_LEVEL) else _FP32


def bf16_no_faster_than_fp32(isa: str) -> bool:
    """Native bf16 that does no more work a cycle than float32 FMA (module docstring): Intel at avx512_bf16."""
    from .kernels._torch_onednn import mkl_runs_float32_linear

    return isa == NATIVE_BF16_LEVEL and mkl_runs_float32_linear()


def reads_weights_per_token(graph: Graph) -> bool:
    """A decoder: its signature carries a KV cache (docs/decoders.md) or it appends to one; its decode steps are
    bound by reading the weights."""
    return (any(_CACHE_INPUT.match(name) for name in graph.inputs)
            or any(node.op == "kv_append" for node in graph.nodes))


def widens_at_load(isa: str, graph: Graph) -> bool:
    """Whether a bf16 graph is widened to float32 at load at this level (module docstring): never a decoder."""
    if reads_weights_per_token(graph):
        return False
    return bf16_compute_dtype(isa) != _BF16 or bf16_no_faster_than_fp32(isa)


def describe(isa: str) -> str:
    """One line for doctor, bench and inspect."""
    if bf16_compute_dtype(isa) == _BF16 and bf16_no_faster_than_fp32(isa):
        return (f"bf16 artifacts compute in float32 from bf16 weights ({isa} without AMX: bf16 arithmetic is no "
                f"faster than float32 here), decoders in bf16 (their decode reads half the bytes)")
    if bf16_compute_dtype(isa) == _BF16:
        return f"bf16 artifacts compute in bf16 ({isa} has native bf16 arithmetic)"
    return (f"bf16 artifacts compute in float32 from bf16 weights ({isa} has no native bf16 arithmetic; "
            f"it needs the {NATIVE_BF16_LEVEL} level), decoders from bf16 weights and caches kept in bf16 (their "
            f"decode reads half the bytes)")


def has_bf16(graph: Graph) -> bool:
    return any(spec.dtype == _BF16 for spec in graph.values.values())


def widen_bf16(program: Program) -> Program:
    """A copy of `program` computing in float32 wherever it computed in bfloat16."""
    graph = program.graph
    values = {name: spec.with_(dtype=_FP32) if spec.dtype == _BF16 else spec for name, spec in graph.values.items()}
    weights = {name: t.float() if t.dtype == torch.bfloat16 else t for name, t in program.weights.items()}
    nodes = [node.model_copy(update={"attrs": _widen_attrs(node.attrs)}) for node in graph.nodes]
    inputs_first, outputs_last = [], []
    renamed: dict[str, str] = {}
    for name in graph.inputs:  # a bf16 input stays bf16 for the caller, cast once on the way in
        if graph.values[name].dtype == _BF16:
            wide = _fresh(f"{name}.float32", values)
            values[name] = graph.values[name]
            values[wide] = graph.values[name].with_(dtype=_FP32)
            renamed[name] = wide
            inputs_first.append(Node(name=f"{wide}.cast", op="to_dtype", inputs=[name], outputs=[wide],
                                     attrs={"dtype": _FP32}))
    constants = list(graph.constants)
    for name in graph.outputs:  # a bf16 constant output stays as stored; its readers read a float32 copy
        if graph.values[name].dtype == _BF16 and name in program.weights and name not in renamed:
            wide = _fresh(f"{name}.float32", values)
            values[name], values[wide] = graph.values[name], graph.values[name].with_(dtype=_FP32)
            weights[name], weights[wide] = program.weights[name], weights[name]
            constants.append(wide)
            renamed[name] = wide
    nodes = [n.model_copy(update={"inputs": [renamed.get(v, v) for v in n.inputs]}) for n in nodes]
    for name in graph.outputs:  # and a bf16 output is cast back once on the way out
        if graph.values[name].dtype == _BF16 and name not in graph.inputs and name not in program.weights:
            wide = _fresh(f"{name}.float32", values)
            values[wide] = graph.values[name].with_(dtype=_FP32)
            values[name] = graph.values[name]
            nodes = [_rename_output(n, name, wide) for n in nodes]
            outputs_last.append(Node(name=f"{name}.cast", op="to_dtype", inputs=[wide], outputs=[name],
                                     attrs={"dtype": _BF16}))
    widened = graph.model_copy(update={"values": values, "nodes": inputs_first + nodes + outputs_last,
                                       "constants": constants})
    widened = widened.model_copy(update={"nodes": _drop_no_op_casts(widened)})
    result = Program(widened, weights)
    result.prune()
    return result


def _widen_attrs(value: Any) -> Any:
    """Every dtype named in attributes (to_dtype, to_memory_format, attention_mask, int8 output
    dtypes, aten {"$dtype": ...} arguments) is a plain "bfloat16" string: make it float32."""
    if isinstance(value, dict):
        return {k: _widen_attrs(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_widen_attrs(v) for v in value]
    return _FP32 if value == _BF16 else value


def _fresh(base: str, taken: dict) -> str:
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}.{i}"
    return name


def _rename_output(node: Node, old: str, new: str) -> Node:
    renamed = [new if v == old else v for v in node.outputs]
    inputs = [new if v == old else v for v in node.inputs]
    return node.model_copy(update={"outputs": renamed, "inputs": inputs}) if old in node.outputs or old in node.inputs else node


def _drop_no_op_casts(graph: Graph) -> list[Node]:
    """Remove to_dtype nodes that now cast a value to its own dtype; readers read the source."""
    keep_names = set(graph.outputs)
    alias: dict[str, str] = {}
    nodes: list[Node] = []
    for node in graph.nodes:
        node = node.model_copy(update={"inputs": [None if v is None else alias.get(v, v) for v in node.inputs]})
        source = node.inputs[0] if node.inputs else None
        if (node.op == "to_dtype" and source is not None and node.outputs[0] not in keep_names
                and graph.values[source].dtype == node.attrs.get("dtype")):
            alias[node.outputs[0]] = source
            continue
        nodes.append(node)
    return _fold_output_casts(graph, nodes)


def _fold_output_casts(graph: Graph, nodes: list[Node]) -> list[Node]:
    """A no-op cast writing a graph output from a value that only it reads: the producer writes
    the output itself (saves copying each output once per call)."""
    readers: dict[str, int] = {}
    for node in nodes:
        for v in node.inputs:
            if v is not None:
                readers[v] = readers.get(v, 0) + 1
    produced = {v for node in nodes for v in node.outputs}
    protected = set(graph.inputs) | set(graph.outputs) | set(graph.constants)
    renames: dict[str, str] = {}
    kept = []
    for node in nodes:
        source = node.inputs[0] if node.op == "to_dtype" and node.inputs else None
        if (source is not None and source in produced and source not in protected and readers.get(source) == 1
                and graph.values[source].dtype == node.attrs.get("dtype")
                and graph.values[source].memory_format == graph.values[node.outputs[0]].memory_format):
            renames[source] = node.outputs[0]
            continue
        kept.append(node)
    if not renames:
        return nodes
    return [n.model_copy(update={"outputs": [renames.get(v, v) for v in n.outputs],
                                 "inputs": [None if v is None else renames.get(v, v) for v in n.inputs]}) for n in kept]
