"""The native kernels run on torch's own OpenMP runtime.

Forking after parallel work is not tested: with libgomp a forked child hangs in its first
parallel region, in torch's own ops as much as in ours (docs/native.md, "Threads").
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import native_ops as native

pytestmark = pytest.mark.skipif(not native.available(), reason="native extension not built")


def _loaded_gomp() -> set[str]:
    return {line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines() if "libgomp" in line}


def _softmax_matches(threads: int) -> bool:
    x = torch.randn(512, 1024)  # several 16K-element chunks: really split over threads
    return torch.allclose(native.softmax(x, threads=threads), torch.softmax(x, -1), atol=1e-6, rtol=1e-5)


_CHILD = """
import torch
from pathlib import Path
from ipexconvert.backends.cpu import native_lib
x = torch.randn(512, 1024)
out = torch.empty_like(x)
native_lib.raw.softmax(x, 1.0, None, out, None, 2)
print(sorted({line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines() if "libgomp" in line}))
"""


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc (Linux)")
def test_one_openmp_runtime_in_the_process():
    """torch and our kernels, after parallel work, in a process of their own (a test session may have imported
    packages that bring their own runtime, scikit-learn's for one: not ours to judge)."""
    child = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    loaded = ast.literal_eval(child.stdout.strip().splitlines()[-1])
    assert len(loaded) <= 1, f"two OpenMP runtimes loaded: {loaded}"


def test_kernels_run_split_over_threads():
    assert _softmax_matches(2)
    assert _softmax_matches(1)


_CHURN_CHILD = """
import os
import torch
from ipexconvert.backends.cpu import native_lib
torch.set_num_threads(4)
big = torch.randn(512, 1024)
small = torch.randn(32, 1024)  # two 16K-element chunks: work for 2 of the 4 threads
out = torch.empty_like(small)
torch.softmax(big, -1)
before = set(os.listdir("/proc/self/task"))
for _ in range(20):
    native_lib.raw.softmax(small, 1.0, None, out, None, 4)
    torch.softmax(big, -1)
print(len(set(os.listdir("/proc/self/task")) - before))
"""


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc (Linux)")
def test_a_kernel_with_little_work_keeps_the_thread_team():
    """A call whose work fits fewer threads than it was given still opens the full team: libgomp ends surplus
    threads when a smaller team starts and creates them again for the next bigger one (torch's ops here), which
    made every op around our kernels slow on a 16-core host (docs/native.md, "Threads")."""
    child = subprocess.run([sys.executable, "-c", _CHURN_CHILD], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    assert int(child.stdout.strip().splitlines()[-1]) == 0, "threads were created again between parallel regions"
