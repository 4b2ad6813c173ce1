"""The weight-only accuracy guard (quant/weight_only_guard.py) at conversion: a tiny-llama whose last attention output
projection holds a 30x outlier column per group of 128 misses the int4 budget (its other weights round to zero) with
int8 activations (the default "auto" tries them first) and with float ones; the guard then ranks that layer first,
moves it back to float, and the artifact written passes, with the layer, its reason and the rounds in the manifest.
A plain tiny-llama keeps int8 activations. Without the guard the same conversion fails; a budget nothing meets, even every layer
in float, is an AccuracyError with nothing written."""
from __future__ import annotations

import shutil

import pytest
import torch

from ipexconvert.api import load_artifact, optimize
from ipexconvert.errors import AccuracyError
from ipexconvert.inspection import summarize, weight_only_guard_lines

pytest.importorskip("transformers")
pytestmark = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                reason="torch.export of transformers' Llama needs torch >= 2.13 (see docs/architecture.md)")
OUTLIER_LAYER = "model.layers.1.self_attn.o_proj.weight"


@pytest.fixture(scope="module")
def outlier_folder(tiny_llama_folder, tmp_path_factory):
    """The tiny-llama folder with one outlier input column per group of 128 in OUTLIER_LAYER (scaled 30x)."""
    from ipexconvert.examples.tiny_llama import build_tiny_llama_lm

    lm = build_tiny_llama_lm()
    with torch.no_grad():
        dict(lm.named_parameters())[OUTLIER_LAYER][:, ::128] *= 30.0
    folder = tmp_path_factory.mktemp("outlier") / "tiny-llama"
    lm.save_pretrained(folder, safe_serialization=True)
    shutil.copy(tiny_llama_folder / "tokenizer.json", folder)
    return folder


def test_the_outlier_layer_goes_back_to_float_and_the_artifact_passes(outlier_folder, tmp_path):
    # measured: mean cosine 0.911 with every layer int4, 0.992 with the outlier layer in float
    result = optimize(outlier_folder, dtype="int4", output=tmp_path / "llama.int4.ipxc")
    m = result.manifest
    guard = m.weight_only_guard
    assert guard.passed and guard.candidates == 8 and [r.float_layers for r in guard.rounds] == [0, 0, 1]
    assert [r.activations for r in guard.rounds] == ["int8", "float", "float"] and guard.activations == "float"
    assert not guard.rounds[1].passed and guard.rounds[1].mean_cosine < 0.97 and guard.rounds[2].passed
    (moved,) = guard.float_layers
    assert moved.weight_error > 0.5 and "rank 1 of 8" in moved.reason  # the others: about 0.15
    graph = load_artifact(result.path).graph
    node = next(n for n in graph.nodes if n.name == moved.layer)
    assert node.op == "linear" and graph.values[node.inputs[1]].shape == [128, 128]  # o_proj [hidden, hidden]
    assert m.op_histogram["woq_linear"] == 7
    assert {p.name: p.changes for p in m.passes}["weight_only_quantize"]["float_accuracy_guard"] == 1
    assert m.accuracy.passed and m.accuracy.decoder.mean_cosine > 0.98
    first, layer_line = weight_only_guard_lines(summarize(result.path)["manifest"]["weight_only_guard"])
    assert first.startswith("1 of 8 quantized layers moved back to float in 3 rounds, float activations")
    assert moved.layer in layer_line
    assert all(n.attrs.get("activations", "float") == "float" for n in graph.nodes if n.op == "woq_linear")


def test_auto_keeps_int8_activations_where_the_budget_holds(tiny_llama_folder, tmp_path):
    result = optimize(tiny_llama_folder, dtype="int4", output=tmp_path / "llama.int4.ipxc")
    guard = result.manifest.weight_only_guard
    assert guard.passed and guard.activations == "int8" and len(guard.rounds) == 1 and not guard.float_layers
    graph = load_artifact(result.path).graph
    assert {n.attrs.get("activations") for n in graph.nodes if n.op == "woq_linear"} == {"int8"}


def test_activations_given_are_kept(tiny_llama_folder, tmp_path):
    result = optimize(tiny_llama_folder, dtype="int4", woq={"activations": "float"}, output=tmp_path / "f.ipxc")
    assert [r.activations for r in result.manifest.weight_only_guard.rounds] == ["float"]
    graph = load_artifact(result.path).graph
    assert all(n.attrs.get("activations", "float") == "float" for n in graph.nodes if n.op == "woq_linear")


def test_without_the_guard_the_same_conversion_fails(outlier_folder, tmp_path):
    out = tmp_path / "llama.int4.ipxc"
    with pytest.raises(AccuracyError, match="mean logits cosine") as err:
        optimize(outlier_folder, dtype="int4", woq={"guard": False}, decoder_positions=32, output=out)
    assert "weight-only guard" not in err.value.problem and not out.exists()


def test_a_budget_not_met_even_in_float_is_an_accuracy_error(tmp_path):
    out = tmp_path / "llama.int4.ipxc"
    with pytest.raises(AccuracyError, match="perplexity ratio") as err:
        optimize("example:tiny-llama", dtype="int4", max_perplexity_ratio=0.5, decoder_positions=16, output=out)
    assert "moved 8 of 8 layers back to float" in err.value.problem and not out.exists()
    assert list(tmp_path.iterdir()) == []
