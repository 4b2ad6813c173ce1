"""Session 75 scratch (device): the LM head GEMV of a decoder artifact against a torch sum of as many bytes, each after a
256 MB write has evicted the caches, interleaved (python3 lmhead_vs_sum.py ART.ipxc)."""
import sys, time, statistics, torch
sys.path.insert(0, "benchmarks")
from ipexconvert.api import load_artifact
from decode_profile import after_prompt
from decode_step_costs import capture_gemvs
torch.set_num_threads(2)
m = load_artifact(sys.argv[1])
cache, step = after_prompt(m, 64)
g, r, res = [c for c in capture_gemvs(cache, step) if c[0].n > 100000][0]
call = m.executor.capture_calls([g.bind(r, res)[0]])
nb = g.packed.numel() * g.packed.element_size()
x = torch.randn(nb // 4)
big = torch.empty(256 << 20, dtype=torch.uint8)
def evict(): big.add_(1)
res = {"gemv": [], "sum f32": []}
for _ in range(9):
    for name, f in (("gemv", call), ("sum f32", lambda: x.sum())):
        evict(); s = time.perf_counter(); f(); res[name].append(time.perf_counter() - s)
for k, v in res.items():
    t = statistics.median(v); print(f"{k}: {t*1e3:.2f} ms, {nb/t/1e9:.1f} GB/s")
