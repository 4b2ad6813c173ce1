"""kv_cache_bf16 (`--kv-cache bf16`): a float32 decoder's caches become bf16 at the signature and in the appending
nodes, everything else unchanged; given the same bf16-rounded cache, the presents are the float32 program's rounded
once in the first layer and the rest differ by bf16-sized amounts (this step's keys and values are read rounded too); a cache
read by anything but attention is refused; the pipeline puts the pass before prepack; the option is refused for a
model that is not a decoder."""
from __future__ import annotations

import pytest
import torch

from ipexconvert import optimize
from ipexconvert.errors import UserInputError
from ipexconvert.examples.decoder_cache import decoder_example_inputs
from ipexconvert.ir import Node
from ipexconvert.passes.base import PASSES, PassOptions
from ipexconvert.passes.pipeline import pipeline_for
from pass_helpers import NEEDS_LLAMA_EXPORT, run_program, tiny_llama_fp32_program, tiny_llama_with_cache_pass

pytest.importorskip("transformers")
pytestmark = NEEDS_LLAMA_EXPORT


def test_the_caches_become_bf16_and_the_outputs_follow_the_rounded_cache():
    module, before, after, caches = tiny_llama_with_cache_pass("kv_cache_bf16")
    graph = after.graph
    assert [graph.values[n].dtype for n in caches] == ["bfloat16"] * 8
    assert graph.values["logits"].dtype == "float32"
    assert after.graph.op_histogram() == before.graph.op_histogram()  # no cast added anywhere
    for batch, seq, past in ((1, 5, 0), (2, 1, 9)):
        inputs = decoder_example_inputs(module.shape, batch, seq, past, seed=past)
        rounded = {k: v.bfloat16() if k.startswith("past_") else v for k, v in inputs.items()}
        dims = {"batch": batch, "seq": seq, "past": past}
        # the float32 program given the cache the bf16 one holds, its new positions rounded as the pass writes them
        widened = {k: v.float() if k.startswith("past_") else v for k, v in rounded.items()}
        want = dict(zip(before.graph.outputs, run_program(before, widened, dims)))
        got = dict(zip(graph.outputs, run_program(after, rounded, dims)))
        for name in graph.outputs:
            if name.startswith("present_") and name.endswith("_0"):  # the first layer's: float32's rounded once
                assert got[name].dtype == torch.bfloat16 and torch.equal(got[name], want[name].bfloat16()), name
            elif name.startswith("present_"):  # the layers after read the first one's attention of rounded values
                assert got[name].dtype == torch.bfloat16 and torch.equal(got[name][:, :, :past], rounded[name.replace("present", "past")])
                torch.testing.assert_close(got[name].float(), want[name], rtol=0, atol=2e-2 * want[name].abs().max().item())
            else:  # attention reads this step's keys and values rounded too: bf16-sized differences, no more
                cosine = torch.nn.functional.cosine_similarity(got[name].flatten(), want[name].flatten(), dim=0)
                assert got[name].dtype == torch.float32 and cosine > 0.9999, (name, cosine)
                torch.testing.assert_close(got[name], want[name], rtol=0, atol=1e-2 * want[name].abs().max().item())


@pytest.mark.parametrize("stored", ["bf16", "int8"])  # (kv_cache_int8 shares the pass's checks: store_caches_as)
def test_a_cache_read_by_anything_but_attention_is_refused(stored):
    _, program = tiny_llama_fp32_program()
    graph = program.graph
    present = next(n for n in graph.outputs if n.startswith("present_key"))
    graph.values["peek"] = graph.values[present]
    graph.nodes.append(Node(name="peek_node", op="neg", inputs=[present], outputs=["peek"]))
    graph.outputs.append("peek")
    cache_dtype = {"bf16": "bfloat16", "int8": "int8"}[stored]
    with pytest.raises(UserInputError, match=f"--kv-cache {stored}: .*only attention reads a cache stored in {cache_dtype}"):
        PASSES[f"kv_cache_{stored}"].run(program, PassOptions())


def test_the_pipeline_runs_it_before_prepack():
    names = pipeline_for("int4", kv_cache="bf16")
    assert names[-2:] == ["kv_cache_bf16", "prepack"]
    assert "kv_cache_bf16" not in pipeline_for("int4")


@pytest.mark.parametrize("stored", ["bf16", "int8"])
def test_a_model_that_is_not_a_decoder_refuses_the_option(tmp_path, stored):
    model = torch.nn.Linear(4, 3)
    with pytest.raises(UserInputError, match="decoder.kv_cache"):
        optimize(model, {"input": torch.randn(2, 4)}, output=tmp_path / "l.ipxc", kv_cache=stored)
    assert not (tmp_path / "l.ipxc").exists()


def test_an_fp32_decoder_with_a_bf16_cache_is_judged_by_bf16s_budget(tmp_path):
    """fp32's element-wise budget (1e-3) cannot hold for bf16-rounded keys and values; the conversion is judged as
    a bf16 one is, and passes far inside it."""
    result = optimize("example:tiny-llama", dtype="fp32", kv_cache="bf16", output=tmp_path / "t.ipxc")
    accuracy = result.manifest.accuracy
    assert accuracy.passed and accuracy.dtype == "fp32" and "every sample's cosine" in accuracy.judged_by
    assert min(o.cosine for o in accuracy.outputs) > 0.9999
    assert {result.manifest.inputs[i].spec.dtype for i in range(1, len(result.manifest.inputs))} == {"bfloat16"}
