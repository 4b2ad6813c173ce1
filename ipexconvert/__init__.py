"""ipexconvert: PyTorch model -> optimized single-file artifact -> fast loader."""
__version__ = "0.1.0"

from .backends.cpu import isa_caps  # noqa: F401,E402  (first: caps torch/oneDNN/MKL to IPEXCONVERT_MAX_ISA before they run)
from .backends.cpu import openmp_wait  # noqa: F401,E402  (before torch loads libgomp: short spin for shared hosts)

from .api import OptimizeResult, load_artifact, optimize  # noqa: E402

__all__ = ["optimize", "load_artifact", "OptimizeResult", "__version__"]
