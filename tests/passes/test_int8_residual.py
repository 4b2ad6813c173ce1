"""int8_residual through optimize(): a tiny ResNet (a downsample block, then an identity block)
keeps its residual stream in uint8. Only the first block's input is quantized; the residual convs
read a uint8 operand (accum params); the downsample writes uint8 with the range calibrated on its
output; the last block still returns float for the pooling; the numbers stay those of eager fp32
and of the same conversion without the pass."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import ipexconvert
from int8_pass_helpers import TinyResNet
from ipexconvert.quant.options import QuantOptions
from ipexconvert.backends.cpu.isa import selected_isa
from ipexconvert.backends.cpu.kernels._torch_onednn import int8_allowed


def _batches(n: int, seed: int) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [{"x": torch.randn(4, 3, 16, 16, generator=g)} for _ in range(n)]


def _convert(module, tmp_path, name: str, skip=()):
    # Guard off: the test checks the structure with every layer int8 (the guard could move one to float).
    # merge_shortcut_conv (tested on its own) would fold the downsample conv this test looks at.
    result = ipexconvert.optimize(module, _batches(1, 0)[0], dtype="int8", output=tmp_path / f"{name}.ipxc",
                                  calibration=_batches(6, 1), quant=QuantOptions(guard=False),
                                  skip_passes=["merge_shortcut_conv", *skip])
    return result, ipexconvert.load_artifact(result.path)


@pytest.fixture(scope="module", params=[False, True], ids=["shortcut-first", "shortcut-last"])
def converted(request, tmp_path_factory):
    module = TinyResNet(shortcut_last=request.param).eval()
    tmp = tmp_path_factory.mktemp("int8_residual")
    return module, _convert(module, tmp, "residual"), _convert(module, tmp, "skipped", skip=["int8_residual"])


def _operand(node) -> str:
    """The value a qconv2d's residual add reads."""
    return node.inputs[node.attrs["post_ops"][0]["operand"]]


def test_residual_stream_stays_uint8(converted):
    _, (result, model), _ = converted
    graph = model.graph
    producers, values = graph.producers(), graph.values
    changes = {r.name: r.changes for r in result.manifest.passes}
    assert changes["int8_residual"] == {"residual_uint8": 2, "producer_uint8": 1}

    # quantize nodes: the stem input's (reading the graph input itself, fuse_layout_change) and the
    # head's; none reads a conv. The one after the max-pool moved before it and into the stem conv
    # (quantize_before_pool, fold_requantize): the pool runs on the stem's uint8 output.
    quantizes = [n for n in graph.nodes if n.op == "quantize"]
    sources = [producers[n.inputs[0]].op if n.inputs[0] in producers else n.inputs[0] for n in quantizes]
    assert len(quantizes) == 2 and sources[0] in graph.inputs
    assert "max_pool2d" not in sources and "qconv2d" not in sources
    (pool,) = [n for n in graph.nodes if n.op == "max_pool2d"]
    assert producers[pool.inputs[0]].op == "qconv2d" and values[pool.outputs[0]].dtype == "uint8"

    first, last = adders = [n for n in graph.nodes if n.op == "qconv2d" and n.attrs["post_ops"]
                            and n.attrs["post_ops"][0]["kind"] == "add"]
    for node in adders:  # both residual adds read a uint8 operand
        assert node.attrs["accum_scale"] > 0 and values[_operand(node)].dtype == "uint8"
    # the first block's output is uint8 with the next block's input params; the last one's stays float
    assert first.attrs["output_dtype"] == "uint8" and values[last.outputs[0]].dtype in ("float32", "bfloat16")
    assert (last.attrs["accum_scale"], last.attrs["accum_zero_point"]) == (first.attrs["output_scale"],
                                                                          first.attrs["output_zero_point"])
    # the identity block's operand is its own quantized input: the tensor its first conv reads
    readers = [n for n in graph.nodes if n.op == "qconv2d" and n.inputs[0] == first.outputs[0]]
    assert _operand(last) == first.outputs[0] and len(readers) == 1

    # the first block's operand (the shortcut conv or conv3) is written in uint8 with its calibrated output range
    source = producers[_operand(first)]
    layers = result.manifest.quantization["layers"]
    # every output is observed (ONNX export reads them); only the residual source's with the model's observer
    observers = {name: layer["output"]["observer"] for name, layer in layers.items()}
    assert [name for name, obs in observers.items() if obs != "minmax"] == [source.name]
    assert observers[source.name] == result.manifest.quantization["observer"]
    calibrated = layers[source.name]["output"]
    assert source.op == "qconv2d" and source.attrs["output_dtype"] == "uint8" and not source.attrs["post_ops"]
    for node, prefix in ((source, "output"), (first, "accum")):
        assert (node.attrs[f"{prefix}_scale"], node.attrs[f"{prefix}_zero_point"]) == (calibrated["scale"],
                                                                                        calibrated["zero_point"])
    if int8_allowed(selected_isa()):  # both adds run in oneDNN (the last one's add in torch after it)
        kernels = {s.node: s.kernel_name for s in model.executor.steps}
        assert {kernels[n.name] for n in adders} <= {"onednn_direct:qconv2d", "torch_onednn:qconv2d"}


def test_without_the_pass_the_residual_stays_float(converted):
    _, _, (result, model) = converted
    # the second block's input is quantized again (3 with the input's and the head's; the pool's moved into the stem)
    assert result.manifest.op_histogram["quantize"] == 3
    assert not any(n.attrs.get("accum_scale") for n in model.graph.nodes if n.op == "qconv2d")


def test_matches_eager_and_the_float_residual_conversion(converted):
    module, (_, model), (_, skipped) = converted
    for batch in _batches(3, 2):
        with torch.no_grad():
            want = module(**batch)
        got, float_residual = model(**batch), skipped(**batch)
        assert F.cosine_similarity(got, want, dim=1).min() > 0.99
        assert F.cosine_similarity(got, float_residual, dim=1).min() > 0.999
