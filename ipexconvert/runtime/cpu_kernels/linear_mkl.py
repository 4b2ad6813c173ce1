"""float32 linear through MKL's packed sgemm (torch.ops.mkl._mkl_linear), as Inductor's freezing does.

MKL packs the weight for one row count (batch x seq rows of x). _mkl_linear runs the packed GEMM
when x has that many rows and otherwise falls back to a plain GEMM with the original weight, so
the kernel keeps both: the packed copy costs about 2.2x the float32 weight in memory. The row
count is the node's own when its shapes are static; with dynamic dims it is the first one the
kernel sees (packed on that call, once), which in a deployment is the steady shape. Measured at
BERT-base shapes (benchmarks/README.md): 15-20% faster than F.linear at 128 rows, 2.5x at 1 row.

Post-ops run in torch after the call (MKL fuses none), as in the reference. Used on Intel CPUs only
(`_common.mkl_runs_float32_linear`): elsewhere linear_onednn.py runs float32 too.

_mkl_linear checks neither the bias length nor x's feature count against the weight (a bias of 0
elements segfaults, one of 1 element is read 63 floats past its end), so this kernel checks both, at
build and on every call, although the loader's shape rules (ir/validate.py) already refuse such nodes.
"""
from __future__ import annotations

from math import prod
from typing import Optional

import torch

from ...errors import ArtifactError
from ..kernels import Kernel, NodeContext, register_kernel
from . import probe
from ._common import consumed, constant_weight_and_bias, enabled, mkl_runs_float32_linear, node_dtype, with_tail


@register_kernel("cpu", "linear")
def linear_mkl(ctx: NodeContext) -> Optional[Kernel]:
    if ctx.device != "cpu" or not enabled() or node_dtype(ctx) != "float32" or not mkl_runs_float32_linear():
        return None
    params = constant_weight_and_bias(ctx)
    x_spec = ctx.input_specs[0]
    if params is None or x_spec.rank < 2 or params[0].dim() != 2:
        return None
    mkl_linear = probe.op_for("mkl._mkl_linear", "float32")
    pack = probe.op_for("mkl._mkl_reorder_linear_weight", "float32")
    if mkl_linear is None or pack is None:
        return None
    weight, bias = params
    weight = weight.contiguous()
    bias = None if bias is None else bias.float().contiguous()
    out_features, in_features = weight.shape
    if in_features == 0:
        return None  # nothing to multiply; torch's linear handles it
    if bias is not None and tuple(bias.shape) != (out_features,):
        raise _mismatch(ctx, f"a bias of shape {list(bias.shape)} for a weight {list(weight.shape)}")
    lead = x_spec.shape[:-1]
    # [row count, packed weight]; filled at load for static rows, else on the first call.
    packed: list = [None, None]
    if all(isinstance(d, int) for d in lead):
        packed[:] = [prod(lead), pack(weight, prod(lead))]

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        if x.dim() < 2 or x.shape[-1] != in_features or x.dtype != torch.float32:
            raise _mismatch(ctx, f"an input {x.dtype} {list(x.shape)} for a weight {list(weight.shape)}")
        rows = x.numel() // x.shape[-1]
        if packed[1] is None:
            packed[:] = [rows, pack(weight, rows)]
        if rows != packed[0]:
            return torch.nn.functional.linear(x, weight, bias)
        return mkl_linear(x, packed[1], weight, bias, rows)

    return Kernel(with_tail(run, tuple(ctx.attrs.post_ops)), "mkl:linear", consumed(ctx))


def _mismatch(ctx: NodeContext, what: str) -> ArtifactError:
    return ArtifactError(f"a float32 linear node got {what}, which MKL cannot run (the graph does not fit its weights)",
                         "re-create the artifact with `ipexconvert optimize`; this graph was not written by it or was edited")
