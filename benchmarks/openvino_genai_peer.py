"""OpenVINO GenAI beside ipexconvert in benchmarks/decoder.py: the same Hugging Face folder exported by
optimum-intel (`optimum-cli export openvino`, NNCF weight compression), run by `openvino_genai.LLMPipeline`.

optimum-intel pins its own transformers and pulls a CUDA torchvision that breaks `import transformers` next to
the CPU torch, so the export runs in a separate virtual environment (--ov-export-python); only `openvino-genai`
is needed in the benchmark's own one:

    python -m venv /tmp/ovenv && /tmp/ovenv/bin/pip install torch==2.13.0 "optimum-intel[openvino]" \\
        && /tmp/ovenv/bin/pip uninstall -y torchvision
    pip install openvino-genai            # next to ipexconvert

Prompts go in as token ids (`TokenizedInputs`) and tokens come back through a `StreamerBase` subclass that stamps
each token's arrival, so no tokenizer is needed. GenAI's pipeline caches prompt prefixes: a prompt it has seen
prefills in milliseconds, so the runner gives every timed run a fresh prompt (decoder.py does, for every system).
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import torch

# system name -> optimum-cli weight-compression arguments. int4 symmetric in groups of 128, as ipexconvert's int4;
# --ratio 1.0 puts every linear layer in int4 (NNCF's default keeps a share in int8); the embedding / LM head table
# is int8 in both, as optimum-intel does by default.
FORMATS = {
    "openvino-genai-int8": ["--weight-format", "int8"],
    "openvino-genai-int4": ["--weight-format", "int4", "--group-size", "128", "--ratio", "1.0", "--sym"],
}


def export_for(folder: Path, system: str, cache: Path, export_python: Path) -> Path:
    """The folder exported to OpenVINO IR with this system's weight format (cached under `cache`)."""
    out = cache / f"{folder.name}.{system}"
    if (out / "openvino_model.xml").is_file():
        return out
    cli = export_python.parent / "optimum-cli"
    if not cli.is_file():
        raise SystemExit(f"{system}: no optimum-cli next to {export_python} (see benchmarks/openvino_genai_peer.py)")
    t = time.perf_counter()
    subprocess.run([str(cli), "export", "openvino", "--model", str(folder), "--task", "text-generation-with-past",
                    *FORMATS[system], str(out)], check=True)
    print(f"exported {system} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return out


def weight_bytes(model_xml: Path) -> int:
    """Bytes of the model's weight constants (rank >= 2) a decode step reads: each once, and the vocabulary table
    once even when the export keeps a separate copy for the embedding lookup (that copy is read one row a token)."""
    import openvino as ov

    model = ov.Core().read_model(model_xml)
    sizes: dict[tuple[int, ...], list[int]] = {}
    for op in model.get_ordered_ops():
        if op.get_type_name() == "Constant" and len(op.get_output_shape(0)) >= 2:
            shape = tuple(op.get_output_shape(0))
            sizes.setdefault(shape, []).append(op.get_byte_size())
    total = sum(sum(v) for v in sizes.values())
    vocab = max(sizes, key=lambda s: s[0])  # the largest first dimension: the token table
    if len(sizes[vocab]) > 1:  # two copies (embedding lookup and LM head): the head's is the one read whole
        total -= min(sizes[vocab])
    return total


class OpenVinoGenAiSystem:
    """Prefill = time to the first streamed token; decode = the intervals between the later ones."""

    def __init__(self, path: Path, threads: int):
        import openvino_genai as og

        self.og = og
        self.pipe = og.LLMPipeline(str(path), "CPU", INFERENCE_NUM_THREADS=threads, PERFORMANCE_HINT="LATENCY")
        self.weight_bytes = weight_bytes(path / "openvino_model.xml")

    def run(self, ids: torch.Tensor, new: int) -> tuple[float, list[float]]:
        import openvino as ov

        og = self.og
        stamps: list[float] = []

        class Stamp(og.StreamerBase):
            def write(self, token):  # one token id, or a list of them (each counts once)
                count = len(token) if isinstance(token, (list, tuple)) else 1
                stamps.extend([time.perf_counter()] * count)
                return og.StreamingStatus.RUNNING

            def end(self):
                pass

        config = og.GenerationConfig()
        config.max_new_tokens = new
        config.min_new_tokens = new
        config.ignore_eos = True
        config.do_sample = False
        ids_np = ids.to(torch.int64).numpy()
        inputs = og.TokenizedInputs(ov.Tensor(ids_np), ov.Tensor(torch.ones_like(ids).to(torch.int64).numpy()))
        start = time.perf_counter()
        self.pipe.generate(inputs, config, Stamp())
        if len(stamps) < 2:
            raise RuntimeError(f"OpenVINO GenAI streamed {len(stamps)} tokens, asked for {new}")
        return stamps[0] - start, [b - a for a, b in zip(stamps, stamps[1:])]
