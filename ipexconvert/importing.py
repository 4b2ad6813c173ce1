"""Import a user's `package.module:function` (--model-factory, --eval-fn) with clear errors."""
from __future__ import annotations

import importlib
from typing import Callable

from .errors import UserInputError


def import_callable(spec: str, flag: str) -> Callable:
    module_name, _, fn_name = spec.partition(":")
    if not module_name or not fn_name:
        raise UserInputError(f"{flag} {spec!r} is not of the form package.module:function",
                             f"e.g. {flag} mypkg.models:build")
    try:
        fn = getattr(importlib.import_module(module_name), fn_name)
    except (ImportError, AttributeError) as e:
        raise UserInputError(f"cannot import {flag} {spec}: {e}",
                             "make sure the package is importable (pip install it, or set PYTHONPATH)") from None
    if not callable(fn):
        raise UserInputError(f"{flag} {spec} is a {type(fn).__name__}, not a function", "point it at a function")
    return fn
