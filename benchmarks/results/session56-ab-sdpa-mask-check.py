"""A/B in one process: the artifact as it runs now, and a second load whose sdpa steps also run the per-call
Python check of the mask that the kernels replaced (fully_masked_rows + masked_fill_ when any), interleaved rounds."""
import sys, statistics, time, torch, dataclasses
from ipexconvert import load_artifact
from ipexconvert.artifact import read_example_inputs
from ipexconvert.ir.ops.sdpa import fully_masked_rows
torch.set_num_threads(2)
path, rounds, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
new, old = load_artifact(path), load_artifact(path)
def with_check(kernel):
    def run(inputs, dims):
        out = kernel(inputs, dims)
        if inputs[3] is not None:
            fully = fully_masked_rows(inputs[3])
            if bool(fully.any()):
                out.masked_fill_(fully, 0)
        return out
    return run
ex = old.runner
n = 0
for i, s in enumerate(ex.main):
    if "sdpa" in s.kernel_name:
        ex.main[i] = dataclasses.replace(s, kernel=with_check(s.kernel)); n += 1
print("wrapped", n, "sdpa steps")
t = read_example_inputs(path)
for m in (new, old):
    for _ in range(3): m.run_dict(t)
res = {"kernel zeroes": [], "python check": []}
for r in range(rounds):
    order = [("kernel zeroes", new), ("python check", old)]
    if r % 2: order.reverse()
    for name, m in order:
        t0 = time.perf_counter()
        for _ in range(calls): m.run_dict(t)
        res[name].append((time.perf_counter() - t0) / calls * 1e3)
ratios = [a / b for a, b in zip(res["kernel zeroes"], res["python check"])]
for k, v in res.items(): print(f"{k}: median {statistics.median(v):.2f} ms")
print(f"ratio new/old median {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")
