"""The seed corpus: valid tiny artifacts made by ipexconvert itself, cached in a folder.

They are made in a separate process (conversion runs torch.export, transformers and multi-threaded
kernels, none of which the forking fuzzer process should hold), and checked by the driver before use:
a seed that no longer loads (the artifact format changed) is made again.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# name -> (source, its ConversionConfig as JSON: docs/configuration.md's nested fields)
SEEDS: dict[str, tuple[str, dict]] = {
    "tiny-cnn.fp32": ("example:tiny-cnn", {"dtype": "fp32"}),
    "tiny-cnn.bf16": ("example:tiny-cnn", {"dtype": "bf16"}),
    "tiny-cnn.int8": ("example:tiny-cnn", {"dtype": "int8", "calibration": {"synthetic": 4}}),
    # fp32 keeps the padding mask's aten nodes (arange, index, full, bitwise_and), which simplify_padding_mask turns
    # into views: a hostile artifact may hold them; bf16 and int8 carry the views
    "tiny-bert.fp32": ("example:tiny-bert", {"dtype": "fp32", "skip_passes": ["simplify_padding_mask"]}),
    "tiny-bert.bf16": ("example:tiny-bert", {"dtype": "bf16"}),
    "tiny-bert.int8": ("example:tiny-bert", {"dtype": "int8", "calibration": {"synthetic": 4}}),
    # decoders (KV cache inputs, a decoder record, weight-only kernels; the harness's generate stage runs them)
    "tiny-llama.fp32": ("example:tiny-llama", {"dtype": "fp32"}),
    "tiny-llama.int8": ("example:tiny-llama", {"dtype": "int8", "int8_scheme": "weight-only"}),
    "tiny-llama.int4-a8": ("example:tiny-llama", {"dtype": "int4", "weight_only": {"activations": "int8"}}),
    # a KV cache of int8 rows (codes and a scale: the native rope_kv_append / decode_attention read their widths)
    "tiny-llama.int4-kv8": ("example:tiny-llama", {"dtype": "int4", "decoder": {"kv_cache": "int8"}}),
}

_MAKE = r"""
import sys, warnings
warnings.simplefilter("ignore")
import json
import ipexconvert
from ipexconvert.config import ConversionConfig
folder = sys.argv[1]
for spec in sys.argv[2:]:
    name, source, config = spec.split("|", 2)
    ipexconvert.optimize(source, config=ConversionConfig.validated(json.loads(config), f"seed {name}"),
                         output=f"{folder}/{name}.ipxc")
    print("made", name, flush=True)
"""


def seed_path(folder: Path, name: str) -> Path:
    return Path(folder) / f"{name}.ipxc"


def make_seeds(folder: Path, names: list[str], env: dict[str, str] | None = None) -> None:
    """Convert these seeds into folder (one child process for all of them)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    specs = []
    for name in names:
        source, config = SEEDS[name]
        specs.append(f"{name}|{source}|{json.dumps(config)}")
        seed_path(folder, name).unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-c", _MAKE, str(folder), *specs], env=env or dict(os.environ),
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"making the seed artifacts failed (exit {done.returncode}):\n{done.stderr[-4000:]}")


def ensure_seeds(folder: Path, names: list[str], env: dict[str, str] | None = None) -> dict[str, Path]:
    """The seeds' paths, converting the ones missing from folder."""
    missing = [n for n in names if not seed_path(folder, n).is_file()]
    if missing:
        print(f"making seed artifacts {', '.join(missing)} in {folder} (about 15 s each)...", file=sys.stderr, flush=True)
        make_seeds(folder, missing, env)
    return {n: seed_path(folder, n) for n in names}
