"""Kernel registry: (device, op) -> factory(attrs) -> callable(inputs, dims).

Ops with no registered kernel run their reference implementation. Native and
xpu kernels register here; the executor never branches on op names.
"""
from __future__ import annotations

from typing import Any, Callable

from ..ir.opdef import get_op

KernelFactory = Callable[[Any], Callable[[list, dict[str, int]], Any]]
KERNELS: dict[tuple[str, str], KernelFactory] = {}


def register_kernel(device: str, op: str):
    def wrap(factory: KernelFactory) -> KernelFactory:
        KERNELS[(device, op)] = factory
        return factory

    return wrap


def resolve_kernel(device: str, op: str, attrs: Any) -> tuple[Callable, str]:
    """The callable for one node and a short name of where it came from (for profiles)."""
    factory = KERNELS.get((device, op))
    if factory is not None:
        return factory(attrs), f"{device}:{op}"
    return get_op(op).compile(attrs), f"reference:{op}"
