"""cache_in_compute_dtype: a decoder's KV cache crosses the signature in the dtype it is computed in.

to_bf16 keeps every graph input and output float32, so a bf16 decoder's cache makes three copies of
itself per layer and token: the float32 past cast to bf16, the cat appending the new positions, and
the present cast back to float32. The cache is state that generate() hands from one call to the next,
not a user-facing tensor, so it can stay bf16 across calls (and takes half the memory). Matched per
layer tensor (nothing else may read the values in between):

    past (float32 input) -> to_dtype(bf16) -> cat(..., dim -2 / 2) -> to_dtype(float32) -> present (output)

becomes `past (bf16 input) -> cat -> present (bf16 output)`: the input and output keep their names.
generate() makes its empty caches in the signature's dtype; the accuracy check gives float inputs in
the dtype the signature asks for.

Counts: cache_tensors.
"""
from __future__ import annotations

from typing import Optional

from ..ir import Node, Program
from .base import PassOptions, register_pass
from .rewrite import replace_uses, single_user

_CAT = "aten.cat.default"


def _cast(node: Optional[Node], dtype: Optional[str] = None) -> bool:
    return node is not None and node.op == "to_dtype" and (dtype is None or node.attrs["dtype"] == dtype)


@register_pass("cache_in_compute_dtype", "a decoder's KV cache inputs/outputs in the compute dtype (no casts of the "
               "whole cache every token)")
def cache_in_compute_dtype(program: Program, options: PassOptions) -> dict[str, int]:
    graph = program.graph
    changed = 0
    for past in list(graph.inputs):
        users, producers = graph.users(), graph.producers()
        spec = graph.values[past]
        cast_in = single_user(graph, past, users)
        if spec.dtype != "float32" or spec.rank != 4 or not _cast(cast_in) or cast_in.attrs["dtype"] not in ("bfloat16", "float16"):
            continue
        dtype, cast_value = cast_in.attrs["dtype"], cast_in.outputs[0]
        cat = single_user(graph, cast_value, users)
        if cat is None or cat.op != "aten" or cat.attrs.get("target") != _CAT or cat.inputs[0] != cast_value \
                or cat.attrs["args"][1] not in (2, -2):
            continue
        grown = cat.outputs[0]
        cast_out = next((u for u in users.get(grown, []) if _cast(u, "float32") and u.outputs[0] in graph.outputs), None)
        if cast_out is None or grown in graph.outputs or producers.get(grown) is not cat:
            continue
        present = cast_out.outputs[0]
        # The past enters as the compute dtype and the cat's result is the present output itself.
        graph.values[past] = spec.with_(dtype=dtype)
        replace_uses(graph, cast_value, past)
        graph.values[present] = graph.values[grown]
        cat.outputs = [present]
        graph.nodes = [n for n in graph.nodes if n is not cast_in and n is not cast_out]
        replace_uses(graph, grown, present)
        changed += 1
    if changed:
        program.prune()
    return {"cache_tensors": changed}
