"""The CPU kernels, one file per IR op: importing this package registers every factory in the kernel
registry (runtime/kernels.py) under ("cpu", op); a new <op>.py here is found without editing this file. Within an op's file the factories register in
preference order; the op's reference (ir/ops/<op>.py) runs when all of them decline.

Factory and kernel names say what runs: `native:` our own kernels (ipexconvert._native),
`onednn_direct:` our oneDNN primitives (ipexconvert._dnnl), `torch_onednn:` torch's oneDNN operators,
`torch_mkl:` torch's MKL packed GEMM. `ipexconvert doctor --kernels` prints the table.
"""
from importlib import import_module
from pathlib import Path

for _module in sorted(p.stem for p in Path(__file__).parent.glob("*.py")):
    if not _module.startswith("_"):  # _*.py are helpers shared by the op files
        import_module(f"{__name__}.{_module}")
