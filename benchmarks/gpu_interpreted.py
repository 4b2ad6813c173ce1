"""The GPU backend's Triton kernels on a machine without a GPU: each factory run under Triton's interpreter
(TRITON_INTERPRET=1, CPU tensors, numpy arithmetic) against its op's reference, to check a kernel's arithmetic
before a GPU is at hand. Not a timing (the interpreter is slow) and not the GPU's code generation (compile for
sm_90 with benchmarks/gpu_woq_sass.py for that); bf16 tensor-core products (tl.dot) are not right under the
interpreter, so attention runs in float32 here. Needs Triton, e.g. `pip install --target /tmp/tripkg triton`:

    TRITON_INTERPRET=1 PYTHONPATH=/tmp/tripkg python benchmarks/gpu_interpreted.py
"""
from __future__ import annotations

import os
import sys

import torch

from ipexconvert.backends.cuda.kernels import sdpa, sdpa_woq_linear, woq_linear, woq_linear_rope_kv_write
from ipexconvert.ir import TensorSpec, get_op
from ipexconvert.runtime.kernels import NodeContext

G = torch.Generator().manual_seed(0)


def context(op_name: str, attrs, inputs: list, constant_slots: range = range(0)) -> NodeContext:
    op = get_op(op_name)
    specs = tuple(None if t is None else TensorSpec.of(t) for t in inputs)
    constants = tuple(t if i in constant_slots else None for i, t in enumerate(inputs))
    return NodeContext(op=op_name, attrs=attrs, constants=constants, input_specs=specs,
                       output_specs=tuple(op.infer(specs, attrs)), device="cuda", isa="sm_90")


def attention_cases():
    """(name, the kernel's output, the reference's) for sdpa's decode kernel: GQA, masks none / bool with a fully
    masked row / additive."""
    op = get_op("sdpa")
    attrs = op.parse_attrs({"enable_gqa": True})
    for b, heads, kv_heads, rows, keys, mask_kind in [(1, 32, 4, 1, 544, "additive"), (2, 8, 2, 2, 300, "bool"),
                                                       (1, 4, 4, 3, 200, None), (1, 16, 1, 4, 700, "additive")]:
        q = torch.randn(b, heads, rows, 64, generator=G)
        k, v = (torch.randn(b, kv_heads, keys, 64, generator=G) for _ in range(2))
        mask = None
        if mask_kind == "additive":
            mask = torch.zeros(b, 1, rows, keys)
            mask[..., keys - 7:] = float("-inf")
        elif mask_kind == "bool":
            mask = torch.rand(b, 1, rows, keys, generator=G) > 0.3
            mask[0] = False
        inputs = [q, k, v, mask]
        kernel = sdpa.triton_sdpa(context("sdpa", attrs, inputs))
        want = op.reference(inputs, attrs, {})
        yield f"sdpa b{b} h{heads}/{kv_heads} rows {rows} keys {keys} mask {mask_kind}", kernel.fn(inputs, {}), want


def weights(bits: int, n: int, k: int, group: int):
    """(codes, scales, group size) of an n x k woq_linear weight: int4 / int8 codes of groups of `group`, or bits 16
    (the GPU's bf16 layers): a bf16 weight, one scale a row."""
    if bits == 16:
        return (torch.randn(n, k, generator=G) * 0.1).to(torch.bfloat16), torch.rand(n, 1, generator=G) + 0.5, k
    codes = (torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=G) if bits == 4
             else torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=G))
    return codes, torch.rand(n, k // group, generator=G) * 0.05, group


def woq_cases():
    """The same for woq_linear and prologue_woq_linear's decode kernel: int4 / int8 / bits 16 (bf16 weights), zero
    points, bias, a residual post-op."""
    for op_name, prologue, bits, dtype in [("woq_linear", None, 4, torch.float32),
                                           ("woq_linear", None, 8, torch.float32),
                                           ("prologue_woq_linear", "rms_norm", 4, torch.bfloat16),
                                           ("prologue_woq_linear", "silu_mul", 4, torch.float32),
                                           ("woq_linear", None, 16, torch.float32),
                                           ("prologue_woq_linear", "rms_norm", 16, torch.float32),
                                           ("prologue_woq_linear", "silu_mul", 16, torch.float32)]:
        op = get_op(op_name)
        n, k = 40, 256
        width = 2 * k if prologue == "silu_mul" else k
        x = torch.randn(1, 2, width, generator=G).to(dtype)
        codes, scales, group = weights(bits, n, k, 128)
        zeros = torch.randint(0, 16, (n, k // 128), dtype=torch.uint8, generator=G) if bits == 4 else None
        bias = torch.randn(n, generator=G)
        own = [x, codes, scales, zeros, bias] + ([None] if prologue == "silu_mul" else
                                                  [torch.rand(k, generator=G) + 0.5] if prologue else [])
        residual = torch.randn(1, 2, n, generator=G).to(dtype)
        attrs = op.parse_attrs({"bits": bits, "group_size": group, "post_ops": [{"kind": "add", "operand": len(own)}],
                                **({"prologue": prologue} if prologue else {}),
                                **({"eps": 1e-6} if prologue == "rms_norm" else {})})
        inputs = [*own, residual]
        ctx = context(op_name, attrs, inputs, range(1, len(own)))
        factory = woq_linear.triton_woq_linear if prologue is None else woq_linear.triton_prologue_woq_linear
        got = factory(ctx).fn([x] + [None] * (len(own) - 1) + [residual], {})
        yield f"{op_name} {prologue or ''} int{bits} {str(dtype)[6:]}", got, op.reference(inputs, attrs, {})


def float_prompt_cases():
    """A prompt's rows (more than the GEMV takes) of bits-16 layers with unit scales, as
    backends/cuda/float_projections.py makes them: the GEMM in bf16 as the linear layer ran it (woq_linear.float_rows; plain torch, no Triton)."""
    for op_name, prologue, residual in [("woq_linear", None, True), ("prologue_woq_linear", "rms_norm", False),
                                        ("prologue_woq_linear", "silu_mul", True)]:
        op = get_op(op_name)
        n, k = 40, 256
        width = 2 * k if prologue == "silu_mul" else k
        x = torch.randn(1, 6, width, generator=G).to(torch.bfloat16)
        codes = (torch.randn(n, k, generator=G) * 0.1).to(torch.bfloat16)
        bias = None if residual else torch.randn(n, generator=G)
        own = [x, codes, torch.ones(n, 1), None, bias] + ([None] if prologue == "silu_mul" else
                                                          [(torch.rand(k, generator=G) + 0.5).to(torch.bfloat16)]
                                                          if prologue else [])
        extra = [torch.randn(1, 6, n, generator=G).to(torch.bfloat16)] if residual else []
        post_ops = [{"kind": "add", "operand": len(own)}] if residual else []
        attrs = op.parse_attrs({"bits": 16, "group_size": k, "post_ops": post_ops,
                                **({"prologue": prologue} if prologue else {}),
                                **({"eps": 1e-6} if prologue == "rms_norm" else {})})
        inputs = [*own, *extra]
        factory = woq_linear.triton_woq_linear if prologue is None else woq_linear.triton_prologue_woq_linear
        kernel = factory(context(op_name, attrs, inputs, range(1, len(own))))
        got = kernel.fn([x] + [None] * (len(own) - 1) + extra, {})
        yield f"{op_name} {prologue or ''} bf16 weights 6 prompt rows residual {residual}", got, \
            op.reference(inputs, attrs, {})


def rope_epilogue_cases():
    """woq_linear_rope_kv_write: the merged q/k/v GEMV writing q and the caches (decode rows), and a prompt's path."""
    op = get_op("woq_linear_rope_kv_write")
    for batch, seq, heads, kv_heads, prologue, cache_dtype, bits in [(1, 1, 4, 2, "rms_norm", torch.float32, 4),
                                                                      (2, 1, 14, 2, None, torch.bfloat16, 4),
                                                                      (1, 6, 4, 2, "rms_norm", torch.float32, 4),
                                                                      (1, 1, 4, 2, "rms_norm", torch.float32, 16),
                                                                      (1, 6, 4, 2, "rms_norm", torch.bfloat16, 16)]:
        k, d = 256, 64
        n = (heads + 2 * kv_heads) * d
        x = torch.randn(batch, seq, k, generator=G) * 2
        codes, scales, group = weights(bits, n, k, 128)
        if bits == 16 and seq > 1:  # unit scales, as made at load: the prompt's path on cuBLAS (float_rows)
            x, scales = x.to(torch.bfloat16), torch.ones_like(scales)
        bias = torch.randn(n, generator=G)
        norm = torch.rand(k, generator=G) + 0.5 if prologue else None
        cos, sin = (torch.randn(1, 1, seq, d, generator=G) for _ in range(2))
        caches = [torch.randn(batch, kv_heads, 16, d, generator=G).to(cache_dtype) for _ in range(2)]
        inputs = [x, codes, scales, None, bias, norm, cos, sin, *caches, torch.tensor(5)]
        attrs = op.parse_attrs({"bits": bits, "group_size": group, "prologue": prologue,
                                **({"eps": 1e-6} if prologue else {})})
        kernel = woq_linear_rope_kv_write.triton_woq_linear_rope_kv_write(
            context(op.name, attrs, inputs, range(1, 6)))
        want = op.reference([t.clone() if isinstance(t, torch.Tensor) else t for t in inputs], attrs, {})
        got = kernel.fn([x, *[None] * 5, cos, sin, *[c.clone() for c in caches], torch.tensor(5)], {})
        for name, g, w in zip(("q", "cache_key", "cache_value"), got, want):
            yield f"woq_linear_rope_kv_write b{batch} s{seq} h{heads}/{kv_heads} {prologue} bits {bits} {name}", g, w


def attention_projection_cases():
    """sdpa_woq_linear: one query row's attention combined by its output projection as it reads it (several key
    splits, one, a fully masked row, a residual post-op), and a prompt's rows on the two kernels in turn."""
    op = get_op("sdpa_woq_linear")
    for heads, kv_heads, rows, keys, mask_kind, d, bits, group in [
            (8, 2, 1, 544, "additive", 64, 4, 128), (4, 4, 1, 40, None, 64, 4, 128), (8, 1, 1, 300, "bool", 64, 4, 128),
            (4, 2, 3, 200, "additive", 64, 4, 128), (4, 2, 1, 260, None, 128, 8, 128), (6, 2, 1, 100, None, 32, 4, 32),
            (8, 2, 1, 544, "additive", 64, 16, 0)]:
        n = 48
        k = heads * d
        q = torch.randn(1, heads, rows, d, generator=G)
        keys_, values = (torch.randn(1, kv_heads, keys, d, generator=G) for _ in range(2))
        mask = None
        if mask_kind == "additive":
            mask = torch.zeros(1, 1, rows, keys)
            mask[..., keys - 7:] = float("-inf")
        elif mask_kind == "bool":
            mask = torch.rand(1, 1, rows, keys, generator=G) > 0.3
            mask[..., :] = False  # every key removed: the row is 0
        codes, scales, group = weights(bits, n, k, group)
        residual = torch.randn(1, rows, n, generator=G)
        inputs = [q, keys_, values, mask, codes, scales, None, None, residual]
        attrs = op.parse_attrs({"bits": bits, "group_size": group, "attention": {"enable_gqa": True},
                                "post_ops": [{"kind": "add", "operand": 8}]})
        kernel = sdpa_woq_linear.triton_sdpa_woq_linear(context(op.name, attrs, inputs, range(4, 8)))
        got = kernel.fn([q, keys_, values, mask, None, None, None, None, residual], {})
        name = f"sdpa_woq_linear h{heads}/{kv_heads} d{d} int{bits} g{group} rows {rows} keys {keys} mask {mask_kind}"
        yield name, got, op.reference(inputs, attrs, {})


def gather_cases():
    """The decode step's position table row (backends/cuda/graphs.table_row) and embedding lookup
    (kernels/embedding.embedding_rows): copies, so equal to the bit; an id outside the table clamped and flagged."""
    from ipexconvert.backends.cuda.graphs import table_row
    from ipexconvert.backends.cuda.kernels.embedding import embedding_rows

    table = torch.randint(0, 256, (37, 1568), dtype=torch.uint8, generator=G)
    for position in (0, 20, 36, 99):
        got = table_row(table, torch.tensor(position))
        yield f"table_row {position} of 37", got.float(), table[min(position, 36)].float()
    weight = torch.randn(100, 2048, generator=G).to(torch.bfloat16)
    for ids in ([[3, 99, 0]], [[5, 100, -1]]):
        flag = torch.zeros((), dtype=torch.bool)
        ids = torch.tensor(ids)
        got = embedding_rows(weight, ids, flag)
        inside = bool(((ids >= 0) & (ids < 100)).all())
        yield f"embedding_rows {ids.tolist()} flag {bool(flag)}", got if bool(flag) != inside else got * 2, \
            weight[ids.clamp(0, 99)]


BUDGETS = {torch.float32: 1e-5, torch.bfloat16: 2e-2}  # of max |reference| (by the reference's dtype)


def main() -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("run with TRITON_INTERPRET=1 (and Triton on PYTHONPATH)")
    failed = 0
    for name, got, want in [*attention_cases(), *woq_cases(), *float_prompt_cases(), *rope_epilogue_cases(),
                           *attention_projection_cases(),
                           *gather_cases()]:
        error = ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()
        ok = got.shape == want.shape and error <= BUDGETS[want.dtype]
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: relative error {error:.1e}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
