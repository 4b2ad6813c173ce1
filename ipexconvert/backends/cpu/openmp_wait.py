"""How long idle OpenMP threads spin before they sleep: short, so a busy host does not stall us.

torch, the oneDNN wheel, MKL and our native kernels all run on one libgomp thread pool. Between
parallel regions its idle threads spin, by default for 300000 iterations (milliseconds on CPUs
with a slow `pause`). On a quiet host that saves a wake-up; on a host whose cores are shared
(containers, a compiler running beside us) the spinning threads hold cores the working ones
need and every barrier waits for a preempted thread. Measured on 2 Xeon cores, ResNet-50 b1 fp32,
quiet host / 2 busy background processes (benchmarks/results/contention.md): default 37.1 / 500 ms,
100000 35.3 / 228, 30000 37.7 / 116, 10000 41.7 / 83, passive 46.4 / 67. 30000 is the shortest
spin that costs nothing measurable on a quiet host; on a host known to be shared, set
GOMP_SPINCOUNT=10000 (or OMP_WAIT_POLICY=PASSIVE) yourself.

libgomp reads GOMP_SPINCOUNT once, when it is loaded, so this only takes effect when
`import ipexconvert` comes before `import torch` (the CLI always does). A user's own
GOMP_SPINCOUNT or OMP_WAIT_POLICY wins. `ipexconvert doctor` says which case holds.
"""
from __future__ import annotations

import os
from pathlib import Path

SPIN_COUNT = "30000"


def _libgomp_loaded() -> bool:
    try:
        return "libgomp" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


def apply(environ=os.environ, libgomp_loaded: bool | None = None) -> str:
    """Set GOMP_SPINCOUNT unless the user chose a wait policy; returns a line for doctor."""
    for variable in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        if environ.get(variable):
            return f"{variable}={environ[variable]} (set by the user)"
    loaded = _libgomp_loaded() if libgomp_loaded is None else libgomp_loaded
    if loaded:
        return ("libgomp default spin (torch was imported before ipexconvert; import ipexconvert first "
                f"or set GOMP_SPINCOUNT={SPIN_COUNT} to stay fast on a shared host)")
    environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    return f"GOMP_SPINCOUNT={SPIN_COUNT} (set by ipexconvert: idle threads sleep soon on a shared host)"


state = apply()
