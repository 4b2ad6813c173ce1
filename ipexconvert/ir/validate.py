"""Per-node consistency of an artifact's graph, checked at load (artifact.read_artifact: after graph.check_graph
and the check of the constants' tensors against their specs).

check_graph establishes that names, order and attrs are well formed; this module checks that each node is
something its op can run, from the specs alone, before any kernel is built:

- arity: the node reads as many inputs as its op takes (OpDef.input_arity), None only where an input is
  optional (a missing bias), and, for ops with post-ops, the inputs after the op's own are exactly the
  binary post-ops' operands (an operand pointing at x, the weight or the bias is refused: the kernels
  consume the weight and would hand apply_post_ops None);
- the op's shape rule (OpDef.infer) accepts the declared input specs (weights of the right shape, ranks,
  dtypes, broadcastable operands) and gives the declared outputs: same count, dtype, rank and sizes
  (ints equal, expressions equal by dims.same). Memory formats are not compared: a layout is how a kernel
  stores a value, not what it holds, and every kernel accepts either (channels_last only on 4-D values,
  which check_graph ensures);
- `aten` nodes, whose rule runs the op on meta tensors and so needs sizes: with symbolic shapes they are
  run at one sample point of the dims (distinct small sizes in each dim's range) and compared there;
- binary post-op operands broadcast to the output without growing it;
- the output budget: no node output may be larger than aten_allowlist.max_tensor_bytes() (2 GiB unless
  IPEXCONVERT_MAX_TENSOR_BYTES says otherwise, the aten ops' budget) for static shapes, or, with symbolic
  ones, for the smallest call the signature allows (every dim at its min). Attrs are what make a size
  explode (conv padding 100000: 640 GB); sizes evaluated at the dims' max would also refuse legitimate
  artifacts (a causal LM's logits at batch 64 x 2048 positions are 16 GB), and what a call at a larger size
  allocates follows from the inputs the caller chose.

A graph the frontend and passes wrote passes all of this (tests/ir/test_validate.py converts the examples).
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from ..errors import ArtifactError, IpexConvertError
from . import dtypes
from .dims import DimEntry, resolve_shape, same
from .graph import Graph, Node
from .opdef import Arity, OpDef, get_op
from .spec import TensorSpec

_RECREATE = "re-create the artifact with `ipexconvert optimize`; this graph was not written by it or was edited"
_UPGRADE = "if a newer ipexconvert wrote this artifact, upgrade; otherwise re-create it with `ipexconvert optimize`"
# Errors a shape rule may raise on specs it was not written for: all mean "these inputs do not fit the op".
_RULE_ERRORS = (ValueError, TypeError, IndexError, KeyError, ArithmeticError, RuntimeError, AttributeError)
_PRIMES = (3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47)


class NodeError(ArtifactError):
    """A node that does not fit its op (the message names the node, its op and the mismatch)."""


def check_nodes(graph: Graph) -> None:
    """Raise NodeError for the first node that does not fit its op (see the module docstring). Assumes the
    structural checks of graph.check_graph passed (every name has a spec, attrs parse, operands in range)."""
    from .ops.aten_allowlist import max_tensor_bytes

    point = sample_point(graph)
    smallest = {name: rng.min for name, rng in graph.dims.items()}
    budget = max_tensor_bytes()
    for node in graph.nodes:
        check_node(graph, node, point, smallest, budget)


def sample_point(graph: Graph) -> dict[str, int]:
    """One size per dynamic dim inside its range, distinct where the ranges allow (so that a size written
    for the wrong dim shows), used to run ops whose rule needs numbers."""
    return {name: min(max(_PRIMES[i % len(_PRIMES)], rng.min), rng.max) for i, (name, rng) in enumerate(sorted(graph.dims.items()))}


def check_node(graph: Graph, node: Node, point: dict[str, int], smallest: dict[str, int], budget: int) -> None:
    op = get_op(node.op)
    attrs = op.parse_attrs(node.attrs)
    where = f"node {node.name} ({node.op})"
    if node.op == "aten":  # a refused target says more than any count or shape
        from .ops.aten import refusal_reason

        reason = refusal_reason(attrs.target)
        if reason is not None:
            raise NodeError(f"{where} cannot be run: artifact names {attrs.target}, which is refused: {reason}", _UPGRADE)
    inputs = [None if v is None else graph.values[v] for v in node.inputs]
    outputs = [graph.values[v] for v in node.outputs]
    own = _check_arity(where, op, op.input_arity(attrs), node, attrs)
    inferred = _infer(where, op, inputs[:own] if own < len(inputs) else inputs, attrs)
    if inferred is not None:
        _compare(where, node.outputs, outputs, inferred, lambda shape: shape)
    elif node.op == "aten" and graph.dims:
        at_point = _infer(where, op, inputs, attrs, point)
        if at_point is not None:
            _compare(where, node.outputs, outputs, at_point, lambda shape: _resolve(where, shape, point),
                     f" at {', '.join(f'{k}={v}' for k, v in point.items())}")
    for post_op in getattr(attrs, "post_ops", ()):
        if post_op.operand is not None:
            shape = outputs[0].shape if inferred is None else inferred[0].shape
            _check_operand(where, post_op, inputs[post_op.operand], shape)
    for name, spec in zip(node.outputs, outputs):
        _check_budget(where, name, spec, smallest, budget)


INCONSISTENT = "the graph is inconsistent: "  # how a node that does not fit its op is reported


def _fail(where: str, problem: str) -> NodeError:
    return NodeError(f"{INCONSISTENT}{where} {problem}", _RECREATE)


def _check_arity(where: str, op: type[OpDef], arity: Arity, node: Node, attrs: Any) -> int:
    """Raise for a wrong input count, a missing required input or post-op operands outside the extra inputs;
    returns how many inputs are the op's own (the rest are post-op operands)."""
    n = len(node.inputs)
    takes = (f"{arity.min}" if arity.max == arity.min else f"{arity.min} to {arity.max}" if arity.max is not None
             else f"at least {arity.min}")
    if n < arity.min or (arity.max is not None and n > arity.max and not arity.post_op_operands):
        raise _fail(where, f"reads {n} inputs, but {op.name} takes {takes}"
                    + (" (then one per binary post-op operand)" if arity.post_op_operands else ""))
    own = n if arity.max is None else min(n, arity.max)
    for i in range(own):
        if node.inputs[i] is None and i not in arity.optional:
            raise _fail(where, f"has no input {i}, which {op.name} needs (inputs {node.inputs})")
    if arity.post_op_operands:
        operands = {p.operand for p in getattr(attrs, "post_ops", ()) if p.operand is not None}
        for index in sorted(operands):
            if index < own:
                raise _fail(where, f"has a post-op operand {index}, one of the op's own {own} inputs (x, weight, "
                            f"...): operands are the inputs after them")
        extra = set(range(own, n)) - operands
        if extra:
            raise _fail(where, f"reads input(s) {sorted(extra)} that neither the op nor a post-op uses")
    return own


def _infer(where: str, op: type[OpDef], inputs: list[Optional[TensorSpec]], attrs: Any,
           point: Optional[dict[str, int]] = None) -> Optional[list[TensorSpec]]:
    """The op's output specs for these inputs (at `point`, for aten), None when the rule cannot tell."""
    try:
        return op.infer(inputs, attrs) if point is None else op.infer(inputs, attrs, point)
    except NotImplementedError:
        return None
    except IpexConvertError as e:  # an aten op's argument check (output budget ...), a dim expression without a size
        raise NodeError(f"{where} cannot be run: {e.problem}", e.fix) from None
    except _RULE_ERRORS as e:
        raise _fail(where, f"cannot be run on its inputs ({_describe(inputs)}): {' '.join(str(e).split())[:300]}") from None


def _compare(where: str, names: Sequence[str], declared: Sequence[TensorSpec], inferred: Sequence[TensorSpec],
             shape_of, at: str = "") -> None:
    if len(inferred) != len(declared):
        raise _fail(where, f"declares {len(declared)} output(s), but the op returns {len(inferred)}{at}")
    for name, want, got in zip(names, inferred, declared):
        shape = shape_of(got.shape)
        if got.dtype != want.dtype or len(shape) != len(want.shape) or not all(_same(a, b) for a, b in zip(shape, want.shape)):
            raise _fail(where, f"declares output {name} as {got.describe()}, but its inputs give "
                        f"{want.with_(memory_format=got.memory_format).describe()}{at}")


def _same(a: DimEntry, b: DimEntry) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    try:
        return same(a, b)
    except ValueError:  # an expression sympy cannot compare (division by zero): not provably the same
        return False


def _check_operand(where: str, post_op, operand: Optional[TensorSpec], shape: Sequence[DimEntry]) -> None:
    from .dims import broadcast

    try:
        ok = operand.rank <= len(shape) and all(_same(a, b) for a, b in zip(broadcast(shape, operand.shape), shape))
    except ValueError:
        ok = False
    if not ok:
        raise _fail(where, f"has a {post_op.kind} post-op whose operand {operand.describe()} does not broadcast to "
                    f"the output {list(shape)}")


def _resolve(where: str, shape: Sequence[DimEntry], dims: dict[str, int]) -> list[int]:
    try:
        return resolve_shape(shape, dims)
    except (IpexConvertError, ValueError) as e:
        raise _fail(where, f"has an output of shape {list(shape)}, which has no size at {dims}: {e}") from None


def _check_budget(where: str, name: str, spec: TensorSpec, smallest: dict[str, int], budget: int) -> None:
    from .ops.aten_allowlist import MAX_TENSOR_BYTES_ENV

    shape = _resolve(where, spec.shape, smallest)
    nbytes = math.prod(shape) * dtypes.to_torch(spec.dtype).itemsize
    if nbytes > budget:
        smallest_call = "" if all(isinstance(d, int) for d in spec.shape) else " for the smallest inputs the model takes"
        raise NodeError(f"{where} makes {name} of shape {shape} ({nbytes} bytes){smallest_call}, over the "
                        f"{budget}-byte limit per tensor",
                        f"if the model really makes tensors this large, raise {MAX_TENSOR_BYTES_ENV} (now {budget} "
                        f"bytes); otherwise {_RECREATE}")


def _describe(specs: Sequence[Optional[TensorSpec]]) -> str:
    return ", ".join("none" if s is None else s.describe() for s in specs)
