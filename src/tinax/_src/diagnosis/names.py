"""How a report names a function: its qualified name, and the ``file:line`` of its code."""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import Any

from tinax._src.diagnosis.elide import MAX_NAME, fit


def function_name(function: Callable[..., Any]) -> str:
    """A readable name for any callable: qualified name, or what it wraps."""
    if isinstance(function, functools.partial):
        return f"partial({function_name(function.func)})"  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    if isinstance(name, str):
        return name
    return f"{type(function).__qualname__} instance"


def function_location(function: Callable[..., Any]) -> str | None:
    """``file:line`` of the code behind ``function``, where Python knows it."""
    try:
        return _location(function)
    except Exception:  # an odd callable must not turn the budget error into another error
        return None


def _location(function: Callable[..., Any]) -> str | None:
    seen = 0
    target: Any = function
    while seen < 32:  # unwrap partials, bound methods, decorators and callable instances
        seen += 1
        if isinstance(target, functools.partial):
            target = target.func  # pyright: ignore[reportUnknownMemberType]
        elif inspect.ismethod(target):
            target = target.__func__
        elif hasattr(target, "__wrapped__"):
            target = target.__wrapped__
        elif not hasattr(target, "__code__") and not isinstance(target, type):
            call = getattr(type(target), "__call__", None)  # noqa: B004  # pyright: ignore[reportUnknownArgumentType]
            if call is None or call is target:
                break
            target = call
        else:
            break
    code = getattr(target, "__code__", None)
    if code is None:
        return None
    filename: str = code.co_filename
    try:
        relative = os.path.relpath(filename)
    except ValueError:
        relative = filename
    if not relative.startswith(".."):
        filename = relative
    return f"{filename}:{code.co_firstlineno}"


def where(function: Callable[..., Any]) -> tuple[str, str | None, str]:
    name = function_name(function)
    location = function_location(function)
    return name, location, heading(name, location)


def heading(name: str, location: str | None) -> str:
    """``name (file:line)``, or the name alone where the location is unknown; a long
    name (a test method's local lambda) is elided in the middle."""
    name = fit(name, MAX_NAME)
    return f"{name} ({location})" if location else name
