"""linear (float32, bfloat16) on the CPU. Factories in preference order: torch_mkl (MKL's packed sgemm
through torch, float32 on Intel CPUs), onednn_direct (our oneDNN matmul, avx512_bf16), native_bf16_amx (our AMX
tiles, bf16 up to AMX_MAX_ROWS rows), then torch_onednn (torch's oneDNN operator), bf16_storage (below avx512_bf16); the
op's reference runs when all decline.

native_bf16_amx:
  bf16 linear on AMX tiles (native/kernels/bf16_amx_gemm/) for up to AMX_MAX_ROWS rows of x, bias and a relu or erf
  GELU fused into its epilogue, where the layer's own first calls in the model measure it faster than torch_onednn's
  kernel (_in_situ.py: per layer and power-of-two range of row counts, a block of 2 untimed and 3 timed calls of
  each, medians); torch_onednn's kernel otherwise and for more rows (its packed weight made on its
  first call and dropped again once every measured range chose the tiles). Each 32-channel panel of the weight is
  read from memory once per call while all the rows pass over it, the next panel prefetched meanwhile. On an AMX
  Xeon, 2 cores, whose effective L3 holds less than BERT-base's 170 MB of encoder weights, its 48 linears took
  0.68-0.71 x oneDNN's time at 128 rows, 0.72 at 1024 (benchmarks/amx_gemm.py, session 68) and the model 0.89-0.94 x
  as measured per layer (b8: 0.90); at 4096 rows (MiniLM b32) every layer chose oneDNN, hence
  AMX_MAX_ROWS 1024. On the GPU machine's AMX host, whose 300 MB L3 held them, the tiles
  everywhere made the model 1.05 x slower, hence the measuring (benchmarks/results/session66-amx-gemm-xeon-amx.md).
  IPEXCONVERT_AMX_GEMM=0 turns it off, =always skips the measuring.

torch_mkl:
  float32 linear through MKL's packed sgemm (torch.ops.mkl._mkl_linear), as Inductor's freezing does.

  MKL packs the weight for one row count (batch x seq rows of x). _mkl_linear runs the packed GEMM
  when x has that many rows and otherwise falls back to a plain GEMM with the original weight, so
  the kernel keeps both: the packed copy costs about 2.2x the float32 weight in memory. The row
  count is the node's own when its shapes are static; with dynamic dims it is the first one the
  kernel sees (packed on that call, once), which in a deployment is the steady shape. Measured at
  BERT-base shapes (benchmarks/README.md): 15-20% faster than F.linear at 128 rows, 2.5x at 1 row.

  Post-ops run in torch after the call (MKL fuses none), as in the reference. Used on Intel CPUs only
  (`_native.mkl_runs_float32_linear`): elsewhere torch_onednn_linear.py runs float32 too.

  _mkl_linear checks neither the bias length nor x's feature count against the weight (a bias of 0
  elements segfaults, one of 1 element is read 63 floats past its end), so this kernel checks both, at
  build and on every call, although the loader's shape rules (ir/validate.py) already refuse such nodes.

torch_onednn:
  linear through oneDNN (bfloat16; float32 on non-Intel CPUs): weight packed once at load, bias and post-ops fused into the call.

  torch.ops.mkldnn._linear_pointwise computes x @ W^T + b with one fused unary post-op;
  its .binary overload fuses an add/mul of a tensor of exactly the output's shape (it
  reshapes that operand to [rows, out] itself, so it cannot broadcast) and takes no
  unary after it. Post-ops beyond that run in torch after the call. At the avx2 level GELU is not fused: oneDNN's
  erf post-op cost 11-21 % of the matmul there, our native GELU in place after the call 3-6 %
  (_torch_onednn.GELU_UNFUSED_AT); a tail that starts with GELU runs it natively at every level (with_tail).

  bf16 calls of 512 rows or more run whole or in 256-row calls, whichever the first call of that layer shape in
  that power-of-two range of row counts measured faster (_row_chunks.py: oneDNN's AMX matmul ran BERT-base's
  3072 -> 768 and 768 -> 768 layers at half speed at 512-1024 rows; BERT-base b8 bf16 0.87x the time).

  _reorder_linear_weight wants the weight as [out, in], the layout linear already
  stores (prepack.py makes it contiguous). It cannot tell a transposed square weight
  from the right one, so nothing here may hand it W^T.

  bf16 at many rows where bf16 arithmetic is no faster than float32 (`widens_many_rows`): the
  avx512_bf16 level without AMX, on Intel CPUs, where MKL runs float32. There vdpbf16ps issues on
  one port and FMA on two, so a bf16 dot product does no more work a cycle than float32 FMA, and
  oneDNN's bf16 GEMM reached 165-175 GFLOP/s against MKL sgemm's 260-320 (Xeon without AMX,
  2 threads, 512 x 896 x 4864 and BERT shapes). From WIDE_FROM_ROWS rows (a prompt, a batch of
  sentences) the call widens the bf16 weight and input to float32 (cheap beside the GEMM), runs MKL
  and rounds the result to bf16 once: 16 ms against 26 at 512 rows, 0.73 against 0.93 ms at 128
  (768 x 768). Below it (decode) the bf16 path runs: it reads half the weight bytes, and at a few
  rows reading is the cost. Post-ops then run in torch on the bf16 result, as the reference does.

bf16_storage:
  bf16 linear where the CPU has no bf16 arithmetic (below avx512_bf16), for the graphs that keep bf16 there:
  decoders (compute_precision.py), whose decode steps are bound by reading the weights. Nothing bf16 reaches
  oneDNN or torch's bf16 GEMM (both emulate it there, at several times the float32 time), and nothing is kept
  in float32: both native kernels read the artifact's plain [out, in] bf16 weight. Up to GEMV_ROWS rows (decode)
  bf16_gemv streams it at memory speed; more rows (a prompt) run bf16_gemm, which widens a panel of it at a
  time into float32 for an FMA micro-kernel. Widening the weight in torch instead (a float32 copy of it per call,
  or blocks of it handed to MKL) cost 1.3-1.6x the float32 artifact's packed MKL at 512 rows; bf16_gemm 1.2-1.5x
  (benchmarks/bf16_linear.py; benchmarks/results/session33-decoder-bf16-storage-xeon-avx512vnni.md). Post-ops
  run in torch after it, as the reference.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from math import prod
from typing import Callable, Optional

import torch

from ....errors import ArtifactError
from ....ir.dims import same
from ....ir.ops._common import same_shape
from ....ir.postops import PostOp, apply_post_ops
from ....runtime.bound_plan import buffer
from ....runtime.kernels import Kernel, NodeContext, register_kernel
from .. import native_lib, onednn_direct
from ..compute_precision import bf16_compute_dtype
from ..self_check import torch_ops
from ._torch_onednn import (constant_weight_and_bias, consumed, enabled, isa_allows, mkl_runs_float32_linear,
                            node_dtype, plan_post_ops, unfused_unary, with_tail)
from . import _row_chunks, _runs_at
from ._in_situ import InSitu, row_range
from ._onednn_direct_linear import fused_prefix, linear_run

@register_kernel("cpu", "linear", runs_at=_runs_at.torch_mkl)
def torch_mkl_linear(ctx: NodeContext) -> Optional[Kernel]:
    """MKL's packed sgemm (mkl._mkl_linear) for float32 on Intel CPUs: packed for one row count (at load when
    static, else on the first call); other row counts use the unpacked GEMM; post-ops in torch."""
    if ctx.device != "cpu" or not enabled() or node_dtype(ctx) != "float32" or not mkl_runs_float32_linear():
        return None
    params = constant_weight_and_bias(ctx)
    x_spec = ctx.input_specs[0]
    if params is None or x_spec.rank < 2 or params[0].dim() != 2:
        return None
    mkl_linear = torch_ops.op_for("mkl._mkl_linear", "float32")
    pack = torch_ops.op_for("mkl._mkl_reorder_linear_weight", "float32")
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

    return Kernel(with_tail(run, tuple(ctx.attrs.post_ops), ctx.isa), "torch_mkl:linear", consumed(ctx))


def _mismatch(ctx: NodeContext, what: str) -> ArtifactError:
    return ArtifactError(f"a float32 linear node got {what}, which MKL cannot run (the graph does not fit its weights)",
                         "re-create the artifact with `ipexconvert optimize`; this graph was not written by it or was edited")


_BINARY_KINDS = frozenset({"add", "mul"})
GEMV_ROWS = 4  # bf16 rows up to which the native bf16_gemv runs (decode), where bf16 linear widens from WIDE_FROM_ROWS
WIDE_FROM_ROWS = 64  # bf16 rows from which widening to float32 MKL pays (32 rows: 2.3 against 1.8 ms; 128: faster)


def widens_many_rows(isa: str, dtype: str) -> bool:
    """Whether bf16 linear widens to float32 MKL at WIDE_FROM_ROWS rows and more at this level (module docstring)."""
    return dtype == "bfloat16" and isa == "avx512_bf16" and mkl_runs_float32_linear()


@register_kernel("cpu", "linear", runs_at=_runs_at.onednn_direct_float_linear)
def onednn_direct_linear(ctx: NodeContext) -> Optional[Kernel]:
    """Our oneDNN matmul per layer and row count (native/dnnl/linear.cpp) for the linears torch's oneDNN operator
    would run here: bf16 where it is not widened to MKL, float32 where MKL does not run it. Bias and one unary
    post-op fused, the rest in torch. It saves the operator's per-call cost (~37 us): on Zen 5, 0.97-0.98 of the
    torch operator's time over BERT-base and MiniLM (bf16 and float32; `benchmarks/ab.py ART --without
    onednn_direct_linear`). Decode rows (up to GEMV_ROWS) run our GEMVs instead: bf16 at avx512_bf16 bf16_gemv,
    float32 f32_gemv."""
    if ctx.device != "cpu" or ctx.nan_safe or ctx.input_specs[0].rank < 2:
        return None
    dtype = node_dtype(ctx)
    if not onednn_runs(dtype) or widens_many_rows(ctx.isa, dtype):
        return None
    params = constant_weight_and_bias(ctx)
    if params is None or not isa_allows(ctx.isa, dtype) or params[0].dim() != 2:
        return None
    weight, bias = params
    fused = fused_prefix(ctx.attrs.post_ops, ctx.constants, weight.shape[0])
    linear = onednn_direct.make_layer("onednn_direct:linear", onednn_direct.raw.Linear, weight.contiguous(), None,
                                      None if bias is None else bias.float().contiguous(), dtype, dtype,
                                      post_op=fused.unary, multiplier=fused.multiplier)
    run = linear_run(linear, getattr(torch, dtype), fused.tail, "onednn_direct:linear")
    # decode rows: our GEMVs, which read the plain weight at the bandwidth (a Qwen2-0.5B step's GEMVs on a Zen 4:
    # bf16_gemv 0.74 of it where oneDNN's bf16 matmul read 0.62; f32_gemv: a float32 step 104 -> 80 ms, capped to AVX2 113 -> 72).
    # Intel's avx512_bf16 CPUs take bf16 decode rows in build_linear_kernel's by_rows, and float32 goes to MKL there.
    few = (_native_bf16(ctx, weight.contiguous(), bias) if dtype == "bfloat16" and ctx.isa == "avx512_bf16"
           else _native_f32(ctx, weight.contiguous(), bias) if dtype == "float32" else None)
    if few is not None:
        run = decode_rows_first(few, run)
    held = consumed(ctx) if fused.multiplier_slot is None else consumed(ctx) | {fused.multiplier_slot}
    return Kernel(run, "onednn_direct:linear", held, fresh_output=True, keeps_nan=False)


AMX_MAX_ROWS = 1024  # rows up to which bf16_amx_gemm runs a bf16 linear on AMX (module docstring)
AMX_UNARY = {"relu": "relu", "gelu": "gelu"}  # post-op kind -> bf16_amx_gemm's unary (the erf GELU)
AMX_OR_ONEDNN = "native:bf16_amx_gemm|torch_onednn:linear"  # the kernel's name while each layer measures the two


@register_kernel("cpu", "linear", runs_at=_runs_at.native_amx_linear)
def native_bf16_amx_linear(ctx: NodeContext) -> Optional[Kernel]:
    """bf16 linear on AMX tiles (our bf16_amx_gemm) for up to AMX_MAX_ROWS rows of x, bias and a relu or erf GELU
    fused, where the layer's first calls in the model measure it faster than torch's oneDNN linear (_in_situ.py;
    IPEXCONVERT_AMX_GEMM=always skips the measuring); torch's oneDNN linear (build_linear_kernel, its weight packed
    on its first call, dropped again when every measured range chose the tiles) otherwise and for more rows. Layers
    whose sizes are not multiples of 32 or with other post-ops decline (torch's oneDNN linear runs them)."""
    if ctx.device != "cpu" or ctx.nan_safe or node_dtype(ctx) != "bfloat16" or ctx.input_specs[0].rank < 2:
        return None
    params = constant_weight_and_bias(ctx)  # (where bf16_amx_gemm has a build: _runs_at.native_amx_linear)
    post_ops = tuple(ctx.attrs.post_ops)
    if params is None or params[0].dim() != 2 or len(post_ops) > 1:
        return None
    unary = "none" if not post_ops else AMX_UNARY.get(post_ops[0].kind) if post_ops[0].operand is None else None
    weight, bias = params
    n, k = weight.shape
    if unary is None or n % 32 or k % 32 or n == 0 or k == 0:
        return None
    onednn_packed: list = [None]  # oneDNN's packed weight, made on its first call, dropped when no call needs it
    many = build_linear_kernel(ctx, packed_box=onednn_packed)
    if many is None:
        return None
    packed, wide_bias = pack_amx_weight(weight.contiguous()), None if bias is None else bias.float().contiguous()
    lib, isa = native_lib.raw, ctx.isa
    many_rows_seen = [False]

    def tiles(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x, out = _bf16_rows(inputs[0], n)
        lib.bf16_amx_gemm(x, packed, wide_bias, out, isa, torch.get_num_threads(), unary)  # checks x against w
        return out

    def drop_onednn_weight_if_unused(_range: int, _chose_tiles: bool) -> None:
        if not many_rows_seen[0] and not choice.measuring and all(choice.choices.values()):
            onednn_packed[0] = None

    def saw_many_rows() -> None:
        many_rows_seen[0] = True

    def tiles_bind(inputs: list, dims: dict[str, int]):
        x = inputs[0]
        if x.dtype != torch.bfloat16 or not x.is_contiguous():
            return None
        out = buffer(x.shape[:-1] + (n,), torch.bfloat16)
        return functools.partial(lib.bf16_amx_gemm, x, packed, wide_bias, out, isa, torch.get_num_threads(), unary), [out]

    run, choice = amx_tiles_or(k, tiles, many.fn, on_choice=drop_onednn_weight_if_unused, on_more_rows=saw_many_rows)
    # the name says what may run: measured, a layer keeps either (profiles group its time under this name)
    name = "native:bf16_amx_gemm" if choice is None else AMX_OR_ONEDNN
    return Kernel(run, name, consumed(ctx), fresh_output=True, bind=amx_bind(k, choice, tiles_bind, many.bind))


def amx_bind(k: int, choice: Optional[InSitu], tiles_bind: Callable, other_bind: Optional[Callable]) -> Callable:
    """Kernel.bind of amx_tiles_or's function: the bound call of the way this row count runs (the tiles up to
    AMX_MAX_ROWS rows where the layer's measuring chose them or there is none, else `other`'s), None while its range
    is still measured or where that way does not bind."""
    def bind(inputs: list, dims: dict[str, int]):
        rows = inputs[0].numel() // k
        chose_tiles = rows <= AMX_MAX_ROWS and (True if choice is None else choice.choices.get(row_range(rows)))
        if chose_tiles is None:
            return None
        way = tiles_bind if chose_tiles else other_bind
        return None if way is None else way(inputs, dims)

    return bind


def amx_tiles_or(k: int, tiles: Callable, other: Callable, on_choice: Optional[Callable[[int, bool], None]] = None,
                 on_more_rows: Optional[Callable[[], None]] = None) -> tuple[Callable, Optional[InSitu]]:
    """The run function of a layer on one of our AMX tile GEMMs (`tiles`) up to AMX_MAX_ROWS rows of x (k columns),
    measured in the model against `other` per range of row counts (InSitu, which tells on_choice) unless
    IPEXCONVERT_AMX_GEMM=always; `other` for more rows (on_more_rows told first). Returns it and the InSitu (None: the
    tiles without measuring); native_bf16_amx_linear's and native_amx_qlinear's."""
    choice = None if _runs_at.amx_gemm_always() else InSitu(tiles, other, on_choice=on_choice)

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        rows = inputs[0].numel() // k  # k > 0 (the factories decline k = 0)
        if rows > AMX_MAX_ROWS:
            if on_more_rows is not None:
                on_more_rows()
            return other(inputs, dims)
        return tiles(inputs, dims) if choice is None else choice(rows, inputs, dims)

    return run, choice


@register_kernel("cpu", "linear", runs_at=_runs_at.torch_onednn_linear)
def torch_onednn_linear(ctx: NodeContext) -> Optional[Kernel]:
    """bf16 linear (1.4-2x over F.linear); float32 too where MKL does not run it (non-Intel CPUs:
    `_common.mkl_runs_float32_linear`)."""
    if ctx.device != "cpu" or not enabled() or ctx.nan_safe:
        return None
    return build_linear_kernel(ctx) if onednn_runs(node_dtype(ctx)) else None


def onednn_runs(dtype: Optional[str]) -> bool:
    """Whether a linear of this dtype runs on oneDNN here: bf16 always, float32 where MKL does not run it."""
    return dtype == "bfloat16" or (dtype == "float32" and not mkl_runs_float32_linear())


def build_linear_kernel(ctx: NodeContext, packed_box: Optional[list] = None) -> Optional[Kernel]:
    """The oneDNN linear kernel for this node (float32 or bfloat16), or None if it does not apply. packed_box: a
    one-item list the packed weight is kept in instead, made on the kernel's first call (and again after the
    caller empties it): native_bf16_amx_linear's, which may never need it."""
    dtype = node_dtype(ctx)
    params = constant_weight_and_bias(ctx)
    if dtype is None or params is None or not isa_allows(ctx.isa, dtype):
        return None
    weight, bias = params
    out_spec = ctx.output_specs[0]
    if ctx.input_specs[0].rank < 2 or weight.dim() != 2:
        return None
    linear = torch_ops.op_for("mkldnn._linear_pointwise", dtype)
    reorder = torch_ops.op_for("mkldnn._reorder_linear_weight", dtype)
    if linear is None or reorder is None:
        return None
    binary_op = torch_ops.op_for("mkldnn._linear_pointwise.binary", dtype)

    def binary_ok(p: PostOp) -> bool:
        operand = ctx.input_specs[p.operand]
        return (binary_op is not None and p.kind in _BINARY_KINDS and operand.dtype == dtype
                and operand.rank == out_spec.rank and all(same(a, b) for a, b in zip(operand.shape, out_spec.shape)))

    plan = plan_post_ops(ctx.attrs.post_ops, binary_ok, frozenset(), unfused_unary(ctx.isa))
    # The packed layout does not depend on the row count enough to matter; None lets oneDNN choose.
    if packed_box is None:
        packed_box = [reorder(weight.contiguous(), None)]

    def packed() -> torch.Tensor:
        current = packed_box[0]  # read once: another thread's caller may empty the box meanwhile
        if current is None:
            current = packed_box[0] = reorder(weight.contiguous(), None)
        return current

    if plan.binary is None:
        attr, algorithm = plan.unary or ("none", "")
        key = (tuple(weight.shape), bias is not None, attr, algorithm)

        def call(x: torch.Tensor, operand: Optional[torch.Tensor]) -> torch.Tensor:
            return linear(x, packed(), bias, attr, [], algorithm)
    else:
        kind = plan.binary.kind
        key = (tuple(weight.shape), bias is not None, "binary", kind)

        def call(x: torch.Tensor, operand: Optional[torch.Tensor]) -> torch.Tensor:
            return binary_op(x, operand, packed(), bias, kind)

    # bf16: whole or in row chunks, as measured at the first call in each range of row counts (_row_chunks)
    rows_call = _row_chunks.row_chunked(call, key, weight.shape[0]) if dtype == "bfloat16" else call
    operand_slot = None if plan.binary is None else plan.binary.operand

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        return rows_call(inputs[0], None if operand_slot is None else inputs[operand_slot])

    fused = with_tail(run, plan.tail, ctx.isa)
    if not widens_many_rows(ctx.isa, dtype):
        # decode rows and a classifier's one row: our GEMVs, which stream the plain weight (float32 on non-Intel
        # CPUs; bf16 on AMX, where ResNet-50's 2048 -> 1000 head took 84 us against oneDNN's 123, its weights
        # cycled through the L3 with 11 others, 62 against 72 hot: session 71)
        few = (_native_f32(ctx, weight.contiguous(), bias) if dtype == "float32"
               else _native_bf16(ctx, weight.contiguous(), bias))
        return Kernel(fused if few is None else decode_rows_first(few, fused), "torch_onednn:linear", consumed(ctx),
                      keeps_nan=False)
    weight_bf16, wide_bias = weight.contiguous(), None if bias is None else bias.float()

    def widened(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        return torch.nn.functional.linear(x.float(), weight_bf16.float(), wide_bias).to(x.dtype)

    wide = with_tail(widened, tuple(ctx.attrs.post_ops), ctx.isa)
    few = _native_bf16(ctx, weight_bf16, bias)

    def by_rows(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
        if rows <= GEMV_ROWS and few is not None:
            return few(inputs, dims)
        return wide(inputs, dims) if rows >= WIDE_FROM_ROWS else fused(inputs, dims)

    return Kernel(by_rows, "torch_onednn:linear", consumed(ctx), keeps_nan=False)


def _native_bf16(ctx: NodeContext, weight: torch.Tensor, bias: Optional[torch.Tensor]):
    """The native bf16 linear on the plain [out, in] bf16 weight, or None without the native build: bf16_gemv for up
    to GEMV_ROWS rows of x (a decode step; post-ops in torch after it), bf16_gemm for more, which applies a leading
    SiLU and a residual add or SwiGLU mul (GemmEpilogue) to its float32 sums before its one rounding. bf16_gemv reads
    the weight at ~0.86 of the read bandwidth where oneDNN's bf16 path reached ~0.79 (Xeon without AMX, 2 cores: a
    Qwen2-0.5B decode step's GEMVs, benchmarks/results/session25-decoder-qwen2-0.5b-xeon-avx512bf16.md)."""
    if not native_lib.available() or not hasattr(native_lib.raw, "bf16_gemm") or weight.dtype != torch.bfloat16:
        return None
    lib, isa, n = native_lib.raw, ctx.isa, weight.shape[0]
    wide_bias = None if bias is None else bias.float().contiguous()
    post_ops = tuple(ctx.attrs.post_ops)
    epilogue = GemmEpilogue.of(post_ops, ctx)

    def gemv(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x, out = _bf16_rows(inputs[0], n)
        lib.bf16_gemv(x, weight, wide_bias, out, isa, torch.get_num_threads())  # checks x's columns against the weight
        return out

    few = with_tail(gemv, post_ops, ctx.isa)

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        if (x.numel() // x.shape[-1] if x.shape[-1] else 0) <= GEMV_ROWS:
            return few(inputs, dims)
        x, out = _bf16_rows(x, n)
        operand = None if epilogue.operand is None else inputs[epilogue.operand.operand]
        if operand is not None and (operand.dtype != torch.bfloat16 or operand.shape != out.shape
                                    or not operand.is_contiguous()):  # (not as declared: torch's post-ops after)
            lib.bf16_gemm(x, weight, wide_bias, out, isa, torch.get_num_threads())
            return apply_post_ops(out, post_ops, inputs)
        lib.bf16_gemm(x, weight, wide_bias, out, isa, torch.get_num_threads(), silu=epilogue.silu, operand=operand,
                      combine="add" if operand is None else epilogue.operand.kind)
        return apply_post_ops(out, epilogue.rest, inputs) if epilogue.rest else out

    return run


def pack_amx_weight(weight: torch.Tensor) -> torch.Tensor:
    """A bf16 [n, k] weight (n and k multiples of 32) as bf16_amx_gemm reads it: [n / 32, k / 32, 16, 32, 2], per
    block of 32 channels and 32 k the 16 pairs of k, each pair of the 32 channels side by side (AMX B tiles)."""
    n, k = weight.shape
    return weight.reshape(n // 32, 32, k // 32, 16, 2).permute(0, 2, 3, 1, 4).contiguous()


def _bf16_rows(x: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x as contiguous bf16, and a fresh bf16 output of its rows of n."""
    if x.dtype != torch.bfloat16 or not x.is_contiguous():
        x = x.to(torch.bfloat16).contiguous()
    return x, torch.empty(x.shape[:-1] + (n,), dtype=torch.bfloat16)


@dataclass(frozen=True)
class GemmEpilogue:
    """The post-ops bf16_gemm applies itself (a leading silu, then an add or mul of an operand of the output's
    shape and dtype: a residual, or SwiGLU's gate), and those left to torch after it."""
    silu: bool
    operand: Optional[PostOp]
    rest: tuple[PostOp, ...]

    @staticmethod
    def of(post_ops: tuple[PostOp, ...], ctx: NodeContext) -> "GemmEpilogue":
        silu = bool(post_ops) and post_ops[0].operand is None and post_ops[0].kind == "silu"
        rest = post_ops[1:] if silu else post_ops
        out = ctx.output_specs[0]
        first = rest[0] if rest else None
        operand = ctx.input_specs[first.operand] if first is not None and first.operand is not None else None
        if (first is None or operand is None or first.kind not in ("add", "mul") or operand.dtype != "bfloat16"
                or out is None or not same_shape(operand.shape, out.shape)):
            return GemmEpilogue(silu, None, rest)
        return GemmEpilogue(silu, first, rest[1:])


def decode_rows_first(few, many):
    """A kernel function running `few` (one of our GEMVs) for up to GEMV_ROWS rows of x, `many` for more."""
    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0]
        rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
        return few(inputs, dims) if rows <= GEMV_ROWS else many(inputs, dims)
    return run


def _native_f32(ctx: NodeContext, weight: torch.Tensor, bias: Optional[torch.Tensor]):
    """f32_gemv for up to GEMV_ROWS rows of float32 x on the plain [out, in] weight, post-ops in torch after it, or
    None without the native build."""
    if not native_lib.available() or not hasattr(native_lib.raw, "f32_gemv"):
        return None
    lib, isa, n = native_lib.raw, ctx.isa, weight.shape[0]
    bias = None if bias is None else bias.float().contiguous()

    def run(inputs: list, dims: dict[str, int]) -> torch.Tensor:
        x = inputs[0].float().contiguous()
        out = torch.empty(x.shape[:-1] + (n,), dtype=torch.float32)
        lib.f32_gemv(x, weight, bias, out, isa, torch.get_num_threads())  # checks x's columns against the weight
        return out

    return with_tail(run, tuple(ctx.attrs.post_ops), ctx.isa)


@register_kernel("cpu", "linear", runs_at=_runs_at.native_bf16_storage)
def bf16_storage_linear(ctx: NodeContext) -> Optional[Kernel]:
    """bf16 linear below avx512_bf16 (a decoder keeps bf16 there): bf16_gemv for up to 4 rows, bf16_gemm for more,
    both on the plain bf16 weight with float32 sums; bf16_gemm applies a SiLU and an add / mul post-op itself."""
    if ctx.device != "cpu" or node_dtype(ctx) != "bfloat16" or bf16_compute_dtype(ctx.isa) == "bfloat16":
        return None
    params = constant_weight_and_bias(ctx)
    if params is None or ctx.input_specs[0].rank < 2 or params[0].dim() != 2:
        return None
    run = _native_bf16(ctx, params[0].contiguous(), params[1])
    return None if run is None else Kernel(run, "native:bf16_storage_linear", consumed(ctx))
