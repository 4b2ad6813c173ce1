"""A/B in one process: fixed-shape calls from a bound plan (run_fixed) against the executor's way, the same artifact
loaded twice, interleaved rounds (order alternating), CALLS calls a round; outputs compared bit for bit first."""
import sys, statistics, time, torch
from ipexconvert import load_artifact
from ipexconvert.artifact import read_example_inputs
torch.set_num_threads(2)
path, rounds, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
bound, plain = load_artifact(path), load_artifact(path)
plain.runner.binds_fixed_calls = False
t = read_example_inputs(path)
for _ in range(3):
    a, b = bound.run_dict(t), plain.run_dict(t)
assert bound.runner._fixed, "no plan was bound"
plan = next(iter(bound.runner._fixed.values()))
print(f"plan: {plan.bound_steps} bound steps, {sum(1 for c, r in plan.entries if r is not None)} refills, "
      f"{len(plan.entries)} entries, {plan.bytes / 2**20:.1f} MiB of buffers")
for k in a:
    assert torch.equal(a[k], b[k]), k
res = {"bound plan": [], "executor": []}
for r in range(rounds):
    order = [("bound plan", bound), ("executor", plain)]
    if r % 2: order.reverse()
    for name, m in order:
        t0 = time.perf_counter()
        for _ in range(calls): m.run_dict(t)
        res[name].append((time.perf_counter() - t0) / calls * 1e3)
ratios = [x / y for x, y in zip(res["bound plan"], res["executor"])]
for k, v in res.items(): print(f"{k}: median {statistics.median(v):.2f} ms")
print(f"ratio bound/executor median {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")
