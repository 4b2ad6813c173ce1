"""The conversion target: the device an artifact is made for, and how much of that device it may assume.

Chosen at conversion (`--target`, `optimize(target=...)`), recorded in the manifest, handed to every
pass (PassOptions.target) and checked by the backend at load. The default is the portable choice:
`cpu` means any x86-64 CPU, with kernels chosen for the loading CPU at load, never "whatever the
converting host is". Naming a level (`cpu:avx512_bf16`) says the artifact is only for CPUs with at
least that level: the loader refuses it on a lower CPU with a clear error instead of running it slowly.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from .errors import UserInputError

# The CPU ISA levels, lowest first (backends/cpu/isa.py detects which one a CPU has).
CPU_LEVELS = ("generic", "avx2", "avx512", "avx512_vnni", "avx512_bf16", "amx")
PORTABLE = "portable"
DEVICES = ("cpu",)  # a GPU backend adds its device here


class Target(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    device: Literal["cpu"] = "cpu"
    level: str = PORTABLE  # cpu: "portable" or the lowest ISA level a loading CPU must have

    @field_validator("level")
    @classmethod
    def _known_level(cls, level: str) -> str:
        if level != PORTABLE and level not in CPU_LEVELS:
            raise ValueError(f"{level!r} is not a CPU ISA level (use one of: {PORTABLE}, {', '.join(CPU_LEVELS)})")
        return level

    @classmethod
    def parse(cls, text: "str | Target | None") -> "Target":
        """"cpu", "cpu:avx2", or a Target; None is the default (portable CPU). A bad name is a UserInputError."""
        if text is None:
            return cls()
        if isinstance(text, Target):
            return text
        device, _, level = str(text).strip().lower().partition(":")
        if device not in DEVICES:
            raise UserInputError(f"target {text!r}: device {device!r} is not supported",
                                 f"use one of: {', '.join(DEVICES)} (optionally with an ISA level, e.g. cpu:avx2)")
        try:
            return cls(device=device, level=level or PORTABLE)
        except ValueError as e:
            raise UserInputError(f"target {text!r}: {e.errors()[0]['msg'].removeprefix('Value error, ')}",
                                 f"e.g. --target cpu (any x86-64 CPU) or --target cpu:{CPU_LEVELS[4]}") from None

    def describe(self) -> str:
        if self.level == PORTABLE:
            return f"{self.device} (portable: kernels chosen for the loading CPU)"
        return f"{self.device}:{self.level} (CPUs with {self.level} or above)"

    def __str__(self) -> str:
        return self.device if self.level == PORTABLE else f"{self.device}:{self.level}"
