"""The table's entry type and the decorator the mapper modules register with."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

Args = dict[str, Any]  # one ATen call's arguments by schema name (fx nodes for tensors)
Converted = tuple[list[Any], dict[str, Any]]  # (the op's inputs: fx nodes or None, its attrs)
MapperFn = Callable[[str, Args], Converted]


class Unconvertible(Exception):
    """Raised by a mapper when this call's arguments fall outside what the IR op models (training-mode
    dropout, ceil-mode pooling ...): the call is then decomposed or kept as an `aten` fallback node."""


@dataclass(frozen=True)
class Mapper:
    """How calls to one ATen target become nodes of IR op `op`: convert(target, args) -> (inputs, attrs)."""

    op: str
    convert: MapperFn


ATEN_MAP: dict[str, Mapper] = {}


def maps_to(op: str, *targets: str) -> Callable[[MapperFn], MapperFn]:
    """Register the decorated mapper for each of `targets`, as IR op `op`."""

    def register(convert: MapperFn) -> MapperFn:
        for target in targets:
            if target in ATEN_MAP:
                raise RuntimeError(f"{target} is mapped twice (to {ATEN_MAP[target].op} and {op})")
            ATEN_MAP[target] = Mapper(op, convert)
        return convert

    return register
