"""Does JAX's trace cache treat two calls alike? It compares exactly what JAX keys on:
abstract values and tree structures with ``==``, static arguments by type and ``==``.
Never text: `explain(...).retraces` always equals what JAX does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tinax._src import private
from tinax._src.diagnosis.record import (
    Argument,
    TracedSignature,
    is_abstract,
)


def same(a: Any, b: Any) -> bool:
    """``a == b`` as a plain bool; an ``==`` that raises or is ambiguous is unequal."""
    try:
        return bool(a == b)
    except Exception:
        return False


def static_equal(a: Any, b: Any) -> bool:
    """Whether JAX's cache finds static value ``b`` under ``a``: same type and ``==``,
    and from jax 0.11.0 the same hash.

    JAX boxes static arguments in ``_HashableWithStrictTypeEquality``
    (``type(a) is type(b) and a == b``) and requires them to be hashable. Whether
    the hash decides depends on the release: on jax 0.9.2 and 0.10.2 an equal value
    with another hash reuses the trace; on 0.11.0 and later it traces again
    (`private.STATIC_HASH_DECIDES`; `tests/test_jax_agrees.py` checks both).
    """
    if type(a) is not type(b):
        return False
    try:
        hashed = hash(b)
    except Exception:  # unhashable: JAX refuses the call
        return False
    if a is b:
        return True
    return same(a, b) and (not private.STATIC_HASH_DECIDES or hash_equal(a, hashed))


def hash_equal(a: Any, hashed: int) -> bool:
    """``hash(a) == hashed``; a hash that raises is unequal."""
    try:
        return hash(a) == hashed
    except Exception:
        return False


def _arguments_match(old: Argument, new: Argument) -> bool:
    if (old.name, old.keyword, old.static) != (new.name, new.keyword, new.static):
        return False
    if old.static:
        return static_equal(old.values[0], new.values[0])
    if not same(old.treedef, new.treedef) or len(old.values) != len(new.values):
        return False
    return all(leaf_match(a, b) for a, b in zip(old.values, new.values, strict=True))


def leaf_match(a: Any, b: Any) -> bool:
    """Abstract values by ``==``; a leaf that is not an array (static under
    ``static_nonarrays=True``) as JAX keys a static value."""
    if is_abstract(a) and is_abstract(b):
        return same(a, b)
    return static_equal(a, b)


def matches(old: TracedSignature, new: TracedSignature) -> bool:
    """Whether JAX would run ``new`` from the trace recorded as ``old``.

    Arguments are matched by name: JAX flattens keyword arguments as a dict,
    in sorted order, so the order they were passed in does not matter.
    """
    if not same(old.abstract_mesh, new.abstract_mesh):
        return False
    if not same(old.config_values, new.config_values):
        return False
    earlier = {argument.name: argument for argument in old.recorded}
    if len(earlier) != len(new.recorded):
        return False
    for argument in new.recorded:
        match = earlier.get(argument.name)
        if match is None or not _arguments_match(match, argument):
            return False
    return True


def reused(
    history: Sequence[TracedSignature], new: TracedSignature, cleared: int = 0
) -> TracedSignature | None:
    """The earlier trace JAX would run ``new`` from, or ``None`` if it would trace; traces
    numbered up to ``cleared`` are no longer in JAX's cache."""
    for old in history:
        if old.number > cleared and matches(old, new):
            return old
    return None
