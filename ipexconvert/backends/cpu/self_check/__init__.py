"""The CPU backend's one self-check: before a kernel first uses a library we do not control at build
time, that library is checked once per process against the op references, and kernels that rely on
a failed check decline (the next factory runs). Two subjects:

- torch_ops.py: torch's private oneDNN/MKL operators (schema and numbers), used by the torch_onednn
  and torch_mkl kernels;
- onednn_direct.py: our direct oneDNN layers (ipexconvert._dnnl), used by the onednn_direct kernels.

Both run lazily (not at import) and are reported together by `report()` for `ipexconvert doctor`.
"""
from __future__ import annotations


def report() -> dict:
    """{"torch_ops": ..., "onednn_direct": ...}: what each check found (running it if it has not run)."""
    from .. import onednn_direct
    from ..isa import selected_isa
    from . import torch_ops

    if onednn_direct.available():
        onednn_direct.usable(selected_isa())  # runs the check once, as the first layer would
    return {"torch_ops": torch_ops.probe_report(), "onednn_direct": onednn_direct.report()}
