"""Decoder LLMs side by side: prefill of a prompt and per-token decode, in one process, interleaved rounds.

    python benchmarks/decoder.py                                     # Qwen2-0.5B-shaped, 512-token prompt, 32 new
    python benchmarks/decoder.py --shape tiny --prompt 64 --new 16    # smoke test
    python benchmarks/decoder.py --systems hf-fp32,ipexconvert-fp32,ipexconvert-int8,ipexconvert-int4

Systems: `hf-fp32` / `hf-bf16` (transformers eager with its DynamicCache; bf16 = weights in bf16),
`ipexconvert-{fp32,bf16,int8,int4}` (artifacts converted from the same folder, int8/int4 weight-only with the LM head
quantized too; generate() with ignore-eos), `llama.cpp-{f32,f16,q8_0,q4_0}` (llama-cpp-python on a GGUF written from
the same folder and quantized by llama.cpp: benchmarks/llama_cpp_peer.py), `openvino-genai-{int8,int4}` (the folder
exported by optimum-intel in its own venv, --ov-export-python, run by openvino_genai: benchmarks/openvino_genai_peer.py).
The model has random weights from the shape's config (seeded), saved once as a Hugging Face folder under
--cache. Each round runs every system once on a prompt of its own (fresh ids every round: OpenVINO GenAI caches
prompt prefixes) (prefill = the first call, decode = the median interval of the other calls); the table shows medians over rounds, the weight bytes each decode step reads, and their share
of the read bandwidth measured here (a one-pass sum over 1 GiB with the same threads).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ipexconvert.decoder_bench import decode_weight_bytes, read_bandwidth_gbs  # noqa: E402
from llama_cpp_peer import FORMATS as LLAMA_CPP_FORMATS  # noqa: E402  (benchmarks/ is on sys.path as the script's folder)
from openvino_genai_peer import FORMATS as OPENVINO_GENAI_FORMATS  # noqa: E402
from qwen2_module import SETTINGS  # noqa: E402

SHAPES = {
    # Qwen2-0.5B's config (tied 151936 x 896 embedding, 14 query / 2 kv heads), positions capped at 4096.
    "qwen2-0.5b": dict(model_type="qwen2", vocab_size=151936, hidden_size=896, intermediate_size=4864,
                       num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                       max_position_embeddings=4096, rope_theta=1000000.0, rms_norm_eps=1e-6,
                       tie_word_embeddings=True),
    "tiny": dict(model_type="qwen2", vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                 tie_word_embeddings=True),
}


def build_folder(shape: str, cache: Path) -> Path:
    folder = cache / f"{shape}-random"
    if (folder / "config.json").is_file():
        return folder
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = dict(SHAPES[shape])
    config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():  # random init gives near-uniform logits; a larger spread makes greedy tokens decisive
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.05)
    model.generation_config.pad_token_id = 0
    model.save_pretrained(folder, safe_serialization=True)
    return folder


# The model's weights are random: its logits are nearly flat, so rounding flips greedy tokens and moves perplexity in
# ways a trained model's would not (tiny-llama, trained structure, passes the default budgets: tests/). The quantized
# artifacts here are timed; their accuracy is judged in the tests, so the teacher-forced budget is opened.
# ipexconvert systems: name -> optimize() settings, qwen2_module.SETTINGS under an "ipexconvert-" prefix (one table
# for this runner and gpu_decode.py). The quantized ones quantize the LM head too, as llama.cpp's Q8_0 / Q4_0 files
# do (a float32 head alone reads 545 MB a token for this shape); -a8: each activation row rounded to int8 (integer
# GEMMs: woq_gemm paths 4 and 5); -bf16: everything but the quantized weights in bf16 (the GPU's choice). (int4: the
# random model's logits keep ~0.25 cosine to fp32 through 24 layers; tiny-llama's keep 0.987.)
IPEXCONVERT_SYSTEMS = {f"ipexconvert-{name}": settings for name, settings in SETTINGS.items()}


def artifact_for(folder: Path, system: str, cache: Path, extra: dict) -> Path:
    import ipexconvert

    path = cache / f"{folder.name}.{system.removeprefix('ipexconvert-')}.ipxc"
    if not path.is_file():
        t = time.perf_counter()
        ipexconvert.optimize(folder, output=path, **IPEXCONVERT_SYSTEMS[system], **extra)
        print(f"converted {system} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return path


class HfSystem:
    def __init__(self, folder: Path, dtype: torch.dtype):
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, local_files_only=True,
                                                          use_safetensors=True).eval()  # no pickle, no remote code
        self.weight_bytes = sum(p.numel() * p.element_size() for p in self.model.parameters())
        if self.model.config.tie_word_embeddings:  # the head reads the embedding once more per token
            self.weight_bytes += self.model.lm_head.weight.numel() * self.model.lm_head.weight.element_size()
            self.weight_bytes -= self.model.model.embed_tokens.weight.numel() * self.model.lm_head.weight.element_size()

    def run(self, ids: torch.Tensor, new: int) -> tuple[float, list[float]]:
        from transformers import DynamicCache

        times, cache, step = [], DynamicCache(config=self.model.config), ids
        with torch.inference_mode():
            for _ in range(new):
                t = time.perf_counter()
                out = self.model(input_ids=step, past_key_values=cache, use_cache=True, logits_to_keep=1)
                step = out.logits[:, -1].argmax(-1, keepdim=True)
                times.append(time.perf_counter() - t)
        return times[0], times[1:]


class IpexconvertSystem:
    def __init__(self, path: Path, threads: int):
        import ipexconvert

        self.model = ipexconvert.load_artifact(path, threads=threads)
        self.weight_bytes = decode_weight_bytes(self.model.graph)

    def run(self, ids: torch.Tensor, new: int) -> tuple[float, list[float]]:
        g = self.model.generate(ids, max_new_tokens=new, stop_at_eos=False)
        return g.prefill_seconds, g.step_seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="qwen2-0.5b", choices=sorted(SHAPES))
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--systems", default="hf-fp32,ipexconvert-fp32")
    ap.add_argument("--convert-settings", default="{}", help="JSON of optimize() settings added for every artifact")
    ap.add_argument("--convert-only", action="store_true", help="convert the artifacts, time nothing")
    ap.add_argument("--cache", type=Path, default=REPO / "benchmarks" / ".cache")
    ap.add_argument("--json", type=Path, help="also write the raw samples here")
    ap.add_argument("--ov-export-python", type=Path, default=Path("/tmp/ovenv/bin/python"),
                    help="python of the venv holding optimum-intel, for the openvino-genai systems' export")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    args.cache.mkdir(parents=True, exist_ok=True)
    folder = build_folder(args.shape, args.cache)
    systems = {}
    for name in args.systems.split(","):
        if name.startswith("hf-"):
            systems[name] = HfSystem(folder, {"hf-fp32": torch.float32, "hf-bf16": torch.bfloat16}[name])
        elif name in LLAMA_CPP_FORMATS:
            from llama_cpp_peer import LlamaCppSystem, gguf_for

            systems[name] = LlamaCppSystem(gguf_for(folder, name, args.cache, args.threads), args.threads,
                                           context=args.prompt + args.new + 16)
        elif name in OPENVINO_GENAI_FORMATS:
            from openvino_genai_peer import OpenVinoGenAiSystem, export_for

            systems[name] = OpenVinoGenAiSystem(export_for(folder, name, args.cache, args.ov_export_python),
                                                args.threads)
        elif name in IPEXCONVERT_SYSTEMS:
            systems[name] = IpexconvertSystem(artifact_for(folder, name, args.cache, json.loads(args.convert_settings)),
                                              args.threads)
        else:
            raise SystemExit(f"unknown system {name}")
    if args.convert_only:
        return
    vocab = SHAPES[args.shape]["vocab_size"]

    def prompt(seed: int) -> torch.Tensor:  # the same ids for every system in a round, new ids every round
        return torch.randint(0, vocab, (1, args.prompt), generator=torch.Generator().manual_seed(seed))

    bandwidth = read_bandwidth_gbs()
    samples: dict[str, dict[str, list[float]]] = {n: {"prefill": [], "decode": []} for n in systems}
    for name, system in systems.items():  # warm-up: first calls, page faults, plan building
        system.run(prompt(1000)[:, :8], 2)
    for r in range(args.rounds):
        ids = prompt(1 + r)
        for name, system in systems.items():
            time.sleep(0.2)
            prefill, steps = system.run(ids, args.new)
            samples[name]["prefill"].append(prefill)
            samples[name]["decode"].append(statistics.median(steps))
            print(f"round {r}: {name} prefill {prefill:.3f} s, decode {1000 * statistics.median(steps):.2f} ms/token",
                  file=sys.stderr)
    print(f"\n{args.shape}, prompt {args.prompt}, {args.new} new tokens, {args.threads} threads, "
          f"read bandwidth {bandwidth:.1f} GB/s, torch {torch.__version__}\n")
    print("| system | weights read per token (MB) | prefill (s) | prefill tokens/s | decode ms/token | share of bandwidth |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, system in systems.items():
        prefill = statistics.median(samples[name]["prefill"])
        decode = statistics.median(samples[name]["decode"])
        mb = system.weight_bytes / 1e6
        share = system.weight_bytes / decode / 1e9 / bandwidth if decode else float("nan")
        print(f"| {name} | {mb:.0f} | {prefill:.3f} | {args.prompt / prefill:.0f} | {1000 * decode:.2f} | {share:.2f} |")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "bandwidth_gbs": bandwidth,
                                         "samples": samples}, indent=1))


if __name__ == "__main__":
    main()
