"""fuse_rope_kv_append: a decoder layer's attention inputs, from the q/k/v projections to the tensors attention
reads, become one rope_kv_append node:

    q = rope(heads(q_proj)), present_key = kv_append(past_key, rope(heads(k_proj))),
    present_value = kv_append(past_value, heads(v_proj)),   heads(x) = x.reshape(b, s, n, d).permute(0, 2, 1, 3)

where the projections are three tensors or three column slices (q, k, v in that order, covering it) of one
merged projection (merge_linears). Seven executor steps a layer (three head views, two ropes, two appends)
become one, which reads the projections once, writes q and the two caches, and computes nothing else.
Matched from each sdpa whose query is a rope output and whose key and value are kv_append outputs; every
intermediate value (the head views, the slices, the rotated key) must be read only inside the pattern, and
both ropes must read one cos and one sin.

Counts: rope_kv_appends.
"""
from __future__ import annotations

from typing import Optional

from ..ir import Graph, Node, Program
from ..ir.dims import same
from ..ir.opdef import SpecError, get_op
from .base import PassOptions, register_pass
from .rewrite import last_dim_slice, remove_nodes, single_user


def _heads_view(graph: Graph, producers, users, x: str, reader: Node) -> Optional[tuple[str, Optional[tuple[int, int]], list[str]]]:
    """(projection, its column range or None for the whole of it, the view nodes) when x =
    projection[..., range].reshape(b, s, n, d).permute(0, 2, 1, 3), each value read only along that chain."""
    permute = producers.get(x)
    if (permute is None or permute.op != "permute" or list(permute.attrs.get("perm", [])) != [0, 2, 1, 3]
            or single_user(graph, x, users) is not reader):
        return None
    reshape = producers.get(permute.inputs[0])
    if reshape is None or reshape.op != "reshape" or single_user(graph, reshape.outputs[0], users) is not permute:
        return None
    source, split = graph.values[reshape.inputs[0]], graph.values[reshape.outputs[0]]
    if source.rank != 3 or split.rank != 4 or split.shape[:2] != source.shape[:2]:
        return None
    nodes = [permute.name, reshape.name]
    sliced = last_dim_slice(producers.get(reshape.inputs[0]))
    if sliced is not None and single_user(graph, reshape.inputs[0], users) is reshape:
        nodes.append(producers[reshape.inputs[0]].name)
        return sliced[0], (sliced[1], sliced[2]), nodes
    return reshape.inputs[0], None, nodes


def _projections(graph: Graph, views: list[tuple[str, Optional[tuple[int, int]], list[str]]], head_sizes: list[int]) -> Optional[list[str]]:
    """The fused node's projection inputs: [qkv] when the three views are consecutive column ranges covering one
    tensor, [q, k, v] when each view is a whole tensor, else None."""
    sources = [v[0] for v in views]
    if all(v[1] is None for v in views):
        return sources
    if len(set(sources)) != 1 or any(v[1] is None for v in views):
        return None
    width = graph.values[sources[0]].shape[-1]
    start = 0
    for (_, (begin, end), _), size in zip(views, head_sizes):
        if begin != start or end != start + size:
            return None
        start = end
    return [sources[0]] if start == width else None


def _infers_the_same(graph: Graph, node: Node) -> bool:
    """The fused node's shape rule accepts its inputs and gives the values the pattern made (dtypes that differ,
    e.g. a cache kept in another dtype than the projections, leave the pattern alone)."""
    try:
        specs = get_op(node.op).infer([graph.values[v] for v in node.inputs], None)
    except SpecError:
        return False
    return all(s.dtype == graph.values[v].dtype and len(s.shape) == len(graph.values[v].shape)
               and all(same(a, b) for a, b in zip(s.shape, graph.values[v].shape)) for s, v in zip(specs, node.outputs))


@register_pass("fuse_rope_kv_append", "a decoder layer's q/k/v head views, ropes and cache appends -> one rope_kv_append")
def fuse_rope_kv_append(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    producers, users = graph.producers(), graph.users()
    position = {n.name: i for i, n in enumerate(graph.nodes)}
    doomed: set[str] = set()
    fused = 0
    for sdpa in list(graph.nodes):
        if sdpa.op != "sdpa" or len(sdpa.inputs) < 3:
            continue
        rope_q, append_k, append_v = (producers.get(v) for v in sdpa.inputs[:3])
        if (rope_q is None or rope_q.op != "rope" or append_k is None or append_k.op != "kv_append"
                or append_v is None or append_v.op != "kv_append"):
            continue
        rope_k = producers.get(append_k.inputs[1])
        if (rope_k is None or rope_k.op != "rope" or rope_k.inputs[1:] != rope_q.inputs[1:]
                or single_user(graph, rope_k.outputs[0], users) is not append_k
                or {rope_q.name, rope_k.name, append_k.name, append_v.name} & doomed):
            continue
        views = [_heads_view(graph, producers, users, rope_q.inputs[0], rope_q),
                 _heads_view(graph, producers, users, rope_k.inputs[0], rope_k),
                 _heads_view(graph, producers, users, append_v.inputs[1], append_v)]
        if None in views:
            continue
        heads_and_size = [graph.values[x].shape[1::2] for x in (rope_q.inputs[0], rope_k.inputs[0], append_v.inputs[1])]
        if not all(isinstance(d, int) for pair in heads_and_size for d in pair):
            continue  # head counts and sizes are fixed in every model the op takes
        projections = _projections(graph, views, [heads * size for heads, size in heads_and_size])
        if projections is None:
            continue
        members = [rope_q, rope_k, append_k, append_v]
        at = max(position[n.name] for n in members)
        outputs = [rope_q.outputs[0], append_k.outputs[0], append_v.outputs[0]]
        if any(position[r.name] <= at for v in outputs for r in users.get(v, []) if r not in members):
            continue  # something reads q before the last member: the fused node could not stand there
        node = Node(name=f"{rope_q.name}_kv_append", op="rope_kv_append",
                    inputs=[*projections, *rope_q.inputs[1:], append_k.inputs[0], append_v.inputs[0]],
                    outputs=outputs, source=rope_q.source)
        if not _infers_the_same(graph, node):
            continue
        graph.nodes[at] = node
        doomed.update(n.name for n in members if position[n.name] != at)
        doomed.update(name for view in views for name in view[2])
        fused += 1
    remove_nodes(program, doomed)
    return {"rope_kv_appends": fused}
