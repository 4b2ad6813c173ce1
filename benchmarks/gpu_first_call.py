"""Time to a GPU artifact's first result in a fresh process: cold (empty Triton cache: every kernel compiles) and
with the cache (a second and third process on the same cache), against the xpu issue's targets (< 20 s cold,
< 3 s with the cache). Triton keeps its compiled kernels on disk, keyed by the kernel's source, its constants, the
GPU architecture and the Triton version (`TRITON_CACHE_DIR`, default ~/.triton/cache); this script gives each
case a fresh one. cuDNN's algorithm choice (bf16 convolutions) is made in every process.

    python benchmarks/gpu_first_call.py --models resnet50,bert-base --dtypes bf16,int8 --batches 1
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(path: str, name: str, batch: int) -> None:
    """One process: import, load, first call; prints the seconds of each as JSON."""
    start = time.perf_counter()
    import torch

    import ipexconvert
    from ipexconvert.examples import get_example

    imported = time.perf_counter()
    model = ipexconvert.load_artifact(path, device="cuda")
    loaded = time.perf_counter()
    inputs = get_example(name).example_inputs(batch)
    inputs = {k: (v.cuda() if v.is_floating_point() else v) for k, v in inputs.items() if k in model.signature.input_names}
    model.run_dict(inputs)
    torch.cuda.synchronize()
    done = time.perf_counter()
    print(json.dumps({"import_s": imported - start, "load_s": loaded - imported, "first_call_s": done - loaded}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet50,bert-base")
    ap.add_argument("--dtypes", default="bf16,int8")
    ap.add_argument("--batches", default="1")
    ap.add_argument("--child", nargs=3, metavar=("PATH", "MODEL", "BATCH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    import ipexconvert

    print("| model | dtype | batch | process | import s | load s | first call s | load + first call s |")
    print("|---|---|---:|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            for dtype in args.dtypes.split(","):
                path = Path(tmp) / f"{name}.{dtype}.ipxc"
                ipexconvert.optimize(f"example:{name}", dtype=dtype, output=path, calib_synthetic=dtype == "int8")
                for batch in args.batches.split(","):
                    cache = Path(tmp) / f"triton-{name}-{dtype}-{batch}"  # fresh: the first process compiles
                    env = dict(os.environ, TRITON_CACHE_DIR=str(cache))
                    for label in ("cold", "cached", "cached"):
                        out = subprocess.run([sys.executable, __file__, "--child", str(path), name, batch], env=env,
                                             capture_output=True, text=True, check=True).stdout
                        r = json.loads(out.strip().splitlines()[-1])
                        print(f"| {name} | {dtype} | {batch} | {label} | {r['import_s']:.2f} | {r['load_s']:.2f} | "
                              f"{r['first_call_s']:.2f} | {r['load_s'] + r['first_call_s']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
