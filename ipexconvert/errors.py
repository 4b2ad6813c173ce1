"""Errors a person can act on: each names the problem and the fix.

The CLI prints these without a traceback; anything else escaping is a bug.
"""
from __future__ import annotations


class IpexConvertError(Exception):
    """Base class: `problem` says what went wrong, `fix` what to do about it."""

    exit_code = 2

    def __init__(self, problem: str, fix: str | None = None):
        self.problem = problem
        self.fix = fix
        super().__init__(problem if fix is None else f"{problem}\n  fix: {fix}")


class UserInputError(IpexConvertError):
    """A bad argument, file or input tensor."""


class UnsupportedOpError(IpexConvertError):
    """The model uses an op the IR cannot represent safely."""


class ArtifactError(IpexConvertError):
    """A missing, truncated, corrupt or incompatible artifact."""


class ConversionBugError(IpexConvertError):
    """The conversion made a graph its own loader refuses: a bug in ipexconvert, or a construct of the model it
    maps wrongly. Exit 3, as any internal error."""

    exit_code = 3


class AccuracyError(IpexConvertError):
    """The converted model is further from eager PyTorch than the budget allows."""

    exit_code = 1


class UnsafeCheckpointError(IpexConvertError):
    """A checkpoint that needs pickle (which runs code) and no trust flag."""
