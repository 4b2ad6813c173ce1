"""ipexconvert: PyTorch model -> optimized single-file artifact -> fast loader."""
__version__ = "0.1.0"
