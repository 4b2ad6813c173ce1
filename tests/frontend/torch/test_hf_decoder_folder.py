"""A Hugging Face causal-LM folder converts to a decoder artifact with its tokenizer stored as data,
and generates text whose tokens are Hugging Face's greedy ones."""
from __future__ import annotations

import pytest
import torch

import ipexconvert
from ipexconvert.artifact import read_data

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytestmark = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                reason="torch.export of transformers' Llama needs torch >= 2.13 (see docs/architecture.md)")


@pytest.fixture(scope="module")
def llama_folder(tiny_llama_folder):
    return tiny_llama_folder


def test_folder_converts_to_a_decoder_with_its_tokenizer(llama_folder, tmp_path):
    from transformers import AutoModelForCausalLM

    result = ipexconvert.optimize(llama_folder, output=tmp_path / "llama.ipxc")
    record = result.manifest.decoder
    assert record is not None and record.tokenizer == "tokenizer.json" and record.eos_token_ids == [2]
    assert read_data(result.path)["tokenizer.json"] == (llama_folder / "tokenizer.json").read_bytes()

    model = ipexconvert.load_artifact(result.path)
    prompt = "the train to the city leaves early"
    out = model.generate(prompt, max_new_tokens=16, stop_at_eos=False)
    ids = model.decoder.encode(prompt)
    assert ids.tolist() == out.prompt_ids and ids.shape[1] == len(prompt.split())
    lm = AutoModelForCausalLM.from_pretrained(llama_folder, local_files_only=True).eval()
    with torch.inference_mode():
        want = lm.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=16, min_new_tokens=16, do_sample=False)
    assert out.new_ids[0] == want[0, ids.shape[1]:].tolist()
    assert out.text == [model.decoder.decode(out.new_ids[0])] and isinstance(out.text[0], str)

