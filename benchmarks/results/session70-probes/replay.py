import sys, time, torch, statistics
sys.path.insert(0, ".")
import ipexconvert
from ipexconvert.artifact import read_example_inputs
torch.set_num_threads(2)
path = sys.argv[1]
m = ipexconvert.load_artifact(path)
inputs = read_example_inputs(path)
for _ in range(20): m.run_dict(inputs)
steps = m.executor.steps
def closure(fn):
    return dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))
calls = []   # (callable, args) per step
rec = {}
for st in steps:
    k = st.kernel
    orig = k
    def wrap(ins, dims, k=k, st=st):
        r = k(ins, dims); rec[st.node] = (ins, dims, r); return r
    st.kernel = wrap
m.run_dict(inputs)
for st in steps: st.kernel = st.kernel.__defaults__[0]
native = []
other = []
for st in steps:
    ins, dims, r = rec[st.node]
    fn = st.kernel
    fn0 = getattr(fn, "fn", fn)
    cl = closure(fn0) if getattr(fn0, "__closure__", None) else {}
    if "launch" in cl:
        conv = closure(cl["launch"])["conv"]
        x = ins[0].contiguous(memory_format=torch.channels_last)
        out = torch.empty_like(r)
        native.append((conv.run, (x, out)))
    else:
        native.append((fn, (ins, dims)))
        other.append(st.kernel_name)
print("non-conv steps:", other)
def replay():
    for f, a in native: f(*a)
def full(): m.run_dict(inputs)
res = {"full": [], "replay": []}
for r in range(30):
    for name, f in (("full", full), ("replay", replay)):
        s = time.perf_counter()
        for _ in range(10): f()
        res[name].append((time.perf_counter()-s)/10)
for k, v in res.items(): print(k, statistics.median(v)*1e3)
import os
if os.environ.get("ONEDNN_VERBOSE"):
    per = []
    print("MARK", flush=True)
    for r in range(20):
        row = []
        for f, a in native:
            s = time.perf_counter(); f(*a); row.append(time.perf_counter() - s)
        per.append(row)
    print("ENDMARK", flush=True)
    meds = [statistics.median(col) * 1e3 for col in zip(*per)]
    print("PERCALL", " ".join("%.4f" % x for x in meds), flush=True)
