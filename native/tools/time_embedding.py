"""Times native.embedding (the raw kernel call, output allocated as the executor would) against
F.embedding for BERT-base-sized lookups. Decides whether the runtime registers the native
kernel; see docs/native.md. Usage: python native/tools/time_embedding.py
"""
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "native"))
import native_ops as native  # noqa: E402  (the torch harness over the native kernels)
lib = native.raw
def best(f, n):
    r = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n): f()
        r.append((time.perf_counter() - t) / n * 1e6)
    return min(r)
for th in (2, 1):
    torch.set_num_threads(th)
    for dt in (torch.float32, torch.bfloat16):
        w = torch.randn(30522, 768).to(dt)
        for shape in ((1, 128), (32, 128)):
            idx = torch.randint(0, 30522, shape)
            n = 2000 if shape[0] == 1 else 100
            def nat():
                out = torch.empty((*idx.shape, 768), dtype=dt)
                lib.embedding(w, idx, out, None, th)
                return out
            assert torch.equal(nat(), F.embedding(idx, w))
            a, b = best(nat, n), best(lambda: F.embedding(idx, w), n)
            print(f"threads={th} {str(dt)[6:]:9s} {list(shape)}: native {a:7.1f} us  F.embedding {b:7.1f} us")
