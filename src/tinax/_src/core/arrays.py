"""What counts as an array where non-array leaves are static (``static_nonarrays=True``):
``eqx.is_array``'s rule. NumPy scalars count, Python numbers do not."""

from __future__ import annotations

import jax
import numpy as np
from jax.core import Tracer

from tinax._src import private

_ARRAY_TYPES: tuple[type, ...] = (
    np.ndarray,
    np.generic,
    jax.Array,
    Tracer,  # a jax.Array by isinstance, not by issubclass
    jax.ShapeDtypeStruct,  # stands for an array (lower, eval_shape, precompile)
    *private.literal_array_types(),
)
KNOWN: dict[type, bool] = {}  # type -> is an array (read directly on the call path)
_KNOWN_LIMIT = 4096


def array_type(kind: type) -> bool:
    """Whether leaves of type ``kind`` are arrays (`is_array`), cached per type."""
    known = KNOWN.get(kind)
    if known is None:
        if len(KNOWN) > _KNOWN_LIMIT:
            KNOWN.clear()
        known = KNOWN[kind] = issubclass(kind, _ARRAY_TYPES)
    return known


def is_array(leaf: object) -> bool:
    """Whether ``leaf`` is traced under ``static_nonarrays=True``: a JAX or NumPy array
    (``eqx.is_array``'s rule; NumPy scalars count, Python numbers do not), or a
    `jax.ShapeDtypeStruct` standing for one."""
    return array_type(type(leaf))
