"""Which of a bf16 artifact's AMX-eligible linear layers chose our bf16_amx_gemm and which torch's oneDNN linear
(backends/cpu/kernels/_in_situ.py), after 12 calls on its stored example inputs.

    python benchmarks/amx_choices.py ART.ipxc
"""
import sys, torch
from ipexconvert import load_artifact
from ipexconvert.artifact import read_example_inputs
torch.set_num_threads(2)
m = load_artifact(sys.argv[1])
inputs = read_example_inputs(sys.argv[1])
for _ in range(12): m.run_dict(inputs)
chosen = []
for s in m.executor.steps:
    if s.kernel_name != "native:bf16_amx_gemm": continue
    fn = s.kernel.fn if hasattr(s.kernel, "fn") else s.kernel
    cells = {n: c.cell_contents for n, c in zip(fn.__code__.co_freevars, fn.__closure__ or ())}
    ch = cells.get("choice")
    chosen.append(None if ch is None else dict(ch.choices))
print(len(chosen), "layers; tiles chosen:", sum(1 for c in chosen if c and all(c.values())), "oneDNN chosen:", sum(1 for c in chosen if c and not all(c.values())))
