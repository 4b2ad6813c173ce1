"""The CUDA kernels, one file per IR op: importing this package registers every factory in the kernel
registry (runtime/kernels.py) under ("cuda", op); a new <op>.py here is found without editing this file.
An op with no factory here, or whose factories all decline a node, runs its reference (ir/ops/<op>.py):
plain torch operators, which run on the GPU as they do on the CPU. The factories here exist where the
reference would read a value back to the CPU (which a CUDA graph cannot capture), reach memory with an
unchecked index, or where a GPU library does the op faster.

Names say what runs: `torch_cuda:` torch's CUDA operators (cuBLASLt, cuDNN, its attention kernels).
Nothing here touches the GPU at import: CI imports this package on machines without one.
"""
from importlib import import_module
from pathlib import Path

for _module in sorted(p.stem for p in Path(__file__).parent.glob("*.py")):
    if not _module.startswith("_"):  # _*.py are helpers shared by the op files
        import_module(f"{__name__}.{_module}")
