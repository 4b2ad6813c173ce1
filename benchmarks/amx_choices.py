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
    if not s.kernel_name.startswith("native:bf16_amx_gemm"): continue
    fn = s.kernel.fn if hasattr(s.kernel, "fn") else s.kernel
    cells = {n: c.cell_contents for n, c in zip(fn.__code__.co_freevars, fn.__closure__ or ())}
    ch = cells.get("choice")
    tiles = cells["tiles"]
    packed = dict(zip(tiles.__code__.co_freevars, (c.cell_contents for c in tiles.__closure__)))["packed"]
    shape = (packed.shape[0] * 32, packed.shape[1] * 32)  # (out, in)
    chosen.append((shape, None if ch is None else dict(ch.choices)))
by_shape = {}
for shape, c in chosen:
    tiles, onednn = by_shape.get(shape, (0, 0))
    won = c is None or all(c.values())  # None: IPEXCONVERT_AMX_GEMM=always
    by_shape[shape] = (tiles + won, onednn + (not won))
print(len(chosen), "layers; (out, in): tiles / oneDNN chosen:",
      ", ".join(f"{s[0]}x{s[1]}: {t}/{o}" for s, (t, o) in by_shape.items()))
