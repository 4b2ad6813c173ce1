"""matmul_to_linear: x @ W with a constant 2-D W becomes linear(x, W^T), and an add of a constant
[out] vector right after it becomes that linear's bias.

ONNX exporters write every nn.Linear as MatMul + Add; as linears with a bias they fuse post-ops,
merge (Q/K/V) and pack like the linears of a PyTorch model. prepack runs the same rewrite at
the end for matmuls that appear later.
"""
from __future__ import annotations

from ..ir import Node, Program
from ..ir.postops import shift_operands
from .base import PassOptions, register_pass
from .rewrite import remove_nodes, single_user

_FLOATS = {"float32", "bfloat16"}


def rewritable_matmul(program: Program, node: Node) -> bool:
    """matmul(a [..., m, k], constant b [k, n]) with a and b of one float dtype."""
    if node.op != "matmul":
        return False
    values = program.graph.values
    a, b = node.inputs[0], node.inputs[1]
    return (a is not None and program.is_constant(b) and values[b].rank == 2 and values[a].rank >= 2
            and values[a].dtype in _FLOATS and values[a].dtype == values[b].dtype)


def matmuls_to_linears(program: Program) -> int:
    """Rewrite every rewritable matmul; b is transposed in place when these matmuls are its only readers."""
    graph = program.graph
    matmuls = [n for n in graph.nodes if rewritable_matmul(program, n)]
    rewritten_reads: dict[str, int] = {}
    for n in matmuls:
        rewritten_reads[n.inputs[1]] = rewritten_reads.get(n.inputs[1], 0) + 1
    all_reads: dict[str, int] = {}
    for n in graph.nodes:
        for v in n.inputs:
            if v in rewritten_reads:
                all_reads[v] = all_reads.get(v, 0) + 1
    transposed: dict[str, str] = {}  # b -> the constant holding b^T
    for b, reads in rewritten_reads.items():
        tensor = program.weights[b].t().contiguous()
        if reads == all_reads[b] and b not in graph.outputs:
            program.set_constant(b, tensor)
            transposed[b] = b
        else:
            transposed[b] = program.add_constant(f"{b}_t", tensor)
    for n in matmuls:
        # linear's inputs are [x, weight, bias, operands...]: binary post-op operands move up one slot.
        post_ops = shift_operands(n.attrs.get("post_ops", []), 1)
        n.op = "linear"
        n.inputs = [n.inputs[0], transposed[n.inputs[1]], None, *n.inputs[2:]]
        n.attrs = {"post_ops": post_ops}
    return len(matmuls)


def _bias_of(program: Program, add: Node, out: str, width) -> str | None:
    """The constant [width] vector `add` adds to `out` (either operand order), if that is all it does."""
    if add.op != "add" or len(add.inputs) != 2 or add.attrs.get("lhs_scalar") is not None \
            or add.attrs.get("rhs_scalar") is not None or add.attrs.get("post_ops"):
        return None
    other = add.inputs[1] if add.inputs[0] == out else add.inputs[0]
    values = program.graph.values
    if other == out or not program.is_constant(other) or values[other].shape != [width] \
            or values[other].dtype != values[out].dtype or values[add.outputs[0]] != values[out]:
        return None
    return other


def absorb_biases(program: Program) -> int:
    graph = program.graph
    users, doomed = graph.users(), set()
    for n in graph.nodes:
        if n.op != "linear" or len(n.inputs) != 3 or n.inputs[2] is not None or n.attrs.get("post_ops"):
            continue
        out = n.outputs[0]
        add = single_user(graph, out, users)
        bias = _bias_of(program, add, out, graph.values[n.inputs[1]].shape[0]) if add is not None else None
        if bias is None:
            continue
        n.inputs[2] = bias
        n.outputs = [add.outputs[0]]  # `out` had no reader but the add
        doomed.add(add.name)
    remove_nodes(program, doomed)
    return len(doomed)


def bias_post_ops_to_bias(program: Program) -> int:
    """A linear whose first post-op adds a constant [out] vector (an addmm's bias) takes it as its bias."""
    values, moved = program.graph.values, 0
    for n in program.graph.nodes:
        post_ops = n.attrs.get("post_ops") or []
        if n.op != "linear" or len(n.inputs) < 3 or n.inputs[2] is not None or not post_ops:
            continue
        first = post_ops[0]
        operand = n.inputs[first["operand"]] if first.get("kind") == "add" and first.get("operand") is not None else None
        out = values[n.outputs[0]]
        if operand is None or not program.is_constant(operand) or values[operand].shape != [values[n.inputs[1]].shape[0]] \
                or values[operand].dtype != out.dtype or n.inputs.count(operand) != 1:
            continue
        slot = first["operand"]
        n.inputs = [*n.inputs[:2], operand, *n.inputs[3:slot], *n.inputs[slot + 1:]]
        rest = [{**p, "operand": p["operand"] - 1} if p.get("operand") is not None and p["operand"] > slot else dict(p)
                for p in post_ops[1:]]
        n.attrs = {**n.attrs, "post_ops": rest}
        moved += 1
    return moved


@register_pass("matmul_to_linear", "x @ constant W -> linear(x, W^T); a following add of a constant [out] -> its bias")
def matmul_to_linear(program: Program, options: PassOptions) -> dict[str, int]:
    rewritten = matmuls_to_linears(program)
    return {"matmul_to_linear": rewritten, "biases_absorbed": absorb_biases(program) + bias_post_ops_to_bias(program)}
