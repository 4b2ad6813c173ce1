"""Causal LMs of several families (tiny configs, random weights) convert from Hugging Face folders and
generate the tokens Hugging Face's greedy generate() does: Qwen2 (tied embeddings, q/k/v biases), Mistral
(one kv head; and with a sliding window shorter than the prompt plus its new tokens), GPT-2 (Conv1D layers as
addmm, learned positions), Llama with scaled RoPE, Falcon (multi-query attention: one kv head broadcast without
enable_gqa), Gemma 2 (no sdpa version in transformers: eager attention with logit soft-capping, every other layer
a sliding window), BLOOM (eager attention with ALiBi) and Qwen3 (q/k RMSNorm)."""
from __future__ import annotations

import pytest
import torch

import ipexconvert
from ipexconvert.errors import UserInputError
from ipexconvert.examples.hf_random_lm import greedy_tokens, random_causal_lm

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                reason="torch.export of transformers' decoders needs torch >= 2.13 (see docs/architecture.md)")

VOCAB = 500
FAMILIES = {
    "qwen2": dict(model_type="qwen2", vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=True),
    "mistral": dict(model_type="mistral", vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=128, sliding_window=None),
    "gpt2": dict(model_type="gpt2", vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=128,
                 bos_token_id=1, eos_token_id=2),
    "llama-linear-rope-scaling": dict(model_type="llama", vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=128, rope_scaling={"rope_type": "linear", "factor": 2.0}),
    "mistral-sliding-window": dict(model_type="mistral", vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                   max_position_embeddings=128, sliding_window=8),
    "falcon-multi-query": dict(model_type="falcon", vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                               num_attention_heads=4, bos_token_id=1, eos_token_id=2),
    "gemma2": dict(model_type="gemma2", vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=128,
                   sliding_window=8, attention="eager", init_std=0.02),
    "bloom-alibi": dict(model_type="bloom", vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4, attention="eager",
                        init_std=0.5),
    "qwen3": dict(model_type="qwen3", vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=128),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_generates_hugging_face_greedy_tokens(family, tmp_path):
    lm = random_causal_lm(FAMILIES[family])
    lm.save_pretrained(tmp_path / family, safe_serialization=True)
    result = ipexconvert.optimize(tmp_path / family, output=tmp_path / f"{family}.ipxc")
    assert result.manifest.decoder is not None
    model = ipexconvert.load_artifact(result.path)
    prompt = torch.randint(3, VOCAB, (1, 9), generator=torch.Generator().manual_seed(1))
    got = model.generate(prompt, max_new_tokens=24, stop_at_eos=False).new_ids[0]
    assert got == greedy_tokens(lm, prompt, 24)
    assert len(set(got)) > 2  # the check means something: the tokens vary


def test_dynamic_rope_scaling_is_a_clear_error(tmp_path):
    """dynamic (NTK) RoPE changes its frequencies with the run-time length: refused by name (exit 2), not with
    torch.export's message about data-dependent guards."""
    config = transformers.AutoConfig.for_model("llama", vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                                               num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                                               max_position_embeddings=128,
                                               rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "dynamic", safe_serialization=True)
    with pytest.raises(UserInputError, match="dynamic.*NTK.*RoPE scaling") as caught:
        ipexconvert.optimize(tmp_path / "dynamic", output=tmp_path / "d.ipxc")
    assert caught.value.exit_code == 2 and not (tmp_path / "d.ipxc").exists()
