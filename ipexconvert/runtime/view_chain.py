"""View chains: runs of view ops (reshape, permute, slice, ...) executed as one as_strided call.

A transformer layer reshapes and transposes q, k, v and the attention output about a dozen
times; each op costs a kernel call that re-resolves its symbolic shape. A chain of view nodes,
each reading only the previous one, becomes one executor step. Its first call for a given input
geometry (shape, strides, dims) runs the ops and, if the result is a view of the input's memory,
remembers the result's size, strides and offset; later calls with that geometry make the view
directly. A reshape that had to copy is never remembered: it runs as written every time.
"""
from __future__ import annotations

import json
import re
from typing import Callable, Iterable, Optional

import torch

# Ops whose reference returns a view of the input where torch can (reshape falls back to a copy).
VIEW_OPS = {"reshape", "permute", "flatten"}
VIEW_ATEN_TARGETS = {"aten.slice.Tensor", "aten.unsqueeze.default", "aten.squeeze.dim", "aten.squeeze.dims",
                     "aten.expand.default", "aten.select.int", "aten.alias.default"}
_CACHE_LIMIT = 64  # distinct input geometries remembered per chain (dynamic shapes stay bounded)


def is_view_node(op: str, attrs: dict, inputs: list) -> bool:
    """A node that reads one tensor and only re-describes its memory."""
    if sum(v is not None for v in inputs) != 1 or inputs[0] is None:
        return False
    if op in VIEW_OPS:
        return True
    if op != "aten" or attrs.get("target") not in VIEW_ATEN_TARGETS:
        return False
    tensor_args = [a for a in attrs.get("args", []) if isinstance(a, dict) and "$in" in a]
    return tensor_args == [{"$in": 0}]


def dims_named(attrs: list, dim_names: Iterable[str]) -> tuple[str, ...]:
    """The dynamic dims whose names appear in these attrs (as a shape entry or inside a symbolic expression):
    all a view chain's geometry can depend on besides its input's."""
    text = json.dumps(attrs)
    return tuple(sorted(name for name in dim_names if re.search(rf"\b{re.escape(name)}\b", text)))


def shares_memory(view: torch.Tensor, base: torch.Tensor) -> bool:
    """Whether view lives in base's memory (a view of it, not a copy)."""
    return view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()


class ViewChain:
    """The kernel of one collapsed chain: fns are the members' kernels in order; `uses` the dynamic dims
    their attrs name. A decoder's cache length changes every token, and a chain that does not name it
    must not miss its remembered geometry every token."""

    def __init__(self, fns: list[Callable], uses: tuple[str, ...]):
        self.fns = fns
        self.uses = uses
        self.geometry: dict[tuple, Optional[tuple]] = {}

    def __call__(self, inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        key = (x.shape, x.stride(), *(dims.get(name) for name in self.uses))
        known = self.geometry.get(key, False)
        if known:
            size, stride, offset = known
            return x.as_strided(size, stride, x.storage_offset() + offset)
        y = x
        for fn in self.fns:
            y = fn([y], dims)
        if known is False:  # first time for this geometry: remember it if y is a view of x
            if len(self.geometry) >= _CACHE_LIMIT:
                self.geometry.clear()
            is_view = y.dtype == x.dtype and shares_memory(y, x)
            self.geometry[key] = (tuple(y.shape), y.stride(), y.storage_offset() - x.storage_offset()) if is_view else None
        return y


def find_chains(nodes: list, graph_outputs: set[str], constants: set[str], readers: dict[str, int]) -> dict[int, list[int]]:
    """Chains of view nodes: {index of the last member: indices of all members, in order}.
    A member after the first reads the previous member's output, which nothing else reads.
    Views of constants stay apart (their kernels may hold the constant themselves)."""
    producer = {}
    chain_of: dict[int, list[int]] = {}
    for i, node in enumerate(nodes):
        if not is_view_node(node.op, node.attrs, node.inputs) or node.inputs[0] in constants:
            continue
        source = node.inputs[0]
        j = producer.get(source)
        if j is not None and readers.get(source) == 1 and source not in graph_outputs:
            chain = chain_of.pop(j)
            chain.append(i)
        else:
            chain = [i]
        chain_of[i] = chain
        producer[node.outputs[0]] = i
    return chain_of
