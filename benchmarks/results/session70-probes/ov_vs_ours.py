"""ResNet-50 per-conv: OpenVINO's PERF_COUNT (runtime model rt_info) vs our per-step times, one process, alternating."""
import sys, time, statistics, torch, collections
sys.path.insert(0, "."); sys.path.insert(0, "benchmarks")
import ipexconvert
from ipexconvert.artifact import read_example_inputs
from ipexconvert.bench import resize_inputs
from ipexconvert.examples import get_example, resnet
from peers import openvino_peer as ovp
import openvino as ov
dtype, batch, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
art = {"bf16": "resnet50.bf16.4fb60b78c5cf", "fp32": "resnet50.fp32.4fb60b78c5cf", "int8": "resnet50.int8-calfc59f933da.4fb60b78c5cf"}[dtype]
path = f"benchmarks/.cache/{art}.ipxc"
torch.set_num_threads(2)
m = ipexconvert.load_artifact(path)
inputs = resize_inputs(read_example_inputs(path), m, {"batch": batch}) if batch != 1 else read_example_inputs(path)
ex = get_example("resnet50")
module = ex.build() if hasattr(ex, "build") else ex.module()
module = ex.build()
ovm, names = ovp.convert(module, inputs)
core = ov.Core()
compiled = core.compile_model(ovm, "CPU", {"INFERENCE_NUM_THREADS": 2, "INFERENCE_PRECISION_HINT": "bf16" if dtype == "bf16" else "f32",
                                          "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1, "PERF_COUNT": True})
req = compiled.create_infer_request()
feed = [ovp._to_numpy(inputs[n]) for n in names]
# ours per step
samples = {}; shapes = {}
for step in m.executor.steps:
    times = samples.setdefault(step.node, []); kernel = step.kernel
    def timed(ins, dims, kernel=kernel, times=times, node=step.node):
        s = time.perf_counter(); r = kernel(ins, dims); times.append(time.perf_counter() - s)
        if node not in shapes:
            shapes[node] = (tuple(ins[0].shape), tuple(r.shape))
        return r
    step.kernel = timed
ov_times = collections.defaultdict(list); ov_info = {}
wall = {"ours": [], "ov": []}
for r in range(rounds + 2):
    s = time.perf_counter(); m.run_dict(inputs); t1 = time.perf_counter() - s
    time.sleep(0.05)
    s = time.perf_counter(); req.infer(feed, share_inputs=True); t2 = time.perf_counter() - s
    time.sleep(0.05)
    if r < 2:
        for v in samples.values(): v.clear()
        continue
    wall["ours"].append(t1); wall["ov"].append(t2)
    for p in req.get_profiling_info():
        if p.status == p.status.EXECUTED:
            ov_times[p.node_name].append(p.real_time.total_seconds())
            ov_info[p.node_name] = (p.node_type, p.exec_type)
rt = compiled.get_runtime_model()
ov_shapes = {}
for op in rt.get_ordered_ops():
    try:
        ov_shapes[op.get_friendly_name()] = ([tuple(op.input(i).get_partial_shape().to_shape()) for i in range(op.get_input_size())], tuple(op.output(0).get_partial_shape().to_shape()) if op.get_output_size() else None, op.get_rt_info()["outputLayouts"].astype(str) if "outputLayouts" in op.get_rt_info() else "")
    except Exception as e:
        pass
print("wall ours %.3f ov %.3f" % (statistics.median(wall["ours"])*1e3, statistics.median(wall["ov"])*1e3))
ours_sum = collections.OrderedDict(); ov_sum = collections.OrderedDict()
print("--- ours")
for step in m.executor.steps:
    t = statistics.median(samples[step.node])*1e3
    key = (step.kernel_name.split(":")[-1].split("@")[0], shapes[step.node])
    print(f"  {step.node:<22} {step.kernel_name:<34} {t:8.3f} {shapes[step.node]}")
print("--- openvino")
tot = 0
for name, ts in ov_times.items():
    t = statistics.median(ts)*1e3; tot += t
    if t > 0.005:
        sh = ov_shapes.get(name)
        print(f"  {name[:60]:<60} {ov_info[name][0]:<14} {ov_info[name][1]:<28} {t:8.3f} {sh[0][:2] if sh else ''} {sh[1] if sh else ''} {sh[2] if sh else ''}")
print("ov sum", tot)
