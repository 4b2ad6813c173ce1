"""The GPU backend's load-time rewrite: a rms_norm or silu_mul whose value only a woq_linear reads (as its input)
becomes that layer's prologue, one prologue_woq_linear node (ir/ops/prologue_woq_linear.py), so one kernel
computes both and the normalized or gated row never goes to memory. A decoder layer has three such pairs (the
attention's and the MLP's input norms, the gate before the down projection): at batch 1 each is a ~2 us kernel
of its own, and the GEMV reads its input anyway. The artifact keeps the plain ops; a CPU runs them as written."""
from __future__ import annotations

from typing import Optional

from ...ir import Program
from ...ir.graph import Graph, Node
from ...ir.postops import shift_operands


class SoleReaders:
    """Which node makes a value that nothing but one node reads (once), and is no graph output: what each load-time
    rewrite of this backend (prologues, epilogues.py, attention_prologues.py) may absorb into its reader."""

    def __init__(self, graph: Graph):
        self.producers, self.users, self.outputs = graph.producers(), graph.users(), set(graph.outputs)

    def producer(self, value: str, ops: tuple[str, ...]) -> Optional[Node]:
        """The node (of one of `ops`) that makes `value`, when one reader alone reads it; else None."""
        node = self.producers.get(value)
        readers = self.users.get(value, [])
        if node is None or node.op not in ops or value in self.outputs or len(readers) != 1:  # (read twice: 2)
            return None
        return node


def fuse_prologues(program: Program) -> Program:
    """A copy of the program with the pairs joined (the weights shared); the program itself when none is found."""
    graph = program.graph
    sole = SoleReaders(graph)
    joined: dict[str, Node] = {}  # woq_linear node name -> its replacement
    absorbed: set[str] = set()  # the producers' node names
    for node in graph.nodes:
        if node.op != "woq_linear":
            continue
        producer = sole.producer(node.inputs[0], ("rms_norm", "silu_mul"))
        if producer is None:
            continue
        if producer.op == "rms_norm" and len(producer.attrs.get("normalized_shape", [])) == 1:
            norm_weight, extra = producer.inputs[1], {"prologue": "rms_norm", "eps": producer.attrs.get("eps")}
        elif producer.op == "silu_mul" and len(producer.inputs) == 1:
            norm_weight, extra = None, {"prologue": "silu_mul"}
        else:
            continue
        attrs = {**node.attrs, **extra, "post_ops": shift_operands(node.attrs.get("post_ops", []), 1)}
        joined[node.name] = Node(name=node.name, op="prologue_woq_linear", outputs=node.outputs, attrs=attrs,
                                 inputs=[producer.inputs[0], *node.inputs[1:5], norm_weight, *node.inputs[5:]],
                                 source=node.source)
        absorbed.add(producer.name)
    return joined_program(program, joined, absorbed)


def joined_program(program: Program, joined: dict[str, Node], absorbed: set[str]) -> Program:
    """A copy of the program (the weights shared) with each node named in `joined` replaced by its joined node and
    the `absorbed` nodes gone, unused values pruned; the program itself when nothing was joined."""
    if not joined:
        return program
    fused = Program(program.graph.model_copy(deep=True), program.weights)
    fused.graph.nodes = [joined.get(n.name, n) for n in program.graph.nodes if n.name not in absorbed]
    fused.prune()
    return fused
