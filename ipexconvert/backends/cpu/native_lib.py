"""Loader of our native kernel library `ipexconvert._native` (built from `native/`: C++17, one build per
ISA level, see docs/native.md), and its CPU detection and per-kernel ISA levels.

The runtime kernels (backends/cpu/kernels/) call `raw` directly. tests/native/native_ops.py wraps
every kernel for torch tensors with a per-call ISA cap: the harness the per-ISA tests and the
kernel benchmarks use.
When the extension is missing, `available()` is False and `_lib()` raises RuntimeError.
"""
from __future__ import annotations

import functools
from typing import Optional

from ...errors import UserInputError

try:
    from ... import _native as raw  # the nanobind module; runtime kernels call it directly
    _IMPORT_ERROR: Optional[str] = None
except ImportError as e:  # not built (e.g. a source checkout without `pip install -e .`)
    raw = None
    _IMPORT_ERROR = str(e)


def available() -> bool:
    return raw is not None


def unavailable_reason() -> Optional[str]:
    return _IMPORT_ERROR


def _lib():
    if raw is None:
        raise RuntimeError(f"ipexconvert._native is not built ({_IMPORT_ERROR}); "
                           "reinstall with `pip install -e .` (see docs/native.md)")
    return raw


def _run(fn, *args, **kwargs):
    """Calls into _native; a bad ISA cap (ValueError "<what>='x' is not an ISA level; use one of:
    ...") becomes a UserInputError, other errors pass through."""
    try:
        return fn(*args, **kwargs)
    except ValueError as e:
        if "is not an ISA level" not in str(e):
            raise
        problem, _, fix = str(e).partition("; ")
        raise UserInputError(problem, fix or None) from None


def capture(calls: list):
    """One call making the native kernel call each of `calls` makes (native/python/capture.cpp: recorded once, made
    in order with the GIL released and no Python between them), or None: the extension is missing, or a call
    cannot be recorded. The tensors the calls hold must stay alive and unchanged while it is used."""
    return raw.capture(calls) if raw is not None else None


def row_copy(table, out, length_at, first: int):
    """A call copying table[length_at - first] into out with the length read when it runs (capture.cpp's copy_row,
    which capture() records), or None without the extension."""
    return functools.partial(raw.copy_row, table, out, length_at, first) if hasattr(raw, "copy_row") else None


def kernel_names() -> list[str]:
    """Every kernel the library was built with (the list lives once: native/kernels/*/kernel.cmake)."""
    return list(_lib().kernel_names())


def levels() -> list[str]:
    """All ISA levels, lowest first."""
    return _lib().levels()


def supported_levels() -> list[str]:
    """Levels this CPU and OS can run (CPUID, XCR0, AMX permission), lowest first."""
    return _lib().supported_levels()


def selected_level(max_isa: Optional[str] = None) -> str:
    """min(best supported, max_isa); max_isa None means IPEXCONVERT_MAX_ISA (unset: no cap)."""
    return _run(_lib().selected_level, max_isa)


def cpu_features() -> dict:
    return _lib().cpu_features()


def kernel_levels(name: str) -> list[str]:
    """The levels kernel `name` was compiled for."""
    return _lib().kernel_levels(name)


def kernel_level(name: str, max_isa: Optional[str] = None) -> str:
    """The level kernel `name` runs at under max_isa (falling back to the highest lower build), or
    "none" when it has no build at or below that level (attention has none below avx512_bf16)."""
    return _run(_lib().kernel_level, name, max_isa)
