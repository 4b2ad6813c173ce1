"""Keep freed memory in the process so the next inference reuses its pages instead of faulting them in.

The executor frees each intermediate after its last reader, and torch hands the memory back to
glibc's malloc. glibc's defaults then return much of it to the kernel: blocks above a dynamic
threshold get their own mmap, and the top of the heap is trimmed once about twice that threshold
is free. The next inference's tensors are fresh pages again, each one a minor page fault (about
3 us here). Measured (docs/architecture.md, "Runtime"): ResNet-50 fp32 batch 16 faulted 26-41
thousand pages per call, int8 batch 1 up to a few hundred.

So the first artifact loaded on the CPU sets glibc's mmap threshold to its maximum (32 MiB) and
its trim threshold to 1 GiB, once, for the whole process: blocks up to 32 MiB come from the heap
and stay there between calls. Tensors larger than 32 MiB still get an mmap of their own.
It is skipped where the user already tuned malloc (MALLOC_*_ environment variables, or
GLIBC_TUNABLES naming glibc.malloc), off glibc, and with IPEXCONVERT_MALLOC_TUNING=0.
"""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Literal, Mapping, Optional

from pydantic import BaseModel

from ... import environment

# mallopt(3) parameter numbers from glibc's malloc.h.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 32 << 20  # glibc's largest accepted value on 64-bit (HEAP_MAX_SIZE / 2)
TRIM_THRESHOLD = 1 << 30

_USER_MALLOC_VARIABLES = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


class MallocTuning(BaseModel):
    """What happened to the process's malloc settings (doctor and bench report it)."""

    state: Literal["not yet", "applied", "skipped"]
    detail: str


_lock = threading.Lock()
_result = MallocTuning(state="not yet", detail="no artifact loaded on the CPU in this process yet")


def reason_to_skip(environ: Mapping[str, str]) -> Optional[str]:
    """Why the tuning must not run in this environment; None where it may."""
    if environment.switched_off("IPEXCONVERT_MALLOC_TUNING", environ):
        return "IPEXCONVERT_MALLOC_TUNING=0"
    named = [v for v in _USER_MALLOC_VARIABLES if v in environ]
    if "glibc.malloc" in environ.get("GLIBC_TUNABLES", ""):
        named.append("GLIBC_TUNABLES")
    if named:
        return f"the user's own malloc settings ({', '.join(named)}) are kept"
    return None


def _glibc():
    """The process's C library when it is glibc (the only one whose mallopt numbers we know)."""
    try:
        libc = ctypes.CDLL(None)
        version = libc.gnu_get_libc_version
        libc.mallopt  # noqa: B018 - present on every glibc, checked for odd builds
    except (OSError, AttributeError):
        return None, None
    version.restype = ctypes.c_char_p
    return libc, version().decode()


def keep_freed_memory() -> MallocTuning:
    """Apply the tuning once per process (later calls return the first call's result)."""
    global _result
    with _lock:
        if _result.state != "not yet":
            return _result
        skip = reason_to_skip(os.environ)
        libc, version = (None, None) if skip else _glibc()
        if skip:
            _result = MallocTuning(state="skipped", detail=skip)
        elif libc is None:
            _result = MallocTuning(state="skipped", detail="the C library is not glibc")
        elif libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1 or libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) != 1:
            _result = MallocTuning(state="skipped", detail=f"glibc {version} refused mallopt")
        else:
            _result = MallocTuning(state="applied", detail=f"glibc {version}: mmap threshold {MMAP_THRESHOLD >> 20} MiB, "
                                                           f"trim threshold {TRIM_THRESHOLD >> 30} GiB")
        return _result


def current() -> MallocTuning:
    return _result
