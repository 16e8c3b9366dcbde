"""tinax's words for a call JAX refuses for one of its arguments (error paths and
``explain`` only): a leaf it cannot take, or a static argument it cannot hash."""

from __future__ import annotations

from typing import Any

import jax

from tinax._src.budget import rejections
from tinax._src.core import validation
from tinax._src.diagnosis import record
from tinax._src.jit import conventions, jax_options
from tinax._src.models.nnx import trees as nnx_trees


def _leaves(
    signature: validation.LazySignature,
    statics: jax_options.Statics,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> list[tuple[str, Any]]:
    """``(path, value)`` of each leaf of the call that is not an array (error paths only);
    none where an argument holds a cycle (its flatten would not end)."""
    try:
        known = signature.get()
        traced = named_arguments(known, statics, args, kwargs, static=False)
        nnx_trees.refuse_cycles(_leaves, traced)
        call = record.record(known, statics, args, kwargs)
    except Exception:
        return []
    tree_util: Any = jax.tree_util
    keystr = tree_util.keystr
    return [
        (argument.name + keystr(path), value)
        for argument in call.recorded
        if not argument.static
        for path, value in zip(argument.paths, argument.values, strict=True)
        if not record.is_abstract(value)
    ]


def named_arguments(
    known: Any,
    statics: jax_options.Statics,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    static: bool,
) -> list[tuple[str, Any]]:
    """``(name, value)`` of each argument of the call that is static (``static=True``)
    or traced (``False``)."""
    return [
        (name, value)
        for name, _, value, _, is_static in record.named_arguments(known, statics, args, kwargs)
        if bool(is_static) == static
    ]


def leaf_error(
    api: str,
    signature: validation.LazySignature,
    statics: jax_options.Statics,
    convention: conventions.Convention,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> str | None:
    """tinax's message for a call JAX refuses for one of its leaves (error paths only):
    the first leaf that is not an array and that the ``convention`` refuses (with
    ``static_nonarrays``, one that is not hashable), or ``None`` if there is none."""
    for path, value in _leaves(signature, statics, args, kwargs):
        refused = convention.leaf_message(api, path, value)
        if refused is not None:
            return refused
    return None


def static_error(
    api: str,
    signature: validation.LazySignature,
    statics: jax_options.Statics,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> str | None:
    """tinax's message for a call JAX refuses for an unhashable static argument, naming
    it (``layers=[16, 32]``), or ``None`` (error paths and ``explain`` only)."""
    try:
        arguments = named_arguments(signature.get(), statics, args, kwargs, static=True)
    except Exception:
        return None
    return rejections.unhashable_static(api, arguments)
