import sys, time, json, torch, statistics, collections, glob
sys.path.insert(0, "."); sys.path.insert(0, "benchmarks")
import ipexconvert
from ipexconvert.examples import get_example
from peers import onnxruntime_peer as orp
import onnxruntime as ort
from pathlib import Path
torch.set_num_threads(2)
ex = get_example("resnet50"); mod = ex.build().eval(); x = ex.example_inputs(1)
p = Path("/tmp/exp/r50.onnx"); orp.export(mod, x, p)
so = orp.session_options(2); so.enable_profiling = True; so.profile_file_prefix = "/tmp/exp/ortprof"
sess = ort.InferenceSession(str(p), so, providers=["CPUExecutionProvider"])
name = sess.get_inputs()[0].name; feed = {name: list(x.values())[0].numpy()}
path = sorted(glob.glob("benchmarks/.cache/resnet50.fp32.*.ipxc"))[-1]
m = ipexconvert.load_artifact(path)
samples = {}
for step in m.executor.steps:
    times = samples.setdefault(step.node, []); kernel = step.kernel
    def timed(ins, dims, kernel=kernel, times=times):
        s = time.perf_counter(); r = kernel(ins, dims); times.append(time.perf_counter() - s); return r
    step.kernel = timed
wall = {"ours": [], "ort": []}
for r in range(22):
    s = time.perf_counter(); m.run_dict(x); t1 = time.perf_counter() - s; time.sleep(0.05)
    s = time.perf_counter(); sess.run(None, feed); t2 = time.perf_counter() - s; time.sleep(0.05)
    if r >= 2: wall["ours"].append(t1); wall["ort"].append(t2)
    else:
        for v in samples.values(): v.clear()
prof = sess.end_profiling()
ev = json.load(open(prof))
nodes = collections.defaultdict(list)
for e in ev:
    if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
        nodes[e["name"][:-12]].append((e["dur"], e["args"].get("op_name"), e["args"].get("output_type_shape")))
print("wall ours %.2f ort %.2f" % (statistics.median(wall["ours"])*1e3, statistics.median(wall["ort"])*1e3))
ot = 0
ort_list = []
for n, v in nodes.items():
    d = statistics.median([a[0] for a in v[2:]]) / 1e3; ot += d
    ort_list.append((n, v[0][1], d, v[0][2]))
print("ort node sum", ot, "ours step sum", sum(statistics.median(v) for v in samples.values()) * 1e3)
ours_list = [(st.node, st.kernel_name, statistics.median(samples[st.node]) * 1e3) for st in m.executor.steps]
convs_o = [o for o in ours_list if "conv" in o[1]]
convs_r = [o for o in ort_list if "Conv" in o[1]]
print(len(convs_o), len(convs_r))
for a, b in zip(convs_o, convs_r):
    print(f"{a[0]:<12} {a[2]:7.3f}   {b[0][:40]:<40} {b[1]:<10} {b[2]:7.3f} {str(b[3])[:80]}")
for b in ort_list:
    if "Conv" not in b[1]: print("ort other", b[0][:40], b[1], "%.3f" % b[2])
