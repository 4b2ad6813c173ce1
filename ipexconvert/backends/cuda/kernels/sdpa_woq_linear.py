"""sdpa_woq_linear on the GPU (made at load by backends/cuda/attention_prologues.py). Factory:

triton: one query row (a decode step of one sequence) in two kernels: attention_rows stores its key splits' partial
sums and nothing else (no ticket, no combining program: sdpa.rows_launcher with partials), then the output
projection's woq_rows combines them as it reads its input (PROLOGUE 3: each word's head's split weights once a run,
the values divided as the attention would and rounded to its dtype), so the attention's output never goes to
memory. Anything else (a prompt, a batch of sequences, inputs either kernel would not take): sdpa's kernel, the
heads merged, then woq_linear's kernel, as the nodes it replaces run."""
from __future__ import annotations

from typing import Optional

import torch

from ....ir.ops._kv_int8 import head_dim_of
from ....ir.ops.sdpa_woq_linear import OWN_INPUTS, woq_attrs
from ....ir.spec import TensorSpec
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from ._triton import triton_missing
from .sdpa import rows_launcher, triton_sdpa
from .woq_linear import triton_woq_linear, woq_rows_launcher


def fits(head_dim: int, bits: int, activations: str) -> bool:
    """Whether the fused path can take such a layer: float activations, and a word of codes inside one head."""
    return activations == "float" and head_dim % (32 // bits) == 0


@register_kernel("cuda", "sdpa_woq_linear", runs_at=triton_missing)
def triton_sdpa_woq_linear(ctx: NodeContext) -> Optional[Kernel]:
    """One query row: attention_rows leaves its key splits' partials and the output projection's woq_rows combines
    them as it reads them (no ticket, no combining program); otherwise sdpa's and woq_linear's kernels in turn."""
    attrs = ctx.attrs
    q_spec, v_spec, codes_spec = ctx.input_specs[0], ctx.input_specs[2], ctx.input_specs[4]
    k = codes_spec.shape[1] * (2 if attrs.bits == 4 else 1)  # the projection's input features: heads * head dim
    woq = woq_attrs(attrs)
    x_spec = TensorSpec(dtype=q_spec.dtype, shape=[*ctx.output_specs[0].shape[:-1], k])  # the heads merged
    woq_ctx = NodeContext(op="woq_linear", attrs=woq, constants=(None, *ctx.constants[4:]),
                          input_specs=(x_spec, *ctx.input_specs[4:]), output_specs=ctx.output_specs,
                          device=ctx.device, isa=ctx.isa)
    sdpa_ctx = NodeContext(op="sdpa", attrs=attrs.attention, constants=ctx.constants[:4],
                           input_specs=ctx.input_specs[:4], output_specs=(None,), device=ctx.device, isa=ctx.isa)
    attention, projection = triton_sdpa(sdpa_ctx), triton_woq_linear(woq_ctx)
    if attention is None or projection is None:
        return None
    head_dim = head_dim_of(v_spec.dtype, v_spec.shape[-1])
    fused = isinstance(head_dim, int) and fits(head_dim, attrs.bits, attrs.activations)
    launcher = woq_rows_launcher(woq_ctx, "attention") if fused else None
    launch_partials = rows_launcher(attrs.attention)

    def separately(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        y = attention.fn(inputs[:4], dims)
        b, heads, length, dv = y.shape
        merged = y.transpose(1, 2).reshape(b, length, heads * dv)
        return projection.fn([merged, *inputs[4:]], dims)

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        q, k, v, mask = inputs[:4]
        if launcher is None or q.dim() != 4 or q.shape[0] != 1 or q.shape[2] != 1:
            return separately(inputs, dims)
        partials = launch_partials(q, k, v, mask, partials=True)
        if partials is None:
            return separately(inputs, dims)
        return launcher[0](q, 1, inputs[OWN_INPUTS:], None, partials)

    return Kernel(run, "triton:sdpa_woq_linear_rows", frozenset(range(4, OWN_INPUTS)), fresh_output=True)
