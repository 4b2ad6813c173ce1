"""fuse_attention: explicit matmul -> scale -> mask -> softmax -> matmul becomes one sdpa node.

Matched (every intermediate value read by exactly one node and not a graph output):

    scores = matmul(q, permute(k))          # the permute swaps the last two axes
    scores = scores * c  |  scores / c      # any number, optional
    scores = scores + mask                  # optional, float mask broadcastable to scores
    probs  = softmax(scores, dim=-1)
    probs  = where(isnan(probs), 0, probs)  # optional: the NaN guard of ONNX exports (sdpa gives 0 there)
    probs  = identity(probs)                # eval-mode dropout, optional
    out    = matmul(probs, v)

k^T may also be one permute of a [.., S, heads, E] tensor (permute(x, [0, 2, 3, 1]), as ONNX
exports write it); that permute is then rewritten to make k.

Scalar mul/div on q or k before the first matmul, also behind reshape/permute
(e.g. `q_proj(x) * scaling` before the head split), is folded into the scale too.
"""
from __future__ import annotations

from typing import Optional

from ..ir import Graph, Node, Program, TensorSpec
from ..ir import dtypes
from ..ir.dims import same
from ..ir.opdef import get_op
from .base import PassOptions, register_pass
from .rewrite import replace_uses, single_user

# Ops that only move data: a scalar factor commutes with them.
_LAYOUT_OPS = {"permute", "reshape", "identity"}
_MAX_LAYOUT_HOPS = 8  # layout nodes to look through on the q and k paths


class _Tables:
    """Users and producers of every value; rebuilt after each rewrite."""

    def __init__(self, graph: Graph):
        self.users = graph.users()
        self.producers = graph.producers()


def _scalar_constant(program: Program, value: Optional[str]) -> Optional[float]:
    """The number a one-element floating constant holds (e.g. `scores / torch.tensor(8.0)`)."""
    if not program.is_constant(value):
        return None
    tensor = program.weights[value]
    if tensor.numel() != 1 or not tensor.is_floating_point():
        return None
    return float(tensor.reshape(()).item())


def _scale_of(program: Program, node: Node) -> Optional[tuple[float, str]]:
    """(factor, data input) if `node` multiplies one tensor by a number, else None."""
    if node.op not in ("mul", "div") or len(node.outputs) != 1:
        return None
    graph = program.graph
    lhs, rhs = node.attrs.get("lhs_scalar"), node.attrs.get("rhs_scalar")
    tensors = [i for i in node.inputs if i is not None]
    factor: Optional[float] = None
    data: Optional[str] = None
    if len(tensors) == 1 and lhs is None and isinstance(rhs, (int, float)) and not isinstance(rhs, bool):
        data, number = tensors[0], float(rhs)
        factor = number if node.op == "mul" else (1.0 / number if number != 0 else None)
    elif len(tensors) == 1 and rhs is None and node.op == "mul" and isinstance(lhs, (int, float)) \
            and not isinstance(lhs, bool):
        data, factor = tensors[0], float(lhs)  # number * x; number / x is not a scale
    elif len(tensors) == 2 and lhs is None and rhs is None:
        a, b = tensors
        if _scalar_constant(program, b) is not None and graph.values[b].rank <= graph.values[a].rank:
            number = _scalar_constant(program, b)
            data = a
            factor = number if node.op == "mul" else (1.0 / number if number != 0 else None)
        elif node.op == "mul" and _scalar_constant(program, a) is not None \
                and graph.values[a].rank <= graph.values[b].rank:
            data, factor = b, _scalar_constant(program, a)
    if factor is None or data is None:
        return None
    # The scale must not change the value's dtype or shape, or folding it away would.
    if graph.values[node.outputs[0]] != graph.values[data]:
        return None
    return factor, data


def _strip_scales(program: Program, t: _Tables, value: str) -> tuple[str, list[Node], float]:
    """Walk back over scalar mul/div nodes whose output only feeds the next step."""
    factor, nodes = 1.0, []
    while single_user(program.graph, value, t.users) is not None:
        node = t.producers.get(value)
        scale = _scale_of(program, node) if node is not None else None
        if scale is None:
            break
        factor *= scale[0]
        nodes.append(node)
        value = scale[1]
    return value, nodes, factor


def _scales_behind(program: Program, t: _Tables, value: str) -> tuple[list[Node], float]:
    """Scalar mul/div nodes reachable back from `value` through single-user layout ops."""
    factor, nodes, hops = 1.0, [], 0
    while hops <= _MAX_LAYOUT_HOPS:
        if single_user(program.graph, value, t.users) is None:
            break
        node = t.producers.get(value)
        if node is None:
            break
        scale = _scale_of(program, node)
        if scale is not None:
            factor *= scale[0]
            nodes.append(node)
            value = scale[1]
        elif node.op in _LAYOUT_OPS:
            value = node.inputs[0]
            hops += 1
        else:
            break
    return nodes, factor


def _nan_guard(program: Program, t: _Tables, probs: str) -> Optional[list[Node]]:
    """[isnan, where] when probs feed only `where(isnan(probs), 0, probs)`: the guard ONNX exporters
    write so rows whose every key is masked (-inf) give 0 instead of NaN, as sdpa does for such
    rows. The one difference is NaN coming from q or k themselves, which the guard turned into 0
    and sdpa passes on (NaN in, NaN out)."""
    graph = program.graph
    readers = t.users.get(probs, [])
    if len(readers) != 2 or probs in graph.outputs:
        return None
    isnan = next((n for n in readers if n.op == "aten" and n.attrs.get("target") == "aten.isnan.default"), None)
    where = next((n for n in readers if n.op == "aten" and n.attrs.get("target") == "aten.where.self"), None)
    if isnan is None or where is None or single_user(graph, isnan.outputs[0], t.users) is not where:
        return None
    condition, zero, kept = where.inputs
    if condition != isnan.outputs[0] or kept != probs or _scalar_constant(program, zero) != 0.0 \
            or where.attrs.get("args") != [{"$in": 0}, {"$in": 1}, {"$in": 2}] or where.attrs.get("kwargs"):
        return None
    if graph.values[where.outputs[0]] != graph.values[probs]:
        return None
    return [isnan, where]


def _is_last_two_swap(node: Node) -> bool:
    perm = node.attrs.get("perm", [])
    rank = len(perm)
    return node.op == "permute" and rank >= 2 and perm == [*range(rank - 2), rank - 1, rank - 2]


def _broadcasts_to(small: TensorSpec, big: TensorSpec) -> bool:
    """True if `small` broadcasts to exactly `big`'s shape."""
    if small.rank > big.rank:
        return False
    return all(s == 1 or same(s, b) for s, b in zip(small.shape[::-1], big.shape[::-1]))


def _same_shape(a: list, b: list) -> bool:
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def _unique_node_name(graph: Graph, base: str) -> str:
    taken = {n.name for n in graph.nodes}
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    return name


def _try_fuse(program: Program, t: _Tables, softmax: Node) -> bool:
    graph = program.graph
    values = graph.values
    producers = t.producers

    # ---- softmax over the last axis, probabilities -> (identity) -> matmul(probs, v)
    scores_in = softmax.inputs[0]
    rank = values[scores_in].rank
    if softmax.attrs.get("dim") not in (-1, rank - 1):
        return False
    chain = [softmax]
    probs = softmax.outputs[0]
    guard = _nan_guard(program, t, probs)
    if guard is not None:
        chain += guard
        probs = guard[-1].outputs[0]
    consumer = single_user(graph, probs, t.users)
    while consumer is not None and consumer.op == "identity":
        chain.append(consumer)
        probs = consumer.outputs[0]
        consumer = single_user(graph, probs, t.users)
    if consumer is None or consumer.op != "matmul" or consumer.attrs.get("post_ops") \
            or consumer.inputs[0] != probs or consumer.inputs[1] == probs:
        return False
    second = consumer
    v = second.inputs[1]

    # ---- optional additive mask in front of the softmax
    if single_user(graph, scores_in, t.users) is None:
        return False
    mask: Optional[str] = None
    scores = scores_in
    node = producers.get(scores)
    if node is not None and node.op == "add" and node.attrs.get("lhs_scalar") is None \
            and node.attrs.get("rhs_scalar") is None and len(node.inputs) == 2 and None not in node.inputs:
        for s_in, m_in in (node.inputs, node.inputs[::-1]):
            inner, _, _ = _strip_scales(program, t, s_in)
            head = producers.get(inner)
            if head is not None and head.op == "matmul" and single_user(graph, s_in, t.users) is not None:
                scores, mask = s_in, m_in
                chain.append(node)
                break
        if mask is None:
            return False
        # A float mask is added to the scores; it must not widen them (sdpa broadcasts the mask only),
        # and sdpa takes masks of rank 2 and up (a scalar added to every score leaves softmax unchanged,
        # but it stays an add rather than a special case here).
        if not dtypes.is_float(values[mask].dtype) or values[mask].rank < 2 \
                or not _broadcasts_to(values[mask], values[scores]):
            return False
        if values[node.outputs[0]] != values[scores]:
            return False

    # ---- optional scale on the scores, then the first matmul
    raw_scores, score_scales, factor = _strip_scales(program, t, scores)
    first = producers.get(raw_scores)
    if first is None or first.op != "matmul" or first.attrs.get("post_ops"):
        return False
    if single_user(graph, raw_scores, t.users) is None:
        return False
    chain += score_scales

    # ---- q: the first operand, minus any scalar factors on its way in
    q_read = first.inputs[0]
    q, _, _ = _strip_scales(program, t, q_read)
    q_scales, q_factor = _scales_behind(program, t, q_read)

    # ---- k: the first matmul reads k^T = permute(k) (possibly scaled)
    kt_read = first.inputs[1]
    kt, _, _ = _strip_scales(program, t, kt_read)
    transpose = producers.get(kt)
    if transpose is None or transpose.op != "permute":
        return False
    # k^T = permute(x, perm): k is x permuted by perm with its last two axes swapped back. Where
    # perm is not just that swap (ONNX exports write k^T = permute(k_heads, [0, 2, 3, 1])), the
    # permute itself is rewritten to produce k, so it must have no other reader.
    k_perm = None
    if not _is_last_two_swap(transpose):
        perm = transpose.attrs["perm"]
        if len(perm) < 2 or single_user(graph, kt, t.users) is None:
            return False
        k_perm = [*perm[:-2], perm[-1], perm[-2]]
    k_scales, k_factor = _scales_behind(program, t, kt_read)
    if q == kt or {id(n) for n in q_scales} & {id(n) for n in k_scales}:
        return False  # q and k share a scaled path (q @ q^T); folding would count it twice

    # ---- shapes: sdpa wants q [.., L, E], k [.., S, E], v [.., S, Ev] with equal batch dims
    k_spec = values[transpose.inputs[0]]
    if k_perm is not None:
        k_spec = k_spec.with_(shape=[k_spec.shape[i] for i in k_perm], memory_format="contiguous")
    q_spec, v_spec = values[q], values[v]
    if not (q_spec.rank == k_spec.rank == v_spec.rank >= 2):
        return False
    if not (_same_shape(q_spec.shape[:-2], k_spec.shape[:-2]) and _same_shape(q_spec.shape[:-2], v_spec.shape[:-2])):
        return False
    if not dtypes.is_float(q_spec.dtype) or not (q_spec.dtype == k_spec.dtype == v_spec.dtype):
        return False
    scale = factor * q_factor * k_factor
    attrs = get_op("sdpa").parse_attrs({"scale": scale, "is_causal": False})
    inferred = get_op("sdpa").infer([q_spec, k_spec, v_spec, None if mask is None else values[mask]], attrs)[0]
    out_spec = values[second.outputs[0]]
    if inferred.dtype != out_spec.dtype or not _same_shape(inferred.shape, out_spec.shape):
        return False

    # ---- rewrite: bypass folded scales, then put sdpa where the second matmul was
    for scale_node in q_scales + k_scales:
        _, data = _scale_of(program, scale_node)
        replace_uses(graph, scale_node.outputs[0], data)
    k = transpose.inputs[0]  # read after the bypass: a scale right behind the permute is gone
    if k_perm is not None:  # the permute now makes k itself
        transpose.attrs["perm"] = k_perm
        values[kt] = k_spec
        k = kt
    doomed = {id(n) for n in [first, second, *chain, *q_scales, *k_scales]}
    sdpa = Node(name=_unique_node_name(graph, "sdpa"), op="sdpa", inputs=[q, k, v, mask],
                outputs=list(second.outputs), attrs=attrs.model_dump(), source=second.source)
    graph.nodes = [sdpa if n is second else n for n in graph.nodes if n is second or id(n) not in doomed]
    # The k^T permute is dead now unless something else reads it.
    if k_perm is None and kt not in graph.outputs and not any(kt in n.inputs for n in graph.nodes):
        graph.nodes = [n for n in graph.nodes if n is not transpose]
    return True


@register_pass("fuse_attention", "replace explicit matmul/softmax/matmul attention with one sdpa node")
def fuse_attention(program: Program, options: PassOptions) -> dict[str, int]:
    fused = 0
    tables: Optional[_Tables] = None
    for node in list(program.graph.nodes):
        if node.op != "softmax":
            continue
        if tables is None:
            tables = _Tables(program.graph)
        if _try_fuse(program, tables, node):
            fused += 1
            tables = None  # the graph changed; rebuild before the next match
    if fused:
        program.prune()
    return {"attention_fused": fused}
