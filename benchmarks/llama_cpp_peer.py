"""llama.cpp beside ipexconvert in benchmarks/decoder.py: a GGUF written from the same Hugging Face folder, run
through llama-cpp-python's low-level calls.

Why our own GGUF writer: llama.cpp's convert_hf_to_gguf.py refuses tokenizers whose pre-tokenizer hash it does
not know, and the benchmark folder has random weights and no tokenizer at all. The tensors and hyperparameters
are written with gguf-py (the ggml project's own writer, `pip install gguf`) under its HF -> GGUF tensor-name map;
the vocabulary is a byte-level BPE table (the 256 byte symbols, then placeholder tokens up to the model's
vocabulary size), enough for llama.cpp to load. Prompts go in as token ids, so the table is never used to tokenize.
Qwen2 uses the rotate-half RoPE that llama.cpp calls NEOX for this architecture, so the Q/K weights need no
permutation; Llama and Mistral would (convert_hf_to_gguf permutes them) and are refused.

Quantized files come from the F32 one through llama.cpp's own quantizer (`llama_model_quantize`), as a user would
make them. Per llama.cpp's rules the tied 151936 x 896 token table stays Q8_0 in every format for this shape
(n_embd 896 is not a multiple of 256), which the weight bytes per token below include.

    pip install gguf && CMAKE_ARGS="-DGGML_NATIVE=ON" pip install llama-cpp-python==0.3.36

On an AMX Xeon the native build died with an illegal instruction in llama_model_quantize (session 39); build for
the AVX-512 levels explicitly there instead (session 41; no AMX kernels):

    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
        -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX512_VBMI=ON" \
        pip install --force-reinstall --no-deps --no-cache-dir llama-cpp-python==0.3.36
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import torch

# system name -> (GGUF file suffix, llama.cpp file type: llama_ftype values of llama.h)
FORMATS = {"llama.cpp-f32": ("f32", 0), "llama.cpp-f16": ("f16", 1), "llama.cpp-q8_0": ("q8_0", 7),
           "llama.cpp-q4_0": ("q4_0", 2)}


def _byte_symbols() -> list[str]:
    """GPT-2's byte -> printable character table (llama.cpp's BPE vocabulary looks bytes up through it)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def write_gguf_f32(folder: Path, out: Path) -> Path:
    """The folder's float32 weights as a GGUF llama.cpp loads (Qwen2-family architectures)."""
    import gguf
    from safetensors.torch import load_file

    cfg = json.loads((folder / "config.json").read_text())
    if cfg["model_type"] != "qwen2":  # llama / mistral would need convert_hf_to_gguf's Q/K permutation
        raise SystemExit(f"llama.cpp peer: model_type {cfg['model_type']} is not written here (only qwen2)")
    arch = gguf.MODEL_ARCH.QWEN2
    layers = cfg["num_hidden_layers"]
    names = gguf.get_tensor_name_map(arch, layers)
    writer = gguf.GGUFWriter(out, gguf.MODEL_ARCH_NAMES[arch])
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_block_count(layers)
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(cfg["num_attention_heads"])
    writer.add_head_count_kv(cfg["num_key_value_heads"])
    writer.add_rope_freq_base(float(cfg.get("rope_theta", 10000.0)))
    writer.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
    writer.add_file_type(0)
    vocab = cfg["vocab_size"]
    symbols = _byte_symbols()
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(symbols + [f"<t{i}>" for i in range(256, vocab)])
    writer.add_token_types([1] * vocab)
    writer.add_token_merges([f"{symbols[ord('a')]} {symbols[ord('b')]}"])  # llama.cpp requires the key
    writer.add_eos_token_id(vocab - 1)
    writer.add_bos_token_id(vocab - 2)
    writer.add_add_bos_token(False)
    state = {}
    for file in sorted(folder.glob("*.safetensors")):
        state.update(load_file(file))
    for hf_name, tensor in state.items():
        if hf_name == "lm_head.weight" and cfg.get("tie_word_embeddings"):
            continue
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise SystemExit(f"llama.cpp peer: no GGUF name for {hf_name}")
        writer.add_tensor(name, tensor.float().contiguous().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def gguf_for(folder: Path, system: str, cache: Path, threads: int) -> Path:
    """The folder's GGUF in the system's format, written (and quantized by llama.cpp) once under cache."""
    import llama_cpp

    suffix, ftype = FORMATS[system]
    f32 = cache / f"{folder.name}.f32.gguf"
    if not f32.is_file():
        write_gguf_f32(folder, f32)
    if suffix == "f32":
        return f32
    path = cache / f"{folder.name}.{suffix}.gguf"
    if not path.is_file():
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = ftype
        params.nthread = threads
        if llama_cpp.llama_model_quantize(str(f32).encode(), str(path).encode(), params) != 0:
            raise SystemExit(f"llama.cpp could not quantize {f32} to {suffix}")
    return path


class LlamaCppSystem:
    """Prefill = decoding the prompt in one batch; decode = one token per call, greedy on the last logits."""

    def __init__(self, path: Path, threads: int, context: int):
        import numpy as np
        from llama_cpp import Llama

        self.np = np
        # n_batch = the context: llama-cpp-python keeps n_batch rows of logits without logits_all, but writes row
        # n_past + n_tokens - 1 (an IndexError once the context passes n_batch); n_ubatch 512 is what computes.
        self.llm = Llama(model_path=str(path), n_ctx=context, n_batch=context, n_ubatch=512, n_threads=threads,
                         n_threads_batch=threads, logits_all=False, verbose=False)
        from gguf import GGUFReader

        reader = GGUFReader(path)
        # every tensor's bytes once: the tied token table is read whole by the output projection each token
        self.weight_bytes = sum(int(t.n_bytes) for t in reader.tensors)

    def run(self, ids: torch.Tensor, new: int) -> tuple[float, list[float]]:
        llm, np = self.llm, self.np
        llm.reset()
        times = []
        step = [int(i) for i in ids[0]]
        for _ in range(new):
            t = time.perf_counter()
            llm.eval(step)
            step = [int(np.argmax(llm.scores[llm.n_tokens - 1]))]
            times.append(time.perf_counter() - t)
        return times[0], times[1:]
