import sys, time, statistics, torch, numpy as np
sys.path.insert(0, ".")
import ipexconvert
import ipexconvert.runtime.model as mm
from ipexconvert.artifact import read_example_inputs
torch.set_num_threads(2)
path = sys.argv[1]
m = ipexconvert.load_artifact(path)
inputs = read_example_inputs(path)
orig = mm._all_finite
def np_finite(t):
    a = t.numpy() if t.dtype not in (torch.bfloat16, torch.float16) else t.float().numpy()
    return bool(np.isfinite(a.sum(dtype=np.float32))) or bool(torch.isfinite(t).all())
def none(t): return True
variants = {"torch": orig, "numpy": np_finite, "none": none}
samples = {k: [] for k in variants}
for r in range(40):
    for k, f in variants.items():
        mm._all_finite = f
        m.run_dict(inputs)
        s=time.perf_counter()
        for _ in range(5): m.run_dict(inputs)
        samples[k].append((time.perf_counter()-s)/5)
for k, v in samples.items(): print(k, statistics.median(v)*1e3)
