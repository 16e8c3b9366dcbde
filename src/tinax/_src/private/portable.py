"""Abstract values that cross processes: a pickle that loads as the loader's own
(interned) values."""

from __future__ import annotations

import inspect
import io
import pickle
from typing import Any

from jax._src import core as _jax_core


def _constructor_parameters(kind: type) -> tuple[tuple[str, ...], dict[str, Any]] | None:
    """``(positional names, {keyword name: default})`` of ``kind``'s constructor, or
    ``None`` where it has no readable signature."""
    try:
        parameters = list(inspect.signature(kind).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = tuple(p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD)
    keywords = {p.name: p.default for p in parameters if p.kind is p.KEYWORD_ONLY}
    return positional, keywords


_SHAPED_ARRAY: Any = _jax_core.ShapedArray
_SHAPED_ARRAY_PARAMETERS = _constructor_parameters(_SHAPED_ARRAY)
_ABSTRACT_TOKEN: Any = getattr(_jax_core, "abstract_token", None)


def _shaped_array(positional: tuple[Any, ...], keywords: dict[str, Any]) -> Any:
    return _SHAPED_ARRAY(*positional, **keywords)


def _abstract_token() -> Any:
    return _ABSTRACT_TOKEN


class PortablePickler(pickle.Pickler):
    """The pickler of `portable_dumps`, for picklers that add to it."""

    def reducer_override(self, obj: Any) -> Any:
        if _ABSTRACT_TOKEN is not None and obj is _ABSTRACT_TOKEN:
            return _abstract_token, ()
        if type(obj) is not _SHAPED_ARRAY or _SHAPED_ARRAY_PARAMETERS is None:
            return NotImplemented
        names, defaults = _SHAPED_ARRAY_PARAMETERS
        if not all(hasattr(obj, name) for name in (*names, *defaults)):
            return NotImplemented
        positional = tuple(getattr(obj, name) for name in names)
        keywords = {
            name: getattr(obj, name)
            for name, default in defaults.items()
            if getattr(obj, name) is not default  # a default singleton stays the default
        }
        return _shaped_array, (positional, keywords)


def portable_dumps(value: object) -> bytes:
    """``pickle.dumps`` for a value that another process compares with its own (the
    signatures that ``fail_fast``'s trace agreement exchanges).

    From jax 0.11.2 (0.12.0.1 run here) JAX interns abstract values (``ShapedArray``,
    the abstract token) and compares them by identity: a plain unpickled copy never
    equals the original. Here each ``ShapedArray`` is pickled as a call of its
    constructor (the fields its signature names), which returns the loading
    process's own interned value, and the abstract token as the loader's singleton.
    On jax 0.9.2 and 0.10.2, where they compare by value, the result is the same.
    """
    buffer = io.BytesIO()
    PortablePickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()
