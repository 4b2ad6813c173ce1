"""The GPU ("xpu") backend: the same device-neutral artifact, run on an NVIDIA GPU through torch's CUDA
operators (cuBLASLt, cuDNN, scaled_dot_product_attention) and captured in one CUDA graph per set of
dims (graphs.py). Weights are placed on the GPU at load; nothing in the artifact is GPU code.
Importing backend.py needs a visible GPU: backends.get_backend("cuda") says so clearly when there is none."""
from typing import Optional

import torch


def unavailable_reason() -> Optional[str]:
    """None when this process can run CUDA kernels, else why not."""
    if not torch.backends.cuda.is_built():
        return f"this torch ({torch.__version__}) was built without CUDA"
    if not torch.cuda.is_available():
        return "no CUDA GPU is visible to this process (torch.cuda.is_available() is False)"
    return None
