"""merge_shortcut_conv: a bottleneck block's int8 1x1 projection shortcut becomes part of the
block's last 1x1 conv, one conv over [main path | subsampled block input].

Through optimize() on a tiny ResNet (a stride-2 downsample block, then an identity block): one
merge, the shortcut conv and its residual add gone, the concat on the native kernel, outputs
close to eager and to the conversion without the pass. The merged weights keep the larger
branch exact per channel. Then the cases that must stay apart: the add fused into the shortcut
conv (torchvision's order), a shortcut output read twice, weight ranges too far apart to share
one scale; and the float pipelines, which do not run the pass.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ipexconvert
from int8_pass_helpers import TinyResNet, planned
import native_ops as native
from ipexconvert.passes import PassOptions, run_pipeline
from ipexconvert.passes import merge_shortcut_conv as pass_module
from ipexconvert.passes.base import PASSES
from ipexconvert.passes.pipeline import PIPELINES
from ipexconvert.quant.options import QuantOptions


def _batches(n: int, seed: int) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [{"x": torch.randn(4, 3, 16, 16, generator=g)} for _ in range(n)]


def _convert(module, tmp_path, skip=()):
    # Guard off: the tests check the structure with every layer int8 (the guard could move one to float).
    result = ipexconvert.optimize(module, _batches(1, 0)[0], dtype="int8", output=tmp_path / f"int8_{len(skip)}.ipxc",
                                  calibration=_batches(6, 1), quant=QuantOptions(guard=False), skip_passes=skip)
    return result, ipexconvert.load_artifact(result.path)


def _changes(result) -> dict:
    return {r.name: r.changes for r in result.manifest.passes}.get("merge_shortcut_conv")


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    module = TinyResNet().eval()
    tmp = tmp_path_factory.mktemp("merge_shortcut")
    return module, _convert(module, tmp), _convert(module, tmp, skip=["merge_shortcut_conv"])


def test_the_shortcut_conv_joins_the_last_conv(converted):
    _, (result, model), (_, apart) = converted
    assert _changes(result) == {"merged": 1, "kept_apart": 0}
    convs = [n for n in model.graph.nodes if n.op == "qconv2d"]
    assert len(convs) == len([n for n in apart.graph.nodes if n.op == "qconv2d"]) - 1
    (concat,) = [n for n in model.graph.nodes if n.op == "aten" and n.attrs["target"] == "aten.cat.default"]
    (merged,) = [n for n in convs if n.inputs[0] == concat.outputs[0]]
    values = model.graph.values
    # [main path (8 channels) | block input (16) subsampled by 2] -> 32 channels, 1x1
    assert values[concat.outputs[0]].shape[1] == 24 and values[merged.inputs[1]].shape == [32, 24, 1, 1]
    assert [p["kind"] for p in merged.attrs["post_ops"]] == ["relu"]
    assert merged.attrs["accum_scale"] is None and values[merged.inputs[1]].dtype == "int8"
    # the concat reads the main path and a strided slice of the block input (a view, no copy)
    producers = model.graph.producers()
    sliced = producers[concat.inputs[1]]
    assert sliced.op == "aten" and sliced.attrs["target"] == "aten.slice.Tensor"
    # the first slice keeps the shortcut conv's name, so the plan's layer still names a node (inspect)
    (adder,) = [n for n in apart.graph.nodes if n.op == "qconv2d" and n.attrs.get("accum_scale") is not None
                and n.name == merged.name]
    shortcut = apart.graph.producers()[adder.inputs[adder.attrs["post_ops"][0]["operand"]]]
    assert producers[sliced.inputs[0]].name == shortcut.name and shortcut.name in result.manifest.quantization["layers"]
    if native.available():
        kernels = {s.node: s.kernel_name for s in model.executor.steps}
        assert kernels[concat.name].startswith("native:concat@")


def test_outputs_match_eager_and_the_unmerged_conversion(converted):
    module, (_, model), (_, apart) = converted
    for batch in _batches(3, 2):
        with torch.no_grad():
            want = module(**batch)
        got, unmerged = model(**batch).float(), apart(**batch).float()
        assert F.cosine_similarity(got, want, dim=1).min() > 0.99
        # the shortcut's output is no longer rounded to uint8; the weights share one scale
        assert F.cosine_similarity(got, unmerged, dim=1).min() > 0.999


def test_float_pipelines_keep_their_convs():
    assert "merge_shortcut_conv" not in PIPELINES["cpu", "fp32"] and "merge_shortcut_conv" not in PIPELINES["cpu", "bf16"]


def test_an_add_fused_into_the_shortcut_stays(tmp_path):
    # torchvision's order: the shortcut runs last, so the add fuses into the stride-2 shortcut conv
    result, model = _convert(TinyResNet(shortcut_last=True).eval(), tmp_path)
    assert _changes(result) == {"merged": 0, "kept_apart": 0}
    adders = [n for n in model.graph.nodes if n.op == "qconv2d" and n.attrs["post_ops"]
              and n.attrs["post_ops"][0]["kind"] == "add"]
    assert [n.attrs["stride"] for n in adders] == [[2, 2], [1, 1]]  # the first block's add sits in its shortcut


class SharedShortcut(nn.Module):
    """The projection's output is also an output of the model: it has to be computed."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.c1, self.c2 = nn.Conv2d(16, 8, 1), nn.Conv2d(8, 32, 1)
        self.down = nn.Conv2d(16, 32, 1)

    def forward(self, x):
        x = F.relu(self.stem(x))
        shortcut = self.down(x)
        return F.relu(self.c2(F.relu(self.c1(x))) + shortcut), shortcut


def test_a_shortcut_read_elsewhere_stays(tmp_path):
    result, model = _convert(SharedShortcut().eval(), tmp_path)
    assert _changes(result) == {"merged": 0, "kept_apart": 0}
    producers = model.graph.producers()
    (adder,) = [n for n in model.graph.nodes if n.op == "qconv2d" and n.attrs["post_ops"]
                and n.attrs["post_ops"][0]["kind"] == "add"]
    operand = adder.inputs[adder.attrs["post_ops"][0]["operand"]]
    assert producers[operand].op == "qconv2d" and len(model.graph.users()[operand]) >= 2  # the pattern, but read twice
    x = _batches(1, 3)[0]
    with torch.no_grad():
        want = SharedShortcut().eval()(**x)
    for got, ref in zip(model(**x), want):
        assert F.cosine_similarity(got.float().flatten(), ref.flatten(), dim=0) > 0.99


def _quantized_through_int8_residual(module):
    """The tiny ResNet after the int8 passes up to (not including) merge_shortcut_conv."""
    program, quantization, _ = planned(module, (2, 3, 16, 16), QuantOptions(smoothquant="off", guard=False))
    names = PIPELINES["cpu", "int8"]
    run_pipeline(program, names[names.index("quantize"):names.index("merge_shortcut_conv")],
                 PassOptions(dtype="int8", quantization=quantization))
    return program


def test_int8_weights_too_far_apart_stay_apart():
    program = _quantized_through_int8_residual(TinyResNet())
    merged = copy.deepcopy(program)
    assert PASSES["merge_shortcut_conv"].run(merged, PassOptions(dtype="int8")) == {"merged": 1, "kept_apart": 0}

    # The shortcut's weights 1000x larger: on a shared per-channel scale the main path's int8
    # weights would round to almost nothing.
    producers, users = program.graph.producers(), program.graph.users()
    (last,) = [n for n in program.graph.nodes if pass_module._shortcut(program, n, producers, users) is not None]
    shortcut = pass_module._shortcut(program, last, producers, users)
    program.set_constant(shortcut.inputs[2], program.weights[shortcut.inputs[2]] * 1000)
    assert PASSES["merge_shortcut_conv"].run(program, PassOptions(dtype="int8")) == {"merged": 0, "kept_apart": 1}
    assert any(n.name == shortcut.name for n in program.graph.nodes)


def test_int8_merged_weights_keep_the_larger_branch_exact():
    program = _quantized_through_int8_residual(TinyResNet())
    producers, users = program.graph.producers(), program.graph.users()
    (last,) = [n for n in program.graph.nodes if pass_module._shortcut(program, n, producers, users) is not None]
    shortcut = pass_module._shortcut(program, last, producers, users)
    weight, scales = pass_module._merged_weights(program, last, shortcut)
    w = program.weights
    ratio = shortcut.attrs["x_scale"] / last.attrs["x_scale"]
    main = w[last.inputs[1]].float() * w[last.inputs[2]].view(-1, 1, 1, 1)
    side = w[shortcut.inputs[1]].float() * (w[shortcut.inputs[2]] * ratio).view(-1, 1, 1, 1)
    back = weight.float() * scales.view(-1, 1, 1, 1)
    split = main.shape[1]
    main_wins = main.flatten(1).abs().amax(1) >= side.flatten(1).abs().amax(1)
    # per channel, the branch with the larger range is reproduced exactly (to float rounding)
    torch.testing.assert_close(back[main_wins, :split], main[main_wins], rtol=1e-6, atol=0)
    torch.testing.assert_close(back[~main_wins, split:], side[~main_wins], rtol=1e-6, atol=0)
    assert weight.abs().flatten(1).amax(1).eq(127).all()  # every channel uses the full int8 range
