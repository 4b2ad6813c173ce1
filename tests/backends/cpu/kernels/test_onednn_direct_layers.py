"""onednn_direct:conv2d, onednn_direct:qconv2d and onednn_direct:max_pool2d (direct oneDNN primitives, ipexconvert.backends.cpu.onednn_direct) against the op references,
with the same cases as the torch-oneDNN kernels (test_torch_onednn_conv2d.py, test_torch_onednn_qconv2d.py): float32
and bfloat16, int8 with float32 / bfloat16 / requantized uint8 outputs, relu and residual sums (float,
and uint8 into any output), dynamic batch with one kernel, the residual left untouched, the
layouts, what the factories decline, and a failing self-check turning the layers off."""
from __future__ import annotations

import pytest
import torch
import test_torch_onednn_conv2d as float_cases
import test_torch_onednn_qconv2d as int8_cases
from torch_onednn_helpers import BF16_TOLERANCE, FP32_TOLERANCE, context, reference, rel_err, run
from test_torch_onednn_qlinear import OUTPUTS, check

from ipexconvert.backends.cpu import onednn_direct as dnnl
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.kernels._torch_onednn import int8_allowed
from ipexconvert.backends.cpu.kernels.conv2d import onednn_direct_conv2d
from ipexconvert.backends.cpu.kernels.max_pool2d import onednn_direct_max_pool2d
from ipexconvert.backends.cpu.kernels.qconv2d import onednn_direct_qconv2d
from ipexconvert.runtime.kernels import resolve_kernel

pytestmark = pytest.mark.skipif(not dnnl.usable(selected_isa()),
                                reason=f"direct oneDNN layers unavailable: {dnnl.report()['error']}")
CL = torch.channels_last
FLOAT_POST_OPS = ["none", "relu", "add", "add-relu"]
INT8 = pytest.mark.skipif(not int8_allowed(selected_isa()), reason="int8 needs avx512_vnni")


@pytest.mark.parametrize("channels_last", [True, False])
@pytest.mark.parametrize("post_ops", FLOAT_POST_OPS)
@pytest.mark.parametrize("shape", ["3x3", "1x1-no-bias"])
@pytest.mark.parametrize("dtype", float_cases.DTYPES)
def test_float_matches_reference(dtype, shape, post_ops, channels_last):
    attrs, exact, tensors = float_cases.make(shape, float_cases.POST_OPS[post_ops], dtype, channels_last)
    kernel = onednn_direct_conv2d(context("conv2d", attrs, tensors, {1, 2}))
    assert kernel is not None and kernel.name == "onednn_direct:conv2d"
    operand = tensors[3].clone() if len(tensors) > 3 else None
    got = run(kernel, tensors, {})
    assert got.dtype == tensors[0].dtype
    assert got.is_contiguous(memory_format=CL if channels_last else torch.contiguous_format)
    tolerance = FP32_TOLERANCE if dtype == "float32" else BF16_TOLERANCE
    assert rel_err(got, reference("conv2d", attrs, exact)) < tolerance
    if operand is not None:
        assert torch.equal(tensors[3], operand)  # oneDNN sums into its output: the operand is copied first


@pytest.mark.parametrize("dtype", float_cases.DTYPES)
def test_float_dynamic_batch_one_kernel(dtype):
    attrs, _, tensors = float_cases.make("3x3", float_cases.POST_OPS["add-relu"], dtype, True)
    kernel = onednn_direct_conv2d(context("conv2d", attrs, tensors, {1, 2}, dynamic_batch=True))
    for batch in (1, 3, 1):
        _, exact, tensors = float_cases.make("3x3", float_cases.POST_OPS["add-relu"], dtype, True, batch=batch)
        got = run(kernel, tensors, {"batch": batch})
        assert got.shape[0] == batch
        assert rel_err(got, reference("conv2d", attrs, exact)) < (FP32_TOLERANCE if dtype == "float32" else BF16_TOLERANCE)


@pytest.mark.parametrize("post_ops", ["gelu", "mul-relu", "relu-add", "add-gelu"])
def test_float_declines_other_post_ops(post_ops):
    attrs, _, tensors = float_cases.make("3x3", float_cases.POST_OPS[post_ops], "float32", True)
    ctx = context("conv2d", attrs, tensors, {1, 2})
    assert onednn_direct_conv2d(ctx) is None
    assert resolve_kernel(ctx).name == "torch_onednn:conv2d"  # torch's operator takes it


def test_float_declines_groups_and_broadcast_operands():
    attrs, _, tensors = float_cases.make("depthwise", [], "float32", True)
    assert onednn_direct_conv2d(context("conv2d", attrs, tensors, {1, 2})) is None
    attrs, _, tensors = float_cases.make("3x3", float_cases.POST_OPS["add"], "float32", True, operand="per-channel")
    assert onednn_direct_conv2d(context("conv2d", attrs, tensors, {1, 2})) is None


@INT8
@pytest.mark.parametrize("post_ops", list(int8_cases.POST_OPS))
@pytest.mark.parametrize("output", list(OUTPUTS))
def test_int8_matches_reference(output, post_ops):
    attrs, tensors = int8_cases.make(1, output, post_ops)
    kernel = onednn_direct_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3}))
    if output == "uint8" and post_ops.startswith("add"):  # a float residual cannot go into a uint8 output
        assert kernel is None
        return
    assert kernel is not None and kernel.name == "onednn_direct:qconv2d" and kernel.consumed_inputs == {1, 2, 3}
    residual = tensors[4].clone() if len(tensors) > 4 else None
    got = run(kernel, tensors, {})
    assert got.is_contiguous(memory_format=CL)
    check(got, int8_cases.reference(attrs, tensors), attrs)
    if residual is not None:
        assert torch.equal(tensors[4], residual)


@INT8
@pytest.mark.parametrize("post_ops", ["add", "add-relu"])
@pytest.mark.parametrize("output", list(OUTPUTS))
def test_int8_uint8_residual(output, post_ops):
    """uint8 output: oneDNN sums the residual in its own scale; float output (ResNet's last block):
    dequantized first, then summed. The residual the kernel was given stays untouched."""
    attrs, tensors = int8_cases.make_u8_accum(1, output, post_ops)
    residual = tensors[4].clone()
    kernel = onednn_direct_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3}))
    assert kernel is not None and kernel.name == "onednn_direct:qconv2d"
    got = run(kernel, tensors, {})
    assert got.is_contiguous(memory_format=CL)
    check(got, int8_cases.reference(attrs, tensors), attrs)
    assert torch.equal(tensors[4], residual)


@INT8
@pytest.mark.parametrize("output,post_ops", [("float32", "relu"), ("bfloat16", "add-relu"), ("uint8", "relu")])
def test_int8_dynamic_batch_and_contiguous_layouts(output, post_ops):
    attrs, tensors = int8_cases.make(1, output, post_ops)
    kernel = onednn_direct_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3}, dynamic_batch=True))
    for batch in (1, 3):
        _, tensors = int8_cases.make(1, output, post_ops, batch=batch)
        got = run(kernel, tensors, {"batch": batch})
        assert got.shape[0] == batch
        check(got, int8_cases.reference(attrs, tensors), attrs)
    attrs, tensors = int8_cases.make(1, output, post_ops)
    tensors = [None if t is None else t.contiguous() for t in tensors]
    got = run(onednn_direct_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3})), tensors, {})
    assert got.is_contiguous()
    check(got, int8_cases.reference(attrs, tensors), attrs)


@INT8
def test_int8_declines(monkeypatch):
    attrs, tensors = int8_cases.make(2, "float32", "relu")
    assert onednn_direct_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3})) is None  # groups
    attrs, tensors = int8_cases.make(1, "float32", "relu")
    assert onednn_direct_qconv2d(context("qconv2d", attrs, tensors, {1, 2, 3}, isa="avx512")) is None  # no VNNI
    assert onednn_direct_qconv2d(context("qconv2d", attrs, tensors, {2, 3})) is None  # weight not a constant
    monkeypatch.setenv("IPEXCONVERT_ONEDNN", "0")
    assert resolve_kernel(context("qconv2d", attrs, tensors, {1, 2, 3})).name == "reference:qconv2d"


@INT8
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("output", ["uint8", "bfloat16"])
@pytest.mark.parametrize("geometry", ["1x1", "3x3/2"])
def test_int8_layers_on_small_images_run_as_a_matmul_with_the_same_bits(geometry, output, residual):
    """An int8 1x1 stride-1 or 3x3 stride-2 (padded: the padding reads the input zero point) conv
    with fewer than 64 output pixels per image, 256 or more in the batch, is a matmul over its
    NHWC / im2col rows ("auto"), bit-identical to the convolution primitive, with bias, input zero
    point, a residual sum (uint8 in its own scale, or float) and ReLU; otherwise "auto" keeps the
    convolution."""
    g = torch.Generator().manual_seed(5)
    k, stride, pad = (1, 1, 0) if geometry == "1x1" else (3, 2, 1)
    weight = torch.randint(-127, 128, (48, 32, k, k), dtype=torch.int8, generator=g)
    scales, bias = torch.rand(48, generator=g) * 1e-2 + 1e-3, torch.randn(48, generator=g)
    # As onednn_direct_qconv2d sets it up: a uint8 residual keeps its own scale and zero point; a float one
    # is summed as it is.
    sum_args = {} if not residual else (dict(sum=True, sum_type="uint8", sum_scale=0.7, sum_zero_point=3)
                                        if output == "uint8" else dict(sum=True))
    out_dtype = getattr(torch, output)
    for x_zero_point in (0, 5):
        layers = {how: dnnl.raw.Conv(weight, scales, bias, (stride,) * 2, (pad,) * 2, (1, 1), "uint8", output, relu=True,
                                     x_scale=0.02, x_zero_point=x_zero_point, y_scale=0.05,
                                     y_zero_point=2 if output == "uint8" else 0, lowering=how, **sum_args)
                  for how in ("auto", "matmul", "convolution")}
        for batch, hw in ((1, 7), (6, 7), (8, 8)):  # output size; the 3x3/2 input is twice that (7: 13)
            size = hw if stride == 1 else 2 * hw - (hw % 2)
            x = torch.randint(0, 256, (batch, 32, size, size), dtype=torch.uint8, generator=g).contiguous(memory_format=CL)
            start = (torch.randint(0, 256, (batch, 48, hw, hw), dtype=torch.uint8, generator=g) if output == "uint8"
                     else torch.randn(batch, 48, hw, hw, generator=g).to(out_dtype)).contiguous(memory_format=CL)
            outs = {how: start.clone(memory_format=CL) for how in layers}
            layers["convolution"].run(x, outs["convolution"])
            layers["auto"].run(x, outs["auto"])
            assert torch.equal(outs["auto"], outs["convolution"])
            layers["matmul"].run(x, outs["matmul"])
            assert torch.equal(outs["matmul"], outs["convolution"])
            auto, matmul, convolution = (layers[how].implementation(batch, size, size) for how in layers)
            assert matmul != convolution  # e.g. brg:avx512_core_amx against jit:... or brgconv_1x1:...
            assert auto == (matmul if hw * hw < 64 and batch * hw * hw >= 256 else convolution)
    with pytest.raises(ValueError, match="lowering must be"):
        dnnl.raw.Conv(weight, scales, bias, (1, 1), (0, 0), (1, 1), "uint8", "uint8", lowering="gemm")


POINTWISE_TYPES = [pytest.param("bfloat16", marks=pytest.mark.skipif(not float_cases.HAS_BF16, reason="no native bf16")),
                   pytest.param("uint8", marks=INT8), "float32"]


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("src", POINTWISE_TYPES)
def test_pointwise_layers_fold_rows_into_images(src, stride, residual):
    """A 1x1 unpadded layer run with each image's rows folded into 2, 3 or 6 images, or with the batch's images
    stacked into one, writes what it writes run as it is: the same bits for int8, bf16 / float32 within rounding of
    it (the primitive may block the depth otherwise); the bias, relu and residual included. folds() and stacks() say
    which sizes they take."""
    g = torch.Generator().manual_seed(11 + stride)
    dtype = getattr(torch, src)
    weight = torch.randn(48, 32, 1, 1, generator=g) / 32 ** 0.5
    int8 = src == "uint8"
    weight = torch.randint(-127, 128, (48, 32, 1, 1), dtype=torch.int8, generator=g) if int8 else weight.to(dtype)
    scales, bias = (torch.rand(48, generator=g) * 1e-2 + 1e-3) if int8 else None, torch.randn(48, generator=g)
    quant = dict(x_scale=0.02, x_zero_point=3, y_scale=0.05, y_zero_point=2) if int8 else {}
    layer = dnnl.raw.Conv(weight, scales, bias, (stride, stride), (0, 0), (1, 1), src, src, relu=True, sum=residual,
                          **quant)
    for batch, h, w in ((1, 6 * stride, 5), (3, 6 * stride, 7)):  # 6 output rows
        oh, ow = h // stride, (w + stride - 1) // stride
        x = (torch.randint(0, 256, (batch, 32, h, w), dtype=torch.uint8, generator=g) if int8
             else torch.randn(batch, 32, h, w, generator=g).to(dtype)).contiguous(memory_format=CL)
        start = (torch.randint(0, 256, (batch, 48, oh, ow), dtype=torch.uint8, generator=g) if int8
                 else torch.randn(batch, 48, oh, ow, generator=g).to(dtype)).contiguous(memory_format=CL)
        plain = start.clone(memory_format=CL)
        layer.run(x, plain)
        for fold in (2, 3, 6):
            assert layer.folds(fold, h)
            got = start.clone(memory_format=CL)
            layer.run(x, got, fold=fold)
            if int8:
                assert torch.equal(got, plain), fold
            else:
                assert rel_err(got, plain) < (FP32_TOLERANCE if src == "float32" else BF16_TOLERANCE), fold
        got = start.clone(memory_format=CL)
        layer.run(x, got, stack=True)  # the batch's images as one image of their rows one after the other
        assert layer.stacks(h) and (torch.equal(got, plain) if int8 else rel_err(got, plain) < BF16_TOLERANCE)
        assert not layer.folds(4, h) and not layer.folds(12, h)  # neither divides the 6 output rows
        assert layer.folds(2, h + 2 * stride) and not layer.folds(2, h + 1)  # 8 output rows; 7
        assert stride == 1 or not layer.folds(2, 15)  # 15 rows make 8 output rows at stride 2, but are not 2 x 8
        assert layer.folds(1, h) and not layer.folds(0, h) and not layer.folds(-2, h)
    padded = dnnl.raw.Conv(weight, scales, bias, (1, 1), (1, 1), (1, 1), src, src, **quant)
    three = dnnl.raw.Conv(weight.expand(48, 32, 3, 3).contiguous(), scales, bias, (1, 1), (1, 1), (1, 1), src, src,
                          **quant)
    for other in (padded, three):
        assert not other.folds(2, 12) and other.folds(1, 12) and not other.stacks(12)
    assert stride == 1 or not layer.stacks(15)  # 15 rows at stride 2: the stacked images' rows would shift


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("geometry", ["3x3", "3x3/2", "5x5/2-dilated", "1x1", "1x1/2", "3x1/2-unpadded"])
@pytest.mark.parametrize("src", POINTWISE_TYPES)
def test_batches_run_side_by_side_as_one_image(src, geometry, residual):
    """A batch run as one image, its images side by side with zero columns (an int8 layer's input zero point)
    between them, writes what the batch writes run as it is: int8 the same bits, bf16 / float32 within rounding
    (the primitive for the wide image may block the depth otherwise); bias, relu and residual included, for
    strides, padding and dilation that reach past an image's edge."""
    k, stride, pad, dilation = {"3x3": ((3, 3), 1, 1, 1), "3x3/2": ((3, 3), 2, 1, 1), "5x5/2-dilated": ((5, 5), 2, 3, 2),
                                "1x1": ((1, 1), 1, 0, 1), "1x1/2": ((1, 1), 2, 0, 1),
                                "3x1/2-unpadded": ((3, 1), 2, 0, 1)}[geometry]
    g = torch.Generator().manual_seed(len(geometry) + residual)
    int8, dtype = src == "uint8", getattr(torch, src)
    weight = torch.randn(24, 16, *k, generator=g) / (16 * k[0] * k[1]) ** 0.5
    weight = torch.randint(-127, 128, (24, 16, *k), dtype=torch.int8, generator=g) if int8 else weight.to(dtype)
    scales, bias = (torch.rand(24, generator=g) * 1e-2 + 1e-3) if int8 else None, torch.randn(24, generator=g)
    quant = dict(x_scale=0.02, x_zero_point=9, y_scale=0.05, y_zero_point=2) if int8 else {}
    layer = dnnl.raw.Conv(weight, scales, bias, (stride, stride), (pad, pad), (dilation, dilation), src, src,
                          relu=True, sum=residual, **quant)
    for batch, h, w in ((2, 9, 7), (3, 8, 5), (4, 11, 12)):
        oh = (h + 2 * pad - dilation * (k[0] - 1) - 1) // stride + 1
        ow = (w + 2 * pad - dilation * (k[1] - 1) - 1) // stride + 1
        x = (torch.randint(0, 256, (batch, 16, h, w), dtype=torch.uint8, generator=g) if int8
             else torch.randn(batch, 16, h, w, generator=g).to(dtype)).contiguous(memory_format=CL)
        start = (torch.randint(0, 256, (batch, 24, oh, ow), dtype=torch.uint8, generator=g) if int8
                 else torch.randn(batch, 24, oh, ow, generator=g).to(dtype)).contiguous(memory_format=CL)
        plain, side = start.clone(memory_format=CL), start.clone(memory_format=CL)
        layer.run(x, plain)
        layer.run(x, side, side_by_side=True)
        if int8:
            assert torch.equal(side, plain), (batch, h, w)
        else:
            assert rel_err(side, plain) < (FP32_TOLERANCE if src == "float32" else BF16_TOLERANCE), (batch, h, w)
    with pytest.raises(ValueError, match="side by side takes 2 images or more"):
        layer.run(x[:1], start[:1].clone(memory_format=CL), side_by_side=True)


def test_bf16_kernel_measures_how_it_hands_each_shape_to_onednn(monkeypatch):
    """onednn_direct:conv2d: a bf16 layer's first calls run a block as oneDNN takes the input and a block the other
    way (InSitu), then the faster, each result right: a 1x1 layer at batch 1 folded, at batch 3 stacked, a 3x3 layer at
    batch 2 (8 pixels
    wide: narrow) side by side; a 3x3 layer at batch 1 and a float32 layer have no other way."""
    if not float_cases.HAS_BF16:
        pytest.skip("no native bf16")
    from ipexconvert.backends.cpu.kernels._in_situ import TIMED, WARM
    runs = []

    class Spy:
        def __init__(self, *args, **kwargs):
            self.layer = real(*args, **kwargs)

        def run(self, x, out, **way):
            runs.append(way)
            self.layer.run(x, out, **way)

        def folds(self, *args):
            return self.layer.folds(*args)

        def stacks(self, *args):
            return self.layer.stacks(*args)

    real = dnnl.raw.Conv
    monkeypatch.setattr(dnnl.raw, "Conv", Spy)
    for shape, dtype, batch, second in (("1x1-no-bias", "bfloat16", 1, {"fold": 2}),
                                        ("1x1-no-bias", "bfloat16", 3, {"stack": True}),
                                        ("3x3", "bfloat16", 2, {"side_by_side": True}),
                                        ("3x3", "bfloat16", 1, None), ("1x1-no-bias", "float32", 1, None)):
        attrs, exact, tensors = float_cases.make(shape, float_cases.POST_OPS["add-relu"], dtype, True, batch=batch)
        # 6 rows: they fold (7 would not); at most 8 columns: narrow enough to go side by side
        tensors[0], tensors[3] = tensors[0][:, :, :6, :8], tensors[3][:, :, :6, :8]
        exact[0], exact[3] = exact[0][:, :, :6, :8], exact[3][:, :, :6, :8]
        kernel = onednn_direct_conv2d(context("conv2d", attrs, tensors, {1, 2}))
        runs.clear()
        for _ in range(2 * (WARM + TIMED) + 2):
            got = run(kernel, tensors, {})
            tolerance = FP32_TOLERANCE if dtype == "float32" else BF16_TOLERANCE
            assert rel_err(got, reference("conv2d", attrs, exact)) < tolerance
        other = [way for way in runs if way]
        assert (other in ([second] * (WARM + TIMED), [second] * (WARM + TIMED + 2)) if second else not other), (
            shape, dtype, runs)


def test_failed_self_check_turns_the_layers_off(monkeypatch):
    class OffByMany:
        def __init__(self, *args, **kwargs):
            self.conv = real(*args, **kwargs)

        def run(self, x, out):
            self.conv.run(x, out)
            out.add_(7 if out.dtype == torch.uint8 else 1.0)

    real = dnnl.raw.Conv
    monkeypatch.setattr(dnnl.raw, "Conv", OffByMany)
    monkeypatch.setattr(dnnl, "_checked", None)
    with pytest.warns(RuntimeWarning, match="direct oneDNN layers failed their check"):
        assert not dnnl.usable(selected_isa())
    attrs, _, tensors = float_cases.make("3x3", [], "float32", True)
    assert onednn_direct_conv2d(context("conv2d", attrs, tensors, {1, 2})) is None
    assert dnnl.report()["checked"] is False
    monkeypatch.undo()
    monkeypatch.setattr(dnnl, "_checked", None)
    assert dnnl.usable(selected_isa())


def test_primitives_per_input_size_are_bounded_and_rebuilt_when_needed():
    """A dynamic batch makes one primitive per batch size seen; at most 8 are kept (least recently
    used goes), and an evicted size is rebuilt, still right."""
    g = torch.Generator().manual_seed(3)
    weight, bias = torch.randn(6, 4, 3, 3, generator=g), torch.randn(6, generator=g)
    conv = dnnl.raw.Conv(weight, None, bias, (1, 1), (1, 1), (1, 1), "float32", "float32", relu=True)
    for batch in [*range(1, 11), 1]:
        x = torch.randn(batch, 4, 5, 5, generator=g).contiguous(memory_format=CL)
        out = torch.empty(batch, 6, 5, 5).contiguous(memory_format=CL)
        conv.run(x, out)
        want = torch.nn.functional.conv2d(x, weight, bias, padding=1).relu()
        assert rel_err(out, want) < FP32_TOLERANCE
        assert conv.plan_count() <= 8
    assert conv.plan_count() == 8


def test_run_memories_follow_each_call_across_slots_and_threads():
    """Each thread keeps a plan's src/dst/scratchpad memories in one of 64 slots by plan id and
    points them at every call's buffers: 70 layers in turn (slots taken over and remade), new
    buffers on every call, and 4 threads at once all get their own right results."""
    g = torch.Generator().manual_seed(5)
    layers = []
    for i in range(70):
        weight, bias = torch.randn(4 + i % 3, 3, 3, 3, generator=g), torch.randn(4 + i % 3, generator=g)
        layers.append((dnnl.raw.Conv(weight, None, bias, (1, 1), (1, 1), (1, 1), "float32", "float32"), weight, bias))

    def sweep(seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        for _ in range(2):  # the second sweep finds most slots taken by later layers
            for conv, weight, bias in layers:
                x = torch.randn(1 + seed % 2, 3, 6, 5, generator=gen).contiguous(memory_format=CL)
                out = torch.empty(x.shape[0], weight.shape[0], 6, 5).contiguous(memory_format=CL)
                conv.run(x, out)
                assert rel_err(out, torch.nn.functional.conv2d(x, weight, bias, padding=1)) < FP32_TOLERANCE

    sweep(0)
    import threading
    errors = []

    def worker(seed):
        try:
            sweep(seed)
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_binding_refuses_bad_tensors():
    weight = torch.randn(6, 4, 3, 3)
    conv = dnnl.raw.Conv(weight, None, None, (1, 1), (1, 1), (1, 1), "float32", "float32")
    x = torch.randn(1, 4, 5, 5)  # contiguous, not channels-last
    with pytest.raises(ValueError, match="channels-last"):
        conv.run(x, torch.empty(1, 6, 5, 5).contiguous(memory_format=CL))
    with pytest.raises(ValueError, match="output size"):
        conv.run(x.contiguous(memory_format=CL), torch.empty(1, 6, 4, 4).contiguous(memory_format=CL))
    with pytest.raises(ValueError, match="does not go with"):
        dnnl.raw.Conv(weight.bfloat16(), None, None, (1, 1), (1, 1), (1, 1), "float32", "float32")


def test_bound_calls_give_run_s_results_alone_and_captured_between_native_kernels():
    """Conv / MaxPool / Linear.bind check their tensors once and keep the call (a BoundCall): made alone, or handed to
    the native library's capture() through its native_call (with a native kernel between them), each writes what
    run() writes; a tensor run() would refuse is refused by bind()."""
    from ipexconvert.backends.cpu import native_lib

    torch.manual_seed(0)
    conv = dnnl.raw.Conv(torch.randn(8, 4, 3, 3), None, torch.randn(8), (1, 1), (1, 1), (1, 1), "float32", "float32",
                         relu=True)
    pool = dnnl.raw.MaxPool((3, 3), (2, 2), (1, 1), (1, 1), "float32")
    linear = dnnl.raw.Linear(torch.randn(5, 8), None, torch.randn(5), "float32", "float32")
    x = torch.randn(2, 4, 9, 9).contiguous(memory_format=CL)
    conv_out, pool_out = torch.empty(2, 8, 9, 9).contiguous(memory_format=CL), torch.empty(2, 8, 5, 5).contiguous(memory_format=CL)
    conv.run(x, conv_out)
    pool.run(conv_out, pool_out)
    rows = pool_out.permute(0, 2, 3, 1).reshape(-1, 8)
    want = torch.empty(rows.shape[0], 5)
    linear.run(rows, want)

    a, b = torch.empty_like(conv_out), torch.empty_like(pool_out)
    pooled_rows, got = torch.empty(50, 8), torch.full((50, 5), float("nan"))
    calls = [conv.bind(x, a), pool.bind(a, b), linear.bind(pooled_rows, got)]
    calls[0]()
    calls[1]()
    assert torch.equal(a, conv_out) and torch.equal(b, pool_out)
    a.zero_(), b.zero_()
    if native_lib.available():  # a native copy between the layers: pool's NHWC rows into the linear's input
        copy = native_lib.capture([calls[0], calls[1], lambda: native_lib.raw.concat_channels(
            b, b[:, :0], pooled_rows.view(2, 5, 5, 8).permute(0, 3, 1, 2), None, 1), calls[2]])
        assert copy is not None and len(copy) == 4
        copy()
        assert torch.equal(b, pool_out) and torch.equal(got, want)
    with pytest.raises(ValueError, match="channels-last"):
        conv.bind(x.contiguous(), a)
    with pytest.raises(ValueError, match="output size"):
        pool.bind(a, torch.empty(2, 8, 4, 4).contiguous(memory_format=CL))
    with pytest.raises(ValueError, match="in_features"):
        linear.bind(torch.empty(3, 7), torch.empty(3, 5))


def test_binding_checks_channels_dtypes_and_geometry():
    """Checked against the layer before oneDNN touches memory. Only buffers larger than the layer
    reads or writes here: a regression fails the test instead of corrupting pytest's heap (the
    smaller, crash-prone ones run in a child process in tests/security/test_native_arguments.py)."""
    weight = torch.randn(6, 4, 3, 3)
    conv = dnnl.raw.Conv(weight, None, None, (1, 1), (1, 1), (1, 1), "float32", "float32", sum=True)
    x = torch.randn(2, 4, 5, 5).contiguous(memory_format=CL)
    with pytest.raises(ValueError, match=r"out \[2, 8, 5, 5\] must be \[2, 6, 5, 5\].*holds the residual"):
        conv.run(x, torch.randn(2, 8, 5, 5).contiguous(memory_format=CL))
    with pytest.raises(ValueError, match=r"x \[2, 5, 5, 5\] has 5 channels; this layer takes 4"):
        conv.run(torch.randn(2, 5, 5, 5).contiguous(memory_format=CL), torch.randn(2, 6, 5, 5).contiguous(memory_format=CL))
    with pytest.raises(ValueError, match="x has dtype float64; this layer takes float32"):
        conv.run(x.double(), torch.randn(2, 6, 5, 5).contiguous(memory_format=CL))
    with pytest.raises(ValueError, match=r"out \[3, 6, 5, 5\] must be \[2, 6, 5, 5\]"):
        conv.run(x, torch.randn(3, 6, 5, 5).contiguous(memory_format=CL))
    for stride, padding, dilation, match in (((0, 1), (1, 1), (1, 1), "stride"), ((1, 1), (-1, 1), (1, 1), "padding"),
                                             ((1, 1), (1, 1), (1, 0), "dilation")):
        with pytest.raises(ValueError, match=rf"{match} \(\w+\) is -?\d+; it must be in"):
            dnnl.raw.Conv(weight, None, None, stride, padding, dilation, "float32", "float32")
    with pytest.raises(ValueError, match="weight has dtype int32"):  # the same element size, another type
        dnnl.raw.Conv(weight.int(), None, None, (1, 1), (1, 1), (1, 1), "float32", "float32")
    pool = dnnl.raw.MaxPool((3, 3), (2, 2), (1, 1), (1, 1), "uint8")
    with pytest.raises(ValueError, match="x has dtype float32; this layer takes uint8"):
        pool.run(torch.randn(1, 4, 8, 8).contiguous(memory_format=CL),
                 torch.zeros(1, 4, 4, 4, dtype=torch.uint8).contiguous(memory_format=CL))
    with pytest.raises(ValueError, match="more than half the kernel's extent"):
        dnnl.raw.MaxPool((3, 3), (2, 2), (2, 2), (1, 1), "float32")


def test_kernels_report_a_refused_tensor_as_an_artifact_error():
    """A tensor the graph hands a layer that does not fit its weights (the spec said otherwise):
    ArtifactError naming the kernel, not a ValueError from the binding."""
    from ipexconvert.errors import ArtifactError

    attrs, _, tensors = float_cases.make("3x3", float_cases.POST_OPS["add"], "float32", True)
    kernel = onednn_direct_conv2d(context("conv2d", attrs, tensors, {1, 2}))
    wider = torch.cat([tensors[3], tensors[3]], dim=1).contiguous(memory_format=CL)  # twice the channels
    with pytest.raises(ArtifactError, match=r"onednn_direct:conv2d refused its arguments: out \[2, 32, 13, 11\] must be"):
        run(kernel, [*tensors[:3], wider], {})
    _, in_place = kernel.in_place
    with pytest.raises(ArtifactError, match="onednn_direct:conv2d refused its arguments: out has dtype float64"):
        in_place([tensors[0], None, None, tensors[3].double().contiguous(memory_format=CL)], {})
    x = torch.randn(1, 4, 9, 9).contiguous(memory_format=CL)
    pool = onednn_direct_max_pool2d(context("max_pool2d", {"kernel_size": [3, 3], "stride": [2, 2]}, [x], set()))
    with pytest.raises(ArtifactError, match="onednn_direct:max_pool2d refused its arguments: x has dtype float64"):
        run(pool, [x.double()], {})


@INT8
def test_qlinear_kernel_reports_a_refused_input_as_an_artifact_error():
    from ipexconvert.errors import ArtifactError
    from ipexconvert.backends.cpu.kernels.qlinear import onednn_direct_qlinear

    tensors = [torch.randint(0, 256, (2, 48), dtype=torch.uint8), torch.randint(-127, 128, (24, 48), dtype=torch.int8),
               torch.full((24,), 0.01), torch.randn(24)]
    kernel = onednn_direct_qlinear(context("qlinear", {"x_scale": 0.05, "output_dtype": "float32"}, tensors, {1, 2, 3}))
    assert kernel is not None and kernel.name == "onednn_direct:qlinear"
    with pytest.raises(ArtifactError, match=r"onednn_direct:qlinear refused its arguments: x \[2, 40\] must end in in_features"):
        run(kernel, [torch.zeros(2, 40, dtype=torch.uint8), *tensors[1:]], {})


@pytest.mark.parametrize("dtype", [*float_cases.DTYPES, "uint8"])
@pytest.mark.parametrize("geometry", [
    {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]},          # ResNet's stem pool
    {"kernel_size": [2, 3], "stride": [1, 2], "padding": [0, 1], "dilation": [2, 1]},
])
def test_max_pool2d_matches_reference(dtype, geometry):
    """float32, bfloat16 and uint8 (the int8 stem's codes, quantize_before_pool); padding never wins."""
    g = torch.Generator().manual_seed(4)
    x = (torch.randint(0, 256, (3, 5, 11, 9), dtype=torch.uint8, generator=g) if dtype == "uint8"
         else torch.randn(3, 5, 11, 9, generator=g).to(getattr(torch, dtype)))
    x = x.contiguous(memory_format=CL)
    kernel = onednn_direct_max_pool2d(context("max_pool2d", geometry, [x], set()))
    assert kernel is not None and kernel.name == "onednn_direct:max_pool2d"
    got = run(kernel, [x], {})
    assert got.is_contiguous(memory_format=CL)
    assert torch.equal(got, reference("max_pool2d", geometry, [x]).to(got.dtype))  # a max is exact
    contiguous = context("max_pool2d", geometry, [x.contiguous()], set())
    assert onednn_direct_max_pool2d(contiguous) is None and resolve_kernel(contiguous).name == "reference:max_pool2d"


CAPPED = """
import warnings, torch
warnings.simplefilter("error")  # a failed self-check warns: make it fail the run
from ipexconvert.backends.cpu import onednn_direct as dnnl
from ipexconvert.backends.cpu.isa import selected_isa
assert dnnl.usable(selected_isa()), dnnl.report()
conv = dnnl.raw.Conv(torch.randn(6, 4, 3, 3), None, None, (1, 1), (1, 1), (1, 1), "float32", "float32")
x = torch.randn(2, 4, 5, 5).contiguous(memory_format=torch.channels_last)
out = torch.empty(2, 6, 5, 5).contiguous(memory_format=torch.channels_last)
conv.run(x, out)
print(dnnl.report()["max_isa"])
"""


@pytest.mark.parametrize("cap,onednn_isa", [("avx2", "avx2"), ("avx512", "avx512_core")])
def test_isa_cap_reaches_onednn_and_the_self_check_passes_there(cap, onednn_isa):
    """Below VNNI only the float path is checked: oneDNN's u8*s8 products saturate there, and the
    int8 kernels do not run at those levels anyway."""
    import os
    import subprocess
    import sys

    from ipexconvert.backends.cpu.isa import supported_levels

    if cap not in supported_levels():
        pytest.skip(f"this CPU lacks {cap}")
    env = {**os.environ, "IPEXCONVERT_MAX_ISA": cap}
    result = subprocess.run([sys.executable, "-c", CAPPED], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == onednn_isa


def test_int8_cnn_runs_on_torch_operators_alone(monkeypatch, tmp_path):
    """With the direct layers off (IPEXCONVERT_ONEDNN_DIRECT=0, or no oneDNN library) an int8 CNN converts
    and runs on torch's oneDNN operators and the ops' references (its uint8 channels-last max
    pool included) and gives what the direct layers give."""
    import ipexconvert
    from ipexconvert.artifact import read_example_inputs

    path = tmp_path / "tiny-cnn.int8.ipxc"
    ipexconvert.optimize("example:tiny-cnn", dtype="int8", calib_synthetic=4, output=path)
    inputs = read_example_inputs(path)
    direct = ipexconvert.load_artifact(path)
    assert "onednn_direct:max_pool2d" in {s.kernel_name for s in direct.executor.steps}
    want = direct.run_dict(inputs)
    monkeypatch.setenv("IPEXCONVERT_ONEDNN_DIRECT", "0")
    torch_only = ipexconvert.load_artifact(path)
    names = {s.kernel_name for s in torch_only.executor.steps}
    assert not any(name.startswith("onednn_direct:") for name in names) and "reference:max_pool2d" in names
    got = torch_only.run_dict(inputs)
    for g, w in zip(got.values(), want.values(), strict=True):
        assert torch.nn.functional.cosine_similarity(g.float().flatten(), w.float().flatten(), dim=0) > 0.999


def test_a_build_without_onednn_says_so(monkeypatch):
    """Where the build found no oneDNN headers there is no _dnnl module: the reason names the
    package to install, not Python's circular-import message."""
    import importlib.util

    from ipexconvert.backends.cpu import onednn_direct as dnnl
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name.endswith("._dnnl") else real(name, *a))
    with pytest.raises(ImportError, match="_dnnl was not built.*onednn-devel-cpu-gomp"):
        dnnl._load()


def test_libdnnl_symbols_stay_out_of_the_global_scope():
    """libdnnl exports weak C++ standard-library instantiations; loaded into the global scope they interposed those of
    libraries loaded later (OpenVINO GenAI's sampler crashed in free() on a std::unordered_map in the same process)."""
    import ctypes

    assert dnnl.raw is not None
    with pytest.raises(AttributeError):
        ctypes.CDLL(None).dnnl_engine_create  # noqa: B018 - the lookup itself is the check
