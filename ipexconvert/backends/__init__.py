"""Backends: what runs an artifact's graph on one kind of device.

The executor and the loader ask a Backend (the protocol in base.py) instead of importing device code: which
level its kernels are chosen for, what to do to the program at load (e.g. compute precision), how to
place constants, how a plan runs per call, and process-wide settings. Each backend is a folder
(`backends/cpu/`, `backends/cuda/`) whose `backend.py` defines it and whose `kernels/` registers its
kernel factories in runtime/kernels.py under (device, op). Backends are imported on first use, so `import ipexconvert`
stays light and a device nobody asks for costs nothing.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from ..errors import UserInputError

if TYPE_CHECKING:
    from .base import Backend

# device -> the module whose BACKEND attribute runs it
BACKEND_MODULES: dict[str, str] = {"cpu": "ipexconvert.backends.cpu.backend",
                                   "cuda": "ipexconvert.backends.cuda.backend"}

_loaded: dict[str, "Backend"] = {}


def get_backend(device: str) -> "Backend":
    """The backend for a device name ("cpu"); importing it registers its kernels."""
    if device not in _loaded:
        module = BACKEND_MODULES.get(device)
        if module is None:
            raise UserInputError(f"device {device!r} is not supported yet", f"use one of: {', '.join(BACKEND_MODULES)}")
        _loaded[device] = import_module(module).BACKEND
    return _loaded[device]
