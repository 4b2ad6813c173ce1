# Same-process A/B: an image checked for NaN/Inf by its first step (Kernel.checked_fn) against the model scanning it
# before the call (the steps switched between their checked and plain fns, the scan list set), interleaved rounds.
#   python benchmarks/results/session72-device/checked_vs_scanned.py ART.ipxc [batch=16]
import sys, time, statistics
sys.path.insert(0, 'benchmarks')
import ipexconvert
from ab import read_example_inputs, resize_inputs
path = sys.argv[1]; sizes = {k: int(v) for k, v in (kv.split('=') for kv in sys.argv[2:])}
m = ipexconvert.load_artifact(path)
ex = m.executor
checked = {i: ex.steps[i].kernel for i in ex._plain_fns}
plain = dict(ex._plain_fns)
def mode(new):
    for i in checked: ex.steps[i].kernel = checked[i] if new else plain[i]
    m._nan_scanned_inputs = [] if new else [0]
inputs = resize_inputs(read_example_inputs(path), m, sizes)
for _ in range(12): m.run_dict(inputs)
res = {True: [], False: []}
for r in range(20):
    for v in ((True, False) if r % 2 == 0 else (False, True)):
        mode(v)
        m.run_dict(inputs)
        t = []
        for _ in range(7):
            t0 = time.perf_counter(); m.run_dict(inputs); t.append(time.perf_counter() - t0)
        res[v].append(statistics.median(t))
x, y = statistics.median(res[True]), statistics.median(res[False])
print(f"{path.split('/')[-1]} {sizes}: checked in the pass {x*1e3:.3f} ms, scanned {y*1e3:.3f} ms, ratio {x/y:.3f}")
