"""Start-up check of the private torch ops the oneDNN kernels call.

torch.ops.mkldnn._convolution_pointwise and friends are internal to torch (Inductor
uses them): they can be missing from a build, change their schema between releases,
or misbehave on an unusual CPU. So before the first kernel uses one, each op is
looked up, its argument names compared with what our kernels pass, and a tiny
problem computed and compared with F.conv2d / F.linear, in float32 and, when the CPU
has native bf16 (avx512_bf16), in bfloat16. Arguments are deliberately asymmetric
(stride 2x1, padding 1x0, groups 2) so a swapped argument order shows up as a wrong
result rather than passing by luck.

The check runs once per process, on first use (not at import, so `import ipexconvert`
stays fast), and costs a few milliseconds. Ops that fail make their factories decline
(the reference runs), and one warning line names them. probe_report() returns the
results for `ipexconvert doctor`.
"""
from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
import torch.nn.functional as F

from ..isa import ISA_LEVELS, selected_isa

# The argument names our kernels rely on, in order, per op ("namespace.name[.overload]").
EXPECTED_ARGS: dict[str, list[str]] = {
    "mkldnn._reorder_convolution_weight": ["self", "padding", "stride", "dilation", "groups", "input_size"],
    "mkldnn._convolution_pointwise": ["X", "W", "B", "padding", "stride", "dilation", "groups",
                                      "attr", "scalars", "algorithm"],
    "mkldnn._convolution_pointwise.binary": ["X", "other", "W", "B", "padding", "stride", "dilation", "groups",
                                             "binary_attr", "alpha", "unary_attr", "unary_scalars",
                                             "unary_algorithm"],
    "mkldnn._reorder_linear_weight": ["self", "batch_size"],
    "mkldnn._linear_pointwise": ["X", "W", "B", "attr", "scalars", "algorithm"],
    "mkldnn._linear_pointwise.binary": ["X", "other", "W", "B", "attr"],
    # MKL's packed float32 GEMM (checked in float32 only; see _check_mkl_linear)
    "mkl._mkl_reorder_linear_weight": ["X", "batch_size"],
    "mkl._mkl_linear": ["X", "MKL_W", "ORI_W", "B", "batch_size"],
    # int8 (checked under the key "int8"; see _check_int8)
    "onednn.qlinear_prepack": ["weight", "x_shape"],
    "onednn.qlinear_pointwise": ["qx", "x_scale", "x_zero_point", "qw", "w_scale", "w_zero_point", "bias",
                                 "output_scale", "output_zero_point", "output_dtype", "post_op_name",
                                 "post_op_args", "post_op_algorithm"],
    "onednn.qconv_prepack": ["weight", "w_scales", "x_scale", "x_zp", "stride", "padding", "dilation", "groups",
                             "x_shape"],
    "onednn.qconv2d_pointwise": ["qx", "x_scale", "x_zero_point", "qw", "w_scale", "w_zero_point", "bias",
                                 "stride", "padding", "dilation", "groups", "output_scale", "output_zero_point",
                                 "output_dtype", "attr", "scalars", "algorithm"],
    "onednn.qconv2d_pointwise.binary": ["qx", "x_scale", "x_zero_point", "qw", "w_scale", "w_zero_point", "qaccum",
                                        "bias", "stride", "padding", "dilation", "groups", "output_scale",
                                        "output_zero_point", "output_dtype", "accum_scale", "accum_zero_point",
                                        "binary_attr", "alpha", "unary_attr", "unary_scalars", "unary_algorithm"],
}

# Relative error allowed in the numeric check (max |got - want| / max |want|).
TOLERANCE = {"float32": 1e-4, "bfloat16": 2e-2, "int8": 2e-2}


def resolve_op(qualified: str) -> torch._ops.OpOverload:
    """torch.ops.<namespace>.<name>.<overload>; raises AttributeError when the op is missing."""
    parts = qualified.split(".")
    namespace, name = parts[0], parts[1]
    overload = parts[2] if len(parts) > 2 else "default"
    return getattr(getattr(getattr(torch.ops, namespace), name), overload)


@dataclass
class OpStatus:
    op: Optional[torch._ops.OpOverload] = None  # None: missing or wrong schema
    passed: dict[str, bool] = field(default_factory=dict)  # dtype -> numeric check passed
    error: Optional[str] = None  # the first thing that went wrong
    not_used: Optional[str] = None  # why this CPU never runs it (decided from the ISA, not probed)

    def usable(self, dtype: str) -> bool:
        return self.op is not None and self.passed.get(dtype, False)

    def fail(self, message: str) -> None:
        if self.error is None:
            self.error = message


_lock = threading.Lock()
_status: Optional[dict[str, OpStatus]] = None
_dtypes_checked: list[str] = []


def _at_least(level: str) -> bool:
    return ISA_LEVELS.index(selected_isa()) >= ISA_LEVELS.index(level)


def checked_dtypes() -> list[str]:
    """float32 always; bfloat16 only where the selected ISA computes it natively (below it bf16
    artifacts compute in float32, backends/cpu/compute_precision.py)."""
    try:
        native_bf16 = _at_least("avx512_bf16") and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    except (AttributeError, RuntimeError):  # private too: a torch without it gets float32 only
        native_bf16 = False
    return ["float32", "bfloat16"] if native_bf16 else ["float32"]


# Below VNNI, oneDNN's u8*s8 products go through vpmaddubsw, whose 16-bit pair sums saturate:
# wrong results, so the int8 ops are not used there (a decision from the ISA, not a probe failure).
INT8_NOT_USED = "not used below avx512_vnni (oneDNN's u8*s8 products saturate without VNNI)"


def op_for(name: str, dtype: str) -> Optional[torch._ops.OpOverload]:
    """The op overload if it passed its check for `dtype`, else None (the caller declines)."""
    status = _probe()[name]
    return status.op if status.usable(dtype) else None


def probe_report() -> dict:
    """Results for `ipexconvert doctor`: per op, whether it is usable per dtype, and why not."""
    status = _probe()
    return {
        "onednn_available": torch.backends.mkldnn.is_available(),
        "dtypes_checked": list(_dtypes_checked),
        "ops": {name: {"found": s.op is not None, "passed": dict(s.passed), "error": s.error, "not_used": s.not_used}
                for name, s in status.items()},
    }


def reset() -> None:
    """Forget the results, so the next use probes again (tests)."""
    global _status
    with _lock:
        _status = None


def _probe() -> dict[str, OpStatus]:
    global _status
    with _lock:
        if _status is None:
            _status = _run_all()
            _warn_failures(_status)
        return _status


def _run_all() -> dict[str, OpStatus]:
    status = {name: _lookup(name) for name in EXPECTED_ARGS}
    _dtypes_checked[:] = checked_dtypes()
    with torch.no_grad():
        for dtype in _dtypes_checked:
            _check_conv(status, dtype)
            _check_linear(status, dtype)
        _check_mkl_linear(status)
        if _at_least("avx512_vnni"):
            _check_int8(status)
        else:
            for name in EXPECTED_ARGS:
                if name.startswith("onednn."):
                    status[name].not_used = INT8_NOT_USED
    return status


def _lookup(name: str) -> OpStatus:
    status = OpStatus()
    if name.startswith("mkl.") and not torch.backends.mkl.is_available():
        status.fail("this torch build has no MKL")
        return status
    if not name.startswith("mkl.") and not torch.backends.mkldnn.is_available():
        status.fail("this torch build has no oneDNN")
        return status
    try:
        op = resolve_op(name)
    except (AttributeError, RuntimeError):
        status.fail("not found in this torch build")
        return status
    names = [a.name for a in op._schema.arguments]
    if names != EXPECTED_ARGS[name]:
        status.fail(f"unexpected schema ({', '.join(names)})")
        return status
    status.op = op
    return status


def _attempt(status: OpStatus, dtype: str, check: Callable[[], tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Run one op's check: `check` returns (got, want); record pass/fail for `dtype`."""
    if status.op is None:
        return
    try:
        got, want = check()
        err = ((got.float() - want).abs().max() / want.abs().max().clamp_min(1e-6)).item()
        ok = got.shape == want.shape and err < TOLERANCE[dtype]
        if not ok:
            status.fail(f"{dtype} result off (relative error {err:.2g}, shape {tuple(got.shape)})")
    except Exception as e:  # a private op may raise anything; it is then unusable, not fatal
        ok = False
        status.fail(f"{dtype} call failed: {' '.join(str(e).split())[:160]}")
    status.passed[dtype] = status.passed.get(dtype, True) and ok  # an op checked twice must pass both


def _rounded(shape, dtype: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A random tensor in `dtype` and its exact float32 value (the reference computes on that)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g).to(getattr(torch, dtype))
    return t, t.float()


def _check_conv(status: dict[str, OpStatus], dtype: str) -> None:
    stride, padding, dilation = [2, 1], [1, 0], [1, 1]
    x, xf = _rounded((2, 8, 9, 7), dtype, 1)
    x = x.contiguous(memory_format=torch.channels_last)
    reorder = status["mkldnn._reorder_convolution_weight"]

    def weights(groups: int, seed: int):
        """(weight, packed weight or the plain one if packing fails, float32 weight, bias, float32 bias)."""
        w, wf = _rounded((12, 8 // groups, 3, 3), dtype, seed)
        w = w.contiguous(memory_format=torch.channels_last)
        b, bf = _rounded((12,), dtype, seed + 1)
        packed = [w]

        def pack():
            packed[0] = reorder.op(w, padding, stride, dilation, groups, list(x.shape))
            return packed[0].to_dense(), wf

        _attempt(reorder, dtype, pack)
        return packed[0], wf, b, bf

    # groups=2 for the plain op, so a swapped groups/dilation argument cannot pass by luck.
    packed, wf, b, bf = weights(2, 2)
    ref = F.conv2d(xf, wf, bf, stride, padding, dilation, 2)
    conv = status["mkldnn._convolution_pointwise"]
    _attempt(conv, dtype, lambda: (conv.op(x, packed, b, padding, stride, dilation, 2, "relu", [], ""), ref.relu()))

    # groups=1 for .binary: with groups > 1 it takes an unfused fallback (which fails in bf16),
    # so the kernel only uses it for groups=1.
    packed, wf, b, bf = weights(1, 4)
    ref = F.conv2d(xf, wf, bf, stride, padding, dilation, 1)
    other, otherf = _rounded(tuple(ref.shape), dtype, 6)
    scale, scalef = _rounded((1, 12, 1, 1), dtype, 7)
    binary = status["mkldnn._convolution_pointwise.binary"]

    def add_relu_and_mul():
        added = binary.op(x, other, packed, b, padding, stride, dilation, 1, "add", 1.0, "relu", [], "")
        scaled = binary.op(x, scale, packed, b, padding, stride, dilation, 1, "mul", None, None, [], None)
        # Both results checked at once: stack them.
        return torch.stack([added.float(), scaled.float()]), torch.stack([(ref + otherf).relu(), ref * scalef])

    _attempt(binary, dtype, add_relu_and_mul)


def _check_linear(status: dict[str, OpStatus], dtype: str) -> None:
    x, xf = _rounded((2, 3, 24), dtype, 6)
    w, wf = _rounded((20, 24), dtype, 7)
    b, bf = _rounded((20,), dtype, 8)
    ref = F.linear(xf, wf, bf)
    other, otherf = _rounded(tuple(ref.shape), dtype, 9)

    reorder = status["mkldnn._reorder_linear_weight"]
    packed: list[torch.Tensor] = [w]

    def pack():
        packed[0] = reorder.op(w, None)
        return packed[0].to_dense(), wf

    _attempt(reorder, dtype, pack)
    linear = status["mkldnn._linear_pointwise"]
    _attempt(linear, dtype, lambda: (
        linear.op(x, packed[0], b, "gelu", [], "tanh"), F.gelu(ref, approximate="tanh")))
    binary = status["mkldnn._linear_pointwise.binary"]

    def add_and_mul():
        added = binary.op(x, other, packed[0], b, "add")
        multiplied = binary.op(x, other, packed[0], b, "mul")
        return torch.stack([added.float(), multiplied.float()]), torch.stack([ref + otherf, ref * otherf])

    _attempt(binary, dtype, add_and_mul)


def _check_mkl_linear(status: dict[str, OpStatus]) -> None:
    """Packed for 6 rows: run at 6 rows (the packed GEMM) and at 4 (its unpacked fallback)."""
    x, _ = _rounded((2, 3, 24), "float32", 10)
    w, _ = _rounded((20, 24), "float32", 11)
    b, _ = _rounded((20,), "float32", 12)
    pack, linear = status["mkl._mkl_reorder_linear_weight"], status["mkl._mkl_linear"]
    packed: list[torch.Tensor] = []

    def packs():
        packed.append(pack.op(w, 6))
        return torch.ones(1), torch.ones(1)  # opaque: checked through the GEMM below

    _attempt(pack, "float32", packs)
    if not packed:
        return
    _attempt(linear, "float32", lambda: (
        torch.cat([linear.op(x, packed[0], w, b, 6).flatten(), linear.op(x[:, :2], packed[0], w, b, 6).flatten()]),
        torch.cat([F.linear(x, w, b).flatten(), F.linear(x[:, :2], w, b).flatten()])))


def _int8_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 weight, float32 scales [out]), symmetric per output channel: any valid int8 weight serves the check."""
    scales = (weight.reshape(weight.shape[0], -1).abs().amax(dim=1) / 127.0).clamp(min=1e-8)
    q = torch.round(weight / scales.view(-1, *([1] * (weight.dim() - 1)))).clamp(-128, 127).to(torch.int8)
    return q, scales


def _check_int8(status: dict[str, OpStatus]) -> None:
    """The int8 ops against the qlinear/qconv2d reference implementations (same integer inputs).

    Checked with a float32 output, a bfloat16 output with relu, and a requantized uint8 output;
    the conv also with the fused residual add (+relu) that mutates its accumulator, with a
    bfloat16 accumulator and with a uint8 one summed into a uint8 output.
    """
    from ....ir.ops._quant import dequantize, quantize
    from ....ir.ops.qconv2d import QConv2dOp
    from ....ir.ops.qlinear import QLinearOp

    def qinput(shape, seed: int, channels_last: bool = False):
        x, _ = _rounded(shape, "float32", seed)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return quantize(x, 0.02, 131, "uint8")

    def stack(pairs):
        return torch.stack([g.float() for g, _ in pairs]), torch.stack([w.float() for _, w in pairs])

    # linear: x [2, 3, 24] -> 20
    xq = qinput((2, 3, 24), 10)
    wq, ws = _int8_weight(_rounded((20, 24), "float32", 11)[1])
    b = _rounded((20,), "float32", 12)[1]
    zps = torch.zeros(20, dtype=torch.int64)
    prepack, qlinear = status["onednn.qlinear_prepack"], status["onednn.qlinear_pointwise"]
    packed = [wq]

    def pack_linear():
        packed[0] = prepack.op(wq, None)
        return torch.ones(1), torch.ones(1)  # the packed layout is opaque: qlinear's check below covers it

    _attempt(prepack, "int8", pack_linear)

    def linear_ref(**attrs):
        return QLinearOp.reference([xq, wq, ws, b], QLinearOp.parse_attrs({"x_scale": 0.02, "x_zero_point": 131, **attrs}), {})

    def linear_calls():
        f32 = qlinear.op(xq, 0.02, 131, packed[0], ws, zps, b, 1.0, 0, torch.float32, "none", [], "")
        bf16 = qlinear.op(xq, 0.02, 131, packed[0], ws, zps, b, 1.0, 0, torch.bfloat16, "relu", [], "")
        u8 = qlinear.op(xq, 0.02, 131, packed[0], ws, zps, b, 0.05, 100, None, "none", [], "")
        want_u8 = linear_ref(output_dtype="uint8", output_scale=0.05, output_zero_point=100)
        return stack([(f32, linear_ref()), (bf16, linear_ref(post_ops=[{"kind": "relu"}])),
                      (dequantize(u8, 0.05, 100), dequantize(want_u8, 0.05, 100))])

    _attempt(qlinear, "int8", linear_calls)

    # conv: x [2, 8, 9, 7] channels-last, weight [12, 4, 3, 3], groups 2, stride 2x1, padding 1x0
    conv_args = dict(stride=[2, 1], padding=[1, 0], dilation=[1, 1])
    xq = qinput((2, 8, 9, 7), 13, channels_last=True)
    wq, ws = _int8_weight(_rounded((12, 4, 3, 3), "float32", 14)[1])
    b = _rounded((12,), "float32", 15)[1]
    zps = torch.zeros(12, dtype=torch.int64)
    cprepack, qconv, qbinary = (status["onednn.qconv_prepack"], status["onednn.qconv2d_pointwise"],
                                status["onednn.qconv2d_pointwise.binary"])
    cpacked = [wq]

    def pack_conv():
        cpacked[0] = cprepack.op(wq, ws, 0.02, 131, conv_args["stride"], conv_args["padding"],
                                 conv_args["dilation"], 2, None)
        return torch.ones(1), torch.ones(1)

    _attempt(cprepack, "int8", pack_conv)

    def conv_ref(inputs=None, **attrs):
        return QConv2dOp.reference(inputs or [xq, wq, ws, b], QConv2dOp.parse_attrs(
            {"x_scale": 0.02, "x_zero_point": 131, "groups": 2, **conv_args, **attrs}), {})

    def conv_calls():
        s, p, d = conv_args["stride"], conv_args["padding"], conv_args["dilation"]
        f32 = qconv.op(xq, 0.02, 131, cpacked[0], ws, zps, b, s, p, d, 2, 1.0, 0, torch.float32, "none", [], "")
        u8 = qconv.op(xq, 0.02, 131, cpacked[0], ws, zps, b, s, p, d, 2, 0.05, 100, None, "relu", [], "")
        want_u8 = conv_ref(output_dtype="uint8", output_scale=0.05, output_zero_point=100, post_ops=[{"kind": "relu"}])
        return stack([(f32, conv_ref()), (dequantize(u8, 0.05, 100), dequantize(want_u8, 0.05, 100))])

    _attempt(qconv, "int8", conv_calls)

    def binary_call():
        s, p, d = conv_args["stride"], conv_args["padding"], conv_args["dilation"]
        want = conv_ref()
        accum = _rounded(tuple(want.shape), "bfloat16", 16)[0].contiguous(memory_format=torch.channels_last)
        expected = (want + accum.float()).relu()
        got = qbinary.op(xq, 0.02, 131, cpacked[0], ws, zps, accum.clone(), b, s, p, d, 2, 1.0, 0, torch.bfloat16,
                         1.0, 0, "sum", 1.0, "relu", [], "")
        # uint8 accumulator (scale 0.03, zero point 120) into a uint8 output (0.05, 100)
        accum_u8 = quantize(accum.float(), 0.03, 120, "uint8").contiguous(memory_format=torch.channels_last)
        got_u8 = qbinary.op(xq, 0.02, 131, cpacked[0], ws, zps, accum_u8.clone(), b, s, p, d, 2, 0.05, 100, None,
                            0.03, 120, "sum", 1.0, "relu", [], "")
        want_u8 = conv_ref([xq, wq, ws, b, accum_u8], output_dtype="uint8", output_scale=0.05, output_zero_point=100,
                           accum_scale=0.03, accum_zero_point=120,
                           post_ops=[{"kind": "add", "operand": 4}, {"kind": "relu"}])
        return stack([(got, expected), (dequantize(got_u8, 0.05, 100), dequantize(want_u8, 0.05, 100))])

    _attempt(qbinary, "int8", binary_call)


def _warn_failures(status: dict[str, OpStatus]) -> None:
    """One line naming every op that cannot be used, and why."""
    bad = [f"{name} ({s.error})" for name, s in status.items()
           if s.not_used is None and (s.op is None or not s.passed or not all(s.passed.values()))]
    if bad:
        warnings.warn("ipexconvert: oneDNN kernels fall back to the reference for: " + "; ".join(bad),
                      RuntimeWarning, stacklevel=2)
