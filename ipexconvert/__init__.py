"""ipexconvert: PyTorch model -> optimized single-file artifact -> fast loader."""
__version__ = "0.1.0"

from .api import OptimizeResult, load_artifact, optimize  # noqa: E402

__all__ = ["optimize", "load_artifact", "OptimizeResult", "__version__"]
