"""The attributes an object takes from its function, as a `jax.jit` object does
(``__name__``, ``__doc__``, ``__wrapped__``..., JAX's ``wraps`` rules)."""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any, cast

_MISSING = object()


def _read(function: object, name: str, default: object) -> object:
    """``getattr(function, name, default)``, and ``default`` if reading raises."""
    try:
        return getattr(function, name, default)
    except Exception:
        return default


def present(owner: Any, function: Callable[..., Any], names: tuple[str, str]) -> None:
    """Gives ``owner`` the attributes a `jax.jit` object takes from ``function``.

    These are JAX's ``wraps`` rules, `functools.update_wrapper`'s with JAX's
    names: ``__name__``/``__qualname__`` as `budget.jax_names` (``names``),
    ``__module__`` (else ``<unknown module>``), ``__doc__`` (``""`` if none),
    ``__annotations__`` (``{}`` if none), ``__wrapped__``, and the entries of
    ``function.__dict__``, except names the object already has: its fields,
    its private state and everything its class defines stay its own. Reading
    an odd callable never fails here.
    """
    doc = function.__doc__ if type(function) is types.FunctionType else _MISSING
    if doc is None or type(doc) is str:  # a def or lambda: every attribute is there
        plain = cast("types.FunctionType", function)
        doc = doc or ""
        module: object = plain.__module__
        annotations: object = plain.__annotations__
        extra: object = plain.__dict__
    else:
        doc = _read(function, "__doc__", "")
        try:
            doc = doc or ""
        except Exception:
            doc = ""
        module = _read(function, "__module__", "<unknown module>")
        annotations = _read(function, "__annotations__", {})
        extra = _read(function, "__dict__", None)
    owner.__dict__.update(  # frozen: written as attrs's __init__ writes the fields
        __name__=names[0],
        __qualname__=names[1],
        __module__=module,
        __doc__=doc,
        __annotations__=annotations,
        __wrapped__=function,
    )
    if type(extra) is dict and extra:  # a class's namespace is a mappingproxy: not merged
        _merge(owner, cast("dict[object, object]", extra))


def _merge(owner: Any, extra: Mapping[Any, object]) -> None:
    """Copies the entries of a function's ``__dict__`` onto ``owner``, except names it
    has already (its fields, its private state, its class's attributes)."""
    setattr_ = object.__setattr__
    own = owner.__dict__
    kind = cast("type[object]", type(owner))
    for key, value in tuple(extra.items()):
        if type(key) is str and key not in own and getattr(kind, key, _MISSING) is _MISSING:
            setattr_(owner, key, value)
