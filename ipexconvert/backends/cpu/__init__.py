"""The CPU backend: ISA detection and caps (isa.py, isa_caps.py), process settings (malloc.py,
openmp_wait.py), the loaders of our two native libraries (native_lib.py: ipexconvert._native;
onednn_direct.py: ipexconvert._dnnl), the one self-check of libraries we call (self_check/), load-time
compute precision (compute_precision.py), the kernels, one file per op (kernels/), and the Backend
the executor asks (backend.py).

Kept import-free: `import ipexconvert` imports isa_caps and openmp_wait from here before torch runs.
"""
