"""Which Hugging Face causal-LM families convert: tiny random configs of each, converted from a saved folder with
the CLI's defaults (fp32), greedy tokens compared with transformers' own `generate` (24 new tokens after a 9-token
prompt). A survey of what the installed transformers builds, wider than the suite's families
(tests/e2e/test_decoder_families.py); prints one line per family.

    python benchmarks/decoder_families.py                  # every family below
    python benchmarks/decoder_families.py gemma2 falcon     # some of them
    python benchmarks/decoder_families.py --dtype int4       # quantized: whether the conversion's own check passes
    python benchmarks/decoder_families.py --save DIR         # also keep the artifacts and the expected tokens
    python3 benchmarks/decoder_families.py --replay DIR --device cuda   # elsewhere (no transformers needed):
                                                           # the kept artifacts on that device, against them
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import torch

VOCAB = 500
BASE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=256)
# model_type and config fields, and "attention" / "init_std" (ipexconvert/examples/hf_random_lm.py says what they are).
FAMILIES = {
    "llama-llama3-rope": dict(model_type="llama", **BASE, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64}),
    "llama-yarn-rope": dict(model_type="llama", **BASE, rope_scaling={
        "rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 128}),
    "llama-dynamic-rope": dict(model_type="llama", **BASE, rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
    "llama-biases": dict(model_type="llama", **BASE, attention_bias=True, mlp_bias=True),
    "mistral-sliding-window": dict(model_type="mistral", **BASE, sliding_window=16),
    "qwen2-sliding-window": dict(model_type="qwen2", **BASE, use_sliding_window=True, sliding_window=16,
                                 max_window_layers=1),
    "qwen3": dict(model_type="qwen3", **BASE, head_dim=16),
    "gemma": dict(model_type="gemma", **BASE, head_dim=16, init_std=0.02),
    "gemma2": dict(model_type="gemma2", **BASE, head_dim=16, sliding_window=8, attention="eager", init_std=0.02),
    "gemma3": dict(model_type="gemma3_text", **BASE, head_dim=16, sliding_window=8, attention="eager",
                   init_std=0.02),
    "phi": dict(model_type="phi", **BASE),
    "phi3": dict(model_type="phi3", **BASE, pad_token_id=0),
    "gpt_neox": dict(model_type="gpt_neox", vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                     num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=256),
    "gptj": dict(model_type="gptj", vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, rotary_dim=8),
    "stablelm": dict(model_type="stablelm", **BASE),
    "olmo": dict(model_type="olmo", **BASE),
    "granite": dict(model_type="granite", **BASE),
    "smollm3": dict(model_type="smollm3", **BASE, pad_token_id=0),
    "cohere": dict(model_type="cohere", **BASE),
    "starcoder2": dict(model_type="starcoder2", **BASE),
    "opt": dict(model_type="opt", vocab_size=VOCAB, hidden_size=64, ffn_dim=128, num_hidden_layers=2,
                num_attention_heads=4, word_embed_proj_dim=64, pad_token_id=0),
    "falcon": dict(model_type="falcon", vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                   bos_token_id=1, eos_token_id=2),
    "bloom": dict(model_type="bloom", vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4, attention="eager",
                  init_std=0.5),
    "mixtral": dict(model_type="mixtral", **BASE, num_local_experts=4, num_experts_per_tok=2),
}


def survey(name: str, keep: Path | None = None, dtype: str = "fp32") -> str:
    import ipexconvert
    from ipexconvert.examples.hf_random_lm import greedy_tokens, random_causal_lm

    lm = random_causal_lm(FAMILIES[name])
    prompt = torch.randint(3, VOCAB, (1, 9), generator=torch.Generator().manual_seed(1))
    want = greedy_tokens(lm, prompt, 24)
    with tempfile.TemporaryDirectory() as tmp:
        lm.save_pretrained(Path(tmp) / name, safe_serialization=True)
        try:
            result = ipexconvert.optimize(Path(tmp) / name, output=Path(tmp) / "m.ipxc", dtype=dtype)
        except Exception as e:  # noqa: BLE001 - the survey reports every failure and goes on
            return f"| {name} | not converted | {type(e).__name__}: {' '.join(str(e).split())[:240]} |"
        if dtype != "fp32":  # tokens may rightly differ: the conversion's accuracy check (teacher-forced) is the verdict
            return f"| {name} | converted, {dtype}, its check passed | {_check(result.manifest)} |"
        got = ipexconvert.load_artifact(result.path).generate(prompt, max_new_tokens=24, stop_at_eos=False).new_ids[0]
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            shutil.move(result.path, keep / f"{name}.ipxc")
            (keep / f"{name}.json").write_text(json.dumps({"prompt": prompt[0].tolist(), "transformers": want}))
    verdict = "equal" if got == want else "DIFFERENT"
    return f"| {name} | {verdict} ({len(set(want))} distinct tokens) | first tokens {got[:6]} |"


def _check(manifest) -> str:
    """What the conversion's own accuracy check measured."""
    guard = manifest.weight_only_guard
    if guard is not None and guard.rounds:
        last = guard.rounds[-1]
        return (f"teacher-forced logits cosine {last.mean_cosine:.4f}, top-1 {last.top1_agreement:.1%}, "
                f"perplexity x{last.perplexity_ratio:.3f}, {len(guard.float_layers)} layers kept float")
    return f"logits cosine {min(o.cosine for o in manifest.accuracy.outputs):.5f} against eager fp32"


def replay(folder: Path, device: str) -> None:
    """The artifacts --save kept, generating on `device`, against the tokens transformers gave where they were made."""
    import ipexconvert

    print(f"replaying {folder} on {device}")
    print("| family | greedy tokens vs transformers | equal tokens |\n|---|---|---:|")
    for expected in sorted(folder.glob("*.json")):
        e = json.loads(expected.read_text())
        model = ipexconvert.load_artifact(expected.with_suffix(".ipxc"), device=device)
        got = model.generate(torch.tensor([e["prompt"]]), max_new_tokens=24, stop_at_eos=False).new_ids[0]
        same = sum(a == b for a, b in zip(got, e["transformers"]))
        print(f"| {expected.stem} | {'equal' if got == e['transformers'] else 'DIFFERENT'} | {same}/24 |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("families", nargs="*", help=f"default: all of {', '.join(FAMILIES)}")
    ap.add_argument("--save", type=Path, help="keep each converted artifact and its expected tokens here")
    ap.add_argument("--replay", type=Path, help="run the artifacts a --save kept instead of converting")
    ap.add_argument("--device", default="cpu", help="where --replay runs them: cpu or cuda")
    ap.add_argument("--dtype", default="fp32", help="fp32 (tokens compared), or bf16 / int8 / int4 (the check's verdict)")
    args = ap.parse_args()
    if args.replay:
        return replay(args.replay, args.device)
    unknown = sorted(set(args.families) - set(FAMILIES))
    if unknown:
        ap.error(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
    import transformers

    print(f"transformers {transformers.__version__}, torch {torch.__version__}, dtype {args.dtype}")
    print("| family | greedy tokens vs transformers | detail |\n|---|---|---|")
    for name in args.families or FAMILIES:
        print(survey(name, args.save, args.dtype), flush=True)


if __name__ == "__main__":
    main()
