"""The checks of ``propagate_updates`` at wrap time: its value, its company
(``static_nonarrays``), the function (not a bound method of an nnx object), and the
``out_shardings`` its `jax.jit` is given."""

from __future__ import annotations

import functools
import types
from typing import Any, cast

import numpy as np

from tinax._src.core import validation
from tinax._src.core.statics import UNSPECIFIED
from tinax._src.models.nnx.classes import nnx_kinds


def check_propagate_updates(api: str, value: object) -> bool | None:
    """``value`` as ``True``, ``False`` or ``None`` (a NumPy bool is a bool)."""
    if value is None:
        return None
    if not issubclass(type(value), bool | np.bool_):
        raise TypeError(validation.message(api, "propagate_updates", "True, False or None", value))
    return bool(cast("Any", value))


def check_with_nonarrays(api: str, propagate: bool | None, static_nonarrays: bool) -> None:
    """Refuses ``propagate_updates=True`` next to ``static_nonarrays=True``: the write-back
    rebuilds the nnx objects of the call, the split call hands the function a rebuilt tree
    of its own, and an nnx object keeps its non-array attributes static already."""
    if propagate and static_nonarrays:
        raise ValueError(
            f"{api}: propagate_updates must not be True when static_nonarrays=True (an nnx "
            "object keeps its non-array attributes in its tree structure already: use "
            "propagate_updates alone for nnx objects, static_nonarrays for equinox modules); "
            "got propagate_updates=True."
        )


def check_not_bound(api: str, function: object) -> None:
    """Refuses a bound method of an nnx object (``model.__call__``, also inside a
    ``functools.partial``), as ``nnx.jit`` does: it closes over the object, whose
    Variables the first trace would read as constants (a later update ignored) and
    could not assign. Read only while flax.nnx is imported."""
    target = function
    while type(target) is functools.partial:
        target = cast("Any", target).func
    if type(target) is not types.MethodType:
        return
    kinds = nnx_kinds()
    owner = target.__self__
    if kinds is None or not isinstance(owner, kinds):
        return
    method = f"{type(owner).__name__}.{target.__func__.__name__}"
    factory = "batched_jit" if api == "BatchedJit" else "bounded_jit"
    raise ValueError(
        validation.message(
            api,
            "function",
            f"a function, not a bound method of a flax.nnx object ({method})",
            function,
        )
        + "\nA bound method closes over its object: the first trace would read its Variables as "
        "constants (a later update ignored) and could not assign them; nnx.jit refuses it too."
        + f"\nFix: pass the object as an argument: step = {factory}({method}, ...), called as "
        f"step(model, x),\n  or a function (lambda model, x: model(x)), or decorate the method in "
        f"the class body."
    )


def output_shardings(out_shardings: object) -> tuple[object, object]:
    """``out_shardings`` of the function as given to the `jax.jit` of the call under
    ``propagate_updates=True``, which returns ``(output, updates)``: the user's for
    the output, unspecified for the updates (placed as XLA chooses, as without)."""
    return (out_shardings, UNSPECIFIED)
