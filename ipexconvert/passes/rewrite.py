"""Helpers passes share for editing graphs (not a pass)."""
from __future__ import annotations

from typing import Optional

from ..ir import Graph, Node, Program


def replace_uses(graph: Graph, old: str, new: str) -> None:
    """Point every reader of `old` (nodes and graph outputs) at `new`."""
    for node in graph.nodes:
        node.inputs = [new if i == old else i for i in node.inputs]
    graph.outputs = [new if o == old else o for o in graph.outputs]


def single_user(graph: Graph, value: str, users: Optional[dict[str, list[Node]]] = None) -> Optional[Node]:
    """The only node reading `value`, if exactly one does and it is not a graph output."""
    users = users if users is not None else graph.users()
    readers = users.get(value, [])
    if len(readers) != 1 or value in graph.outputs:
        return None
    return readers[0]


def last_dim_slice(node: Optional[Node]) -> Optional[tuple[str, int, int]]:
    """(source, start, end) of an `aten.slice.Tensor` of the last dim (-1) with unit step, else None."""
    if node is None or node.op != "aten" or node.attrs.get("target") != "aten.slice.Tensor":
        return None
    args = node.attrs.get("args", [])
    if len(args) not in (4, 5) or args[0] != {"$in": 0} or args[1] != -1 or (len(args) == 5 and args[4] != 1):
        return None
    if not all(isinstance(a, int) and not isinstance(a, bool) for a in args[2:4]):
        return None
    return node.inputs[0], args[2], args[3]


def quantize_params(node: Node) -> tuple:
    """(scale, zero point, dtype, multiplier inputs) of a quantize node: two with equal params make
    the same codes of the same value, so one can stand for both."""
    a = node.attrs
    return a["scale"], a.get("zero_point", 0), a.get("dtype", "uint8"), tuple(node.inputs[1:])


def absorb_readers(graph: Graph, readers: list[Node], value: str, doomed: set[str]) -> None:
    """The readers' work now happens where `value` is made: their outputs' users read `value`
    instead, and the readers are marked for remove_nodes."""
    for r in readers:
        replace_uses(graph, r.outputs[0], value)
        doomed.add(r.name)


def remove_nodes(program: Program, doomed: set[str]) -> None:
    program.graph.nodes = [n for n in program.graph.nodes if n.name not in doomed]
    program.prune()
