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


def remove_nodes(program: Program, doomed: set[str]) -> None:
    program.graph.nodes = [n for n in program.graph.nodes if n.name not in doomed]
    program.prune()
