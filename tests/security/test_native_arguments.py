"""The native layers check their arguments before touching memory: a tensor whose channels, size,
dtype or layout does not fit the layer (a hostile residual, an input of the wrong width, a weight
whose header shape was edited) is a clear Python error, never a heap overflow or a crash.

The cases that could corrupt memory run in a child process (one per test, the cases in turn): a
regression then fails its test, the child's exit code (a signal: negative) and stderr ("double
free or corruption") in the message, instead of killing pytest."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ipexconvert.backends.cpu import native_lib as native
from ipexconvert.backends.cpu import onednn_direct as dnnl
from ipexconvert.errors import ArtifactError
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.kernels._torch_onednn import int8_allowed
from ipexconvert.runtime.kernels import NodeContext

DNNL = pytest.mark.skipif(not dnnl.available(), reason=f"ipexconvert._dnnl is not built: {dnnl.unavailable_reason()}")
INT8 = pytest.mark.skipif(not int8_allowed(selected_isa()), reason="the int8 layers need avx512_vnni")
NATIVE = pytest.mark.skipif(not native.available(), reason="ipexconvert._native is not built")

# argv: setup code, JSON list of cases, then the setup's own arguments (sys.argv[3:]). Each case
# runs after the setup, in a copy of its namespace, and prints one outcome line.
CHILD = """
import json, sys, torch
from ipexconvert.backends.cpu import native_lib as native
from ipexconvert.backends.cpu import onednn_direct as dnnl
CL = torch.channels_last
def cl(t):
    return t.contiguous(memory_format=CL)
env = dict(globals())
exec(sys.argv[1], env)
for case in json.loads(sys.argv[2]):
    try:
        exec(case, dict(env))
    except Exception as e:
        print("REFUSED", type(e).__name__ + ":", " ".join(str(e).split()), flush=True)
    else:
        print("ACCEPTED", flush=True)
"""


def assert_refused(setup: str, cases: list[tuple[str, str, str]], args: tuple[str, ...] = ()) -> None:
    """Each (code, error type, message pattern) in `cases`, run after `setup` in one child process,
    raises that error with a matching message; the child exits cleanly."""
    result = subprocess.run([sys.executable, "-c", CHILD, setup, json.dumps([c for c, _, _ in cases]), *args],
                            capture_output=True, text=True, timeout=600)
    outcomes = [line for line in result.stdout.splitlines() if line.startswith(("REFUSED ", "ACCEPTED"))]
    died = f"exit code {result.returncode} (negative: killed by that signal)\nstderr: {result.stderr[-3000:]}"
    for i, (code, error, match) in enumerate(cases):
        assert i < len(outcomes), f"the child died running {code!r}: {died}"
        outcome = outcomes[i]
        assert outcome.startswith(f"REFUSED {error}:") and re.search(match, outcome), f"{code!r} -> {outcome}"
    assert result.returncode == 0, died


# ---- _dnnl.Conv --------------------------------------------------------------------------------

@DNNL
def test_conv_refuses_tensors_that_do_not_fit():
    setup = """
w = torch.randn(64, 32, 3, 3)
conv = dnnl.raw.Conv(w, None, torch.randn(64), (1, 1), (1, 1), (1, 1), "float32", "float32", relu=True, sum=True)
x = cl(torch.randn(8, 32, 32, 32))
pw = dnnl.raw.Conv(torch.randn(64, 32, 1, 1), None, None, (1, 1), (0, 0), (1, 1), "float32", "float32")
s2 = dnnl.raw.Conv(torch.randn(64, 32, 1, 1), None, None, (2, 2), (0, 0), (1, 1), "float32", "float32")
px = cl(torch.randn(2, 32, 6, 5))
"""
    assert_refused(setup, [
        # The residual oneDNN sums into is the output buffer: 8 of the 64 channels it writes.
        ("conv.run(x, cl(torch.randn(8, 8, 32, 32)))", "ValueError", r"out \[8, 8, 32, 32\] must be \[8, 64, 32, 32\]"),
        ("conv.run(cl(torch.randn(8, 8, 32, 32)), cl(torch.randn(8, 64, 32, 32)))", "ValueError",
         r"x \[8, 8, 32, 32\] has 8 channels; this layer takes 32"),
        ("conv.run(cl(torch.randn(8, 32, 32, 32, dtype=torch.bfloat16)), cl(torch.randn(8, 64, 32, 32)))", "ValueError",
         "x has dtype bfloat16; this layer takes float32"),
        ("conv.run(x, cl(torch.randn(8, 64, 32, 32, dtype=torch.float64)))", "ValueError",
         "out has dtype float64; this layer takes float32"),
        ("conv.run(x, cl(torch.randn(8, 64, 16, 16)))", "ValueError", r"out \[8, 64, 16, 16\] must be \[8, 64, 32, 32\]"),
        ("conv.run(x, cl(torch.randn(9, 64, 32, 32)))", "ValueError", r"must be \[8, 64, 32, 32\]"),
        ("conv.run(x, torch.randn(8, 64, 32, 64)[..., ::2])", "ValueError", "channels-last"),
        ("conv.run(x, torch.randn(64 * 32 * 32).as_strided((8, 64, 32, 32), (0, 1, 2048, 64)))", "ValueError",
         "channels-last"),  # the 8 images overlap
        ("conv.run(x[:, :, :, :0], cl(torch.randn(8, 64, 32, 1)))", "ValueError", "input size is 0"),
        ("dnnl.raw.Conv(torch.randn(4, 32, 5, 5), None, None, (1, 1), (0, 0), (1, 1), 'float32', 'float32')"
         ".run(cl(torch.randn(8, 32, 3, 3)), cl(torch.randn(8, 4, 1, 1)))", "ValueError", "smaller than the kernel's extent"),
        ("conv.implementation(-1, 32, 32)", "ValueError", "batch size is -1"),
        ("conv.run([1.0], cl(torch.randn(8, 64, 32, 32)))", "TypeError", "x must be a tensor"),
        # A fold reads the input as other images: only where the bytes are the same (Conv.folds).
        ("conv.run(x, cl(torch.randn(8, 64, 32, 32)), fold=2)", "ValueError", "folded 2 ways"),  # 3x3
        ("pw.run(px, cl(torch.randn(2, 64, 6, 5)), fold=4)", "ValueError", "folded 4 ways"),  # 6 rows
        ("pw.run(px, cl(torch.randn(2, 64, 6, 5)), fold=0)", "ValueError", "folded 0 ways"),
        ("pw.run(px, cl(torch.randn(2, 64, 6, 5)), fold=-2)", "ValueError", "folded -2 ways"),
        ("pw.run(px, cl(torch.randn(2, 64, 6, 5)), fold=1 << 62)", "ValueError", "folded"),
        ("s2.run(cl(torch.randn(2, 32, 11, 5)), cl(torch.randn(2, 64, 6, 3)), fold=2)", "ValueError",
         "folded 2 ways"),  # 11 rows: not 2 x 6, the folded images' rows would shift
        ("out = cl(torch.zeros(2, 64, 6, 5)); pw.run(px, out, fold=3); assert out.abs().sum() > 0; raise ValueError('ran')",
         "ValueError", "^REFUSED ValueError: ran$"),  # a fold that fits runs
        # Side by side copies the images into one wide image: only a batch of 2 or more, and not folded as well.
        ("conv.run(x[:1], cl(torch.randn(1, 64, 32, 32)), side_by_side=True)", "ValueError",
         "side by side takes 2 images or more"),
        ("pw.run(px, cl(torch.randn(2, 64, 6, 5)), fold=2, side_by_side=True)", "ValueError", "one at a time"),
        ("pw.run(px, cl(torch.randn(2, 64, 6, 5)), stack=True, side_by_side=True)", "ValueError", "one at a time"),
        ("conv.run(x, cl(torch.randn(8, 64, 32, 32)), stack=True)", "ValueError", "cannot stack"),  # 3x3
        ("s2.run(cl(torch.randn(2, 32, 11, 5)), cl(torch.randn(2, 64, 6, 3)), stack=True)", "ValueError",
         "cannot stack"),  # 11 rows at stride 2: the stacked images' rows would shift
        ("conv.run(x[:, :, :, :0], cl(torch.randn(8, 64, 32, 1)), side_by_side=True)", "ValueError", "input size is 0"),
        ("out = cl(torch.zeros(8, 64, 32, 32)); conv.run(x, out, side_by_side=True); ref = cl(torch.zeros(8, 64, 32, 32));"
         " conv.run(x, ref); assert torch.allclose(out, ref, atol=1e-4); raise ValueError('ran')", "ValueError",
         "^REFUSED ValueError: ran$"),  # side by side on 8 images runs, the same values
    ])


@DNNL
def test_conv_refuses_bad_geometry_and_weights():
    setup = "w = torch.randn(64, 32, 3, 3)\n"
    make = "dnnl.raw.Conv({}).run(cl(torch.randn(2, 32, 8, 8)), cl(torch.randn(2, 64, 8, 8)))"
    assert_refused(setup, [(make.format(args), "ValueError", match) for args, match in [
        ("w, None, None, (0, 1), (1, 1), (1, 1), 'float32', 'float32'", "stride .* is 0"),  # divided by before
        ("w, None, None, (1, 1), (-2, 1), (1, 1), 'float32', 'float32'", "padding .* is -2"),
        ("w, None, None, (1, 1), (1, 1), (0, 1), 'float32', 'float32'", "dilation .* is 0"),
        ("w, None, None, (1, 1), (1 << 40, 1), (1, 1), 'float32', 'float32'", "padding .* is 1099511627776"),
        ("w.int(), None, None, (1, 1), (1, 1), (1, 1), 'float32', 'float32'", "weight has dtype int32"),
        ("w.half(), None, None, (1, 1), (1, 1), (1, 1), 'bfloat16', 'bfloat16'", "weight has dtype float16"),
        ("w, None, None, (1, 1), (1, 1), (1, 1), 'float32', 'uint8'", "output must be float32 too"),
        ("w, None, torch.randn(63), (1, 1), (1, 1), (1, 1), 'float32', 'float32'", r"bias must be float32 \[64\]"),
        ("w, torch.ones(64), None, (1, 1), (1, 1), (1, 1), 'float32', 'float32'", "w_scales are for int8 layers only"),
        ("w[:, :0], None, None, (1, 1), (1, 1), (1, 1), 'float32', 'float32'", "empty dim"),
        ("w[0], None, None, (1, 1), (1, 1), (1, 1), 'float32', 'float32'", "must be OIHW"),
        ("w, None, None, (1, 1), (1, 1), (1, 1), '', 'float32'", "src: unsupported data type ''"),
        ("w, None, None, (1, 1), (1, 1), (1, 1), 'float32', 'float32', sum=True, sum_type='uint8'",
         "sum_type uint8 is not the output's type float32"),
    ]])


@DNNL
@INT8
def test_int8_conv_at_batch_64_refuses_an_edited_weight():
    # A 1x1 int8 conv at batch 64 on 7x7 images runs as a matmul over the NHWC rows: a weight whose
    # header shape was edited from [64, 32, 1, 1] to [32, 64, 1, 1] made it read x as 64-wide rows.
    setup = """
w = torch.randint(-127, 128, (64, 32, 1, 1), dtype=torch.int8).reshape(32, 64, 1, 1)  # the header edit
conv = dnnl.raw.Conv(w, torch.full((32,), 0.01), torch.randn(32), (1, 1), (0, 0), (1, 1), "uint8", "float32",
                     x_scale=0.05, x_zero_point=3)
u8 = cl(torch.randint(0, 256, (64, 64, 7, 7), dtype=torch.uint8))
"""
    assert_refused(setup, [
        ("conv.run(cl(torch.randint(0, 256, (64, 32, 7, 7), dtype=torch.uint8)), cl(torch.empty(64, 32, 7, 7)))",
         "ValueError", r"x \[64, 32, 7, 7\] has 32 channels; this layer takes 64"),
        ("conv.run(cl(torch.randn(64, 64, 7, 7)), cl(torch.empty(64, 32, 7, 7)))", "ValueError",
         "x has dtype float32; this layer takes uint8"),
        ("conv.run(u8, cl(torch.empty(64, 32, 7, 7, dtype=torch.uint8)))", "ValueError",
         "out has dtype uint8; this layer takes float32"),
        ("conv.run(u8, cl(torch.empty(64, 16, 7, 7)))", "ValueError", r"must be \[64, 32, 7, 7\]"),
        ("out = cl(torch.empty(64, 32, 7, 7)); conv.run(u8, out); assert out.isfinite().all(); raise ValueError('ran')",
         "ValueError", "^REFUSED ValueError: ran$"),  # the right tensors still run
    ])


@DNNL
@INT8
def test_int8_conv_refuses_bad_quantization_arguments():
    setup = "w = torch.randint(-127, 128, (16, 8, 3, 3), dtype=torch.int8)\n"
    make = "dnnl.raw.Conv({}, stride=(1, 1), padding=(1, 1), dilation=(1, 1), src='uint8', dst='uint8')"
    assert_refused(setup, [(make.format(args), "ValueError", match) for args, match in [
        ("w, torch.full((15,), 0.01), None", r"w_scales must be float32 \[16\]"),
        ("w, None, None", "needs per-channel weight scales"),
        ("w, torch.full((16,), 0.01), None, x_scale=0.0", "x_scale is 0"),
        ("w, torch.full((16,), 0.01), None, y_scale=float('inf')", "y_scale is inf"),
        ("w, torch.full((16,), 0.01), None, x_zero_point=300", "x_zero_point 300 is outside"),
        ("w, torch.full((16,), 0.01), None, y_zero_point=-1", "y_zero_point -1 is outside"),
        ("w, torch.full((16,), 0.01), None, sum=True, sum_zero_point=256", "sum_zero_point 256 is outside"),
        ("w.float(), torch.full((16,), 0.01), None", "weight has dtype float32"),
    ]])


# ---- _dnnl.MaxPool -----------------------------------------------------------------------------

@DNNL
def test_max_pool_refuses_tensors_that_do_not_fit():
    setup = "pool = dnnl.raw.MaxPool((3, 3), (2, 2), (1, 1), (1, 1), 'float32')\n"
    assert_refused(setup, [
        # A float32 pool reading and writing uint8 buffers: 4 bytes an element, a quarter of them there.
        ("pool.run(cl(torch.zeros(4, 16, 32, 32, dtype=torch.uint8)), cl(torch.zeros(4, 16, 16, 16, dtype=torch.uint8)))",
         "ValueError", "x has dtype uint8; this layer takes float32"),
        ("pool.run(cl(torch.randn(4, 16, 32, 32)), cl(torch.zeros(4, 16, 16, 16, dtype=torch.bfloat16)))",
         "ValueError", "out has dtype bfloat16; this layer takes float32"),
        ("pool.run(cl(torch.randn(4, 16, 32, 32)), cl(torch.randn(4, 16, 8, 8)))", "ValueError",
         r"out \[4, 16, 8, 8\] must be \[4, 16, 16, 16\]"),
        ("pool.run(cl(torch.randn(4, 16, 32, 32)), cl(torch.randn(4, 8, 16, 16)))", "ValueError",
         r"out \[4, 8, 16, 16\] must be \[4, 16, 16, 16\]"),
        ("pool.run(cl(torch.randn(4, 16, 32, 32)), cl(torch.randn(2, 16, 16, 16)))", "ValueError",
         r"out \[2, 16, 16, 16\] must be \[4, 16, 16, 16\]"),
        ("pool.run(torch.randn(4, 16, 32, 32), cl(torch.randn(4, 16, 16, 16)))", "ValueError", "channels-last"),
        ("dnnl.raw.MaxPool((3, 3), (2, 2), (0, 0), (1, 1), 'float32').run(cl(torch.randn(4, 16, 2, 2)), "
         "cl(torch.randn(4, 16, 1, 1)))", "ValueError", "smaller than the kernel's extent"),
        ("dnnl.raw.MaxPool((3, 3), (0, 2), (1, 1), (1, 1), 'float32').run(cl(torch.randn(1, 4, 8, 8)), "
         "cl(torch.randn(1, 4, 4, 4)))", "ValueError", "stride .* is 0"),  # divided by before
        ("dnnl.raw.MaxPool((3, 3), (2, 2), (2, 2), (1, 1), 'float32')", "ValueError", "more than half the kernel"),
        ("dnnl.raw.MaxPool((0, 3), (2, 2), (0, 0), (1, 1), 'float32')", "ValueError", "kernel .* is 0"),
        ("dnnl.raw.MaxPool((3, 3), (2, 2), (1, 1), (1, 1), 'int32')", "ValueError", "unsupported data type 'int32'"),
        ("dnnl.raw.MaxPool((3, 3, 3), (2, 2), (1, 1), (1, 1), 'float32')", "TypeError", "incompatible function arguments"),
    ])


# ---- _dnnl.Linear ------------------------------------------------------------------------------

@DNNL
@INT8
def test_qlinear_refuses_tensors_that_do_not_fit():
    setup = """
w = torch.randint(-127, 128, (24, 48), dtype=torch.int8)
linear = dnnl.raw.Linear(w, torch.full((24,), 0.01), torch.randn(24), "uint8", "float32", x_scale=0.05)
"""
    assert_refused(setup, [
        ("linear.run(torch.zeros(64, 40, dtype=torch.uint8), torch.empty(64, 24))", "ValueError",
         r"must end in in_features \(48\)"),  # the wrong K
        # A float32 output layer writing into a uint8 buffer: 4 bytes an element into 1.
        ("linear.run(torch.zeros(64, 48, dtype=torch.uint8), torch.empty(64, 24, dtype=torch.uint8))", "ValueError",
         "out has dtype uint8; this layer takes float32"),
        ("linear.run(torch.zeros(64, 48, dtype=torch.int32), torch.empty(64, 24))", "ValueError",
         "x has dtype int32; this layer takes uint8"),
        ("linear.run(torch.zeros(64, 48, dtype=torch.uint8), torch.empty(64, 23))", "ValueError", "leading dims"),
        ("linear.run(torch.zeros(64, 48, dtype=torch.uint8), torch.empty(32, 24))", "ValueError", "leading dims"),
        ("linear.implementation(0)", "ValueError", "at least one row"),
    ])


@DNNL
def test_linear_refuses_bad_weights():
    assert_refused("", [(f"dnnl.raw.Linear({args})", "ValueError", match) for args, match in [
        ("torch.randn(24, 48), None, None, 'float32', 'bfloat16'", "output must be float32 too"),
        ("torch.randn(24, 48).int(), None, None, 'float32', 'float32'", "weight has dtype int32"),
        ("torch.randn(24, 0), None, None, 'float32', 'float32'", "empty dim"),
        ("torch.randn(24, 48, 1), None, None, 'float32', 'float32'", r"must be \[out_features, in_features\]"),
        ("torch.randn(24, 48), None, None, 'float32', 'float32', multiplier=torch.ones(23)",
         r"multiplier must be float32 \[24\]"),
        ("torch.randn(24, 48), torch.ones(24), None, 'float32', 'float32'", "w_scales are for int8 layers only"),
    ]])


# ---- _native -----------------------------------------------------------------------------------

@NATIVE
def test_native_kernels_refuse_mismatched_sizes():
    bf16 = "dtype=torch.bfloat16"
    assert_refused("", [
        ("native.raw.embedding(torch.randn(10, 8), torch.tensor([1, 10, 2]), torch.empty(3, 8), None, 1)", "IndexError",
         "embedding index 10 .* table of 10 rows"),
        ("native.raw.embedding(torch.randn(10, 8), torch.tensor([1, -1]), torch.empty(2, 8), None, 1)", "IndexError",
         "embedding index -1"),
        ("native.raw.embedding(torch.randn(10, 8), torch.tensor([1, 2]), torch.empty(2, 7), None, 1)", "ValueError",
         "out .* must have indices.numel"),
        ("native.raw.concat_channels(cl(torch.randn(2, 4, 5, 5)), cl(torch.randn(2, 3, 5, 5)), cl(torch.empty(2, 6, 5, 5)),"
         " None, 1)", "ValueError", r"must be \[N, Ca \+ Cb, H, W\]"),
        ("native.raw.concat_channels(cl(torch.randn(2, 4, 5, 5)), cl(torch.randn(2, 3, 5, 5)), torch.empty(2, 7, 5, 5),"
         " None, 1)", "ValueError", "dense channels-last"),
        ("native.raw.concat_channels(cl(torch.randn(2, 4, 5, 5)), cl(torch.randn(2, 3, 5, 5)).half(),"
         " cl(torch.empty(2, 7, 5, 5)), None, 1)", "ValueError", "has dtype"),
        (f"native.raw.attention(*(torch.randn(1, 2, 4, 32, {bf16}) for _ in range(2)), torch.randn(1, 2, 4, 16, {bf16}),"
         f" None, torch.empty(1, 2, 4, 32, {bf16}), 1.0, None, 1)", "ValueError", "does not match"),
        (f"native.raw.attention(*(torch.randn(1, 2, 4, 40, {bf16}) for _ in range(3)), None,"
         f" torch.empty(1, 2, 4, 40, {bf16}), 1.0, None, 1)", "ValueError", "head_dim 40 is not a multiple"),
        (f"native.raw.attention(*(torch.randn(1, 2, 4, 32, {bf16}) for _ in range(3)), None,"
         f" torch.empty(1, 2, 3, 32, {bf16}), 1.0, None, 1)", "ValueError", "must have q's shape"),
        ("native.raw.int8_gemm(torch.zeros(2, 4, dtype=torch.uint8), 0, torch.zeros(64, dtype=torch.int16), 1 << 62,"
         " torch.ones(1), None, False, torch.empty(2, 1), 1.0, 0, None, 1)", "ValueError", "n = 4611686018427387904 is outside"),
    ])


# ---- the kernel factories: a constant that disagrees with the node's specs ----------------------

def _context(op: str, attrs: dict, tensors: list, constant_slots: set[int], overrides: dict[int, torch.Tensor]):
    """The node's context as its specs were written (from `tensors`), with some constants replaced
    by tensors that disagree with those specs (an edited artifact)."""
    from ipexconvert.ir.opdef import get_op

    parsed = get_op(op).parse_attrs(attrs)
    specs = tuple(None if t is None else TensorSpec.of(t) for t in tensors)
    out = get_op(op).infer(specs, parsed)
    constants = tuple(overrides.get(i, t) if i in constant_slots else None for i, t in enumerate(tensors))
    return NodeContext(op=op, attrs=parsed, constants=constants, input_specs=specs, output_specs=tuple(out),
                       device="cpu", isa=selected_isa())


def _usable() -> bool:
    return dnnl.available() and dnnl.usable(selected_isa())


@DNNL
def test_conv2d_factory_refuses_a_weight_its_specs_do_not_declare():
    from ipexconvert.backends.cpu.kernels.conv2d import onednn_direct_conv2d

    if not _usable():
        pytest.skip(f"the direct oneDNN layers do not run here: {dnnl.report()}")
    x, w, b = torch.randn(1, 8, 6, 6).contiguous(memory_format=torch.channels_last), torch.randn(16, 8, 3, 3), torch.randn(16)
    attrs = {"padding": [1, 1]}
    assert onednn_direct_conv2d(_context("conv2d", attrs, [x, w, b], {1, 2}, {})) is not None
    for edited, match in ((w.reshape(8, 16, 3, 3), r"weight has shape \[8, 16, 3, 3\].*\[16, 8, 3, 3\]"),
                          (torch.randn(16, 4, 3, 3), r"weight has shape \[16, 4, 3, 3\]"),
                          (w.double(), "weight has dtype float64")):
        with pytest.raises(ArtifactError, match=match):
            onednn_direct_conv2d(_context("conv2d", attrs, [x, w, b], {1, 2}, {1: edited}))
    with pytest.raises(ArtifactError, match=r"bias has shape \[15\]"):
        onednn_direct_conv2d(_context("conv2d", attrs, [x, w, b], {1, 2}, {2: b[:15]}))


@DNNL
@INT8
def test_qconv2d_and_qlinear_factories_refuse_weights_their_specs_do_not_declare():
    from ipexconvert.backends.cpu.kernels.qconv2d import onednn_direct_qconv2d
    from ipexconvert.backends.cpu.kernels.qlinear import onednn_direct_qlinear

    if not _usable():
        pytest.skip(f"the direct oneDNN layers do not run here: {dnnl.report()}")
    x = torch.randint(0, 256, (1, 8, 6, 6), dtype=torch.uint8).contiguous(memory_format=torch.channels_last)
    w, scales, b = torch.randint(-127, 128, (16, 8, 3, 3), dtype=torch.int8), torch.full((16,), 0.01), torch.randn(16)
    attrs = {"x_scale": 0.05, "x_zero_point": 3, "padding": [1, 1], "output_dtype": "float32"}
    tensors = [x, w, scales, b]
    assert onednn_direct_qconv2d(_context("qconv2d", attrs, tensors, {1, 2, 3}, {})) is not None
    with pytest.raises(ArtifactError, match=r"weight has shape \[8, 16, 3, 3\]"):
        onednn_direct_qconv2d(_context("qconv2d", attrs, tensors, {1, 2, 3}, {1: w.reshape(8, 16, 3, 3)}))
    with pytest.raises(ArtifactError, match=r"w_scales has shape \[12\]"):
        onednn_direct_qconv2d(_context("qconv2d", attrs, tensors, {1, 2, 3}, {2: scales[:12]}))

    xl = torch.randint(0, 256, (2, 5, 48), dtype=torch.uint8)
    wl, sl, bl = torch.randint(-127, 128, (24, 48), dtype=torch.int8), torch.full((24,), 0.01), torch.randn(24)
    lattrs = {"x_scale": 0.05, "x_zero_point": 3, "output_dtype": "float32"}
    assert onednn_direct_qlinear(_context("qlinear", lattrs, [xl, wl, sl, bl], {1, 2, 3}, {})) is not None
    with pytest.raises(ArtifactError, match=r"weight has shape \[48, 24\]"):  # K of the header edit: 24, not 48
        onednn_direct_qlinear(_context("qlinear", lattrs, [xl, wl, sl, bl], {1, 2, 3}, {1: wl.reshape(48, 24)}))
    with pytest.raises(ArtifactError, match=r"bias has shape \[20\]"):
        onednn_direct_qlinear(_context("qlinear", lattrs, [xl, wl, sl, bl], {1, 2, 3}, {3: bl[:20]}))


# ---- end to end: the tiny CNN's kernels as the executor built them -------------------------------

E2E = """
import ipexconvert
from ipexconvert.errors import ArtifactError
model = ipexconvert.load_artifact(sys.argv[3])
steps = [s for s in model.executor.steps if s.kernel_name == "onednn_direct:conv2d"]
assert steps, [s.kernel_name for s in model.executor.steps]
residual_step = next(s for s in steps if s.in_place)  # a conv summing a residual into it
node = next(n for n in model.graph.nodes if n.name == residual_step.node)
x_spec, out_spec = model.graph.values[node.inputs[0]], model.graph.values[node.outputs[0]]
x = cl(torch.randn(64, *x_spec.shape[1:]))
n, c, h, w = out_spec.shape
"""


@DNNL
def test_tiny_cnn_conv_kernels_refuse_hostile_tensors(tiny_cnn_artifact):
    """A conv of the tiny CNN that sums a residual, called as the executor calls it at batch 64."""
    if not _usable():
        pytest.skip(f"the direct oneDNN layers do not run here: {dnnl.report()}")
    half_x = "cl(torch.randn(64, max(1, x.shape[1] // 2), *x.shape[2:]))"
    assert_refused(E2E, [
        # The residual (the value the add post-op reads) with half the channels its spec claims.
        ("residual_step.kernel([x, None, None, cl(torch.randn(64, c // 2, h, w))], {})", "ArtifactError",
         r"onednn_direct:conv2d refused its arguments: out \[64, \d+, \d+, \d+\] must be \[64, \d+.*fix: re-create"),
        (f"residual_step.kernel([{half_x}, None, None, cl(torch.randn(64, c, h, w))], {{}})", "ArtifactError",
         r"onednn_direct:conv2d refused its arguments: x \[64, \d+, \d+, \d+\] has \d+ channels"),
        ("residual_step.kernel([x, None, None, cl(torch.randn(64, c, h, w).bfloat16())], {})", "ArtifactError",
         "out has dtype bfloat16; this layer takes float32"),
        ("out = residual_step.kernel([x, None, None, cl(torch.randn(64, c, h, w))], {});"
         " raise ValueError(f'ran {list(out.shape)}')", "ValueError", r"ran \[64, \d+, \d+, \d+\]"),
    ], (str(tiny_cnn_artifact),))


@DNNL
def test_tiny_cnn_with_a_conv_weight_reshaped_is_refused_at_load(tiny_cnn_artifact):
    """The same bytes under another header shape: the executor's kernel factory refuses it (it would
    otherwise read its input at the edited width)."""
    from ipexconvert.artifact import read_artifact
    from ipexconvert.runtime.executor import Executor

    if not _usable():
        pytest.skip(f"the direct oneDNN layers do not run here: {dnnl.report()}")
    _, program = read_artifact(Path(tiny_cnn_artifact))
    Executor(program)  # as converted: builds
    conv = next(n for n in program.graph.nodes if n.op == "conv2d"
                and program.weights[n.inputs[1]].shape[0] != program.weights[n.inputs[1]].shape[1])
    weight = program.weights[conv.inputs[1]]
    o, i, kh, kw = weight.shape
    program.weights[conv.inputs[1]] = weight.reshape(i, o, kh, kw)
    with pytest.raises(ArtifactError, match=rf"weight has shape \[{i}, {o}, {kh}, {kw}\]"):
        Executor(program)
