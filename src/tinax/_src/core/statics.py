"""The vocabulary every layer speaks about `jax.jit`'s options: which arguments are
static (`Statics`), "not given" for shardings (`UNSPECIFIED`) and for argnames
(`NO_NAMES`), the bool check the options share, and what counts as an array where
non-array leaves are static (``static_nonarrays=True``: `is_array`, ``eqx.is_array``'s
rule; NumPy scalars count, Python numbers do not). The options themselves are parsed
above, in `jit/jax_options`."""

from __future__ import annotations

from typing import Any, NamedTuple, cast

import jax
import numpy as np
from jax.core import Tracer

from tinax._src import private
from tinax._src.core.validation import message

UNSPECIFIED: Any = private.unspecified()
"""`jax.jit`'s default for ``in_shardings``/``out_shardings``: not given."""


class _PageDefault(tuple[str, ...]):
    """The page's default ``()`` for an argnames option, told apart from a ``()``
    the user passed (which `jax.jit` reads differently next to argnums)."""

    __slots__ = ()


NO_NAMES: tuple[str, ...] = _PageDefault()


class Statics(NamedTuple):
    """Which arguments are static, as `jax.jit` decides it on each call.

    A positional argument is static when its index is in ``argnums`` (a negative
    number counts from the end of the call's positional arguments, as in JAX);
    a keyword argument when its name is in ``argnames``. Names inferred from
    numbers, and numbers from names, are already included, as `jax.jit` infers
    them. ``nonarrays`` is ``static_nonarrays``: every leaf of the other
    arguments that is not an array is static too.
    """

    argnums: tuple[int, ...]
    argnames: tuple[str, ...]
    nonarrays: bool = False

    def positional(self, index: int, count: int) -> bool:
        """Whether the ``index``-th of ``count`` positional arguments is static."""
        nums = self.argnums
        return index in nums or index - count in nums


NO_STATICS = Statics((), ())


def check_bool(api: str, parameter: str, value: object) -> bool:
    """A Python or NumPy bool (`jax.jit` takes any truthy value silently)."""
    if not issubclass(type(value), bool | np.bool_):
        raise TypeError(message(api, parameter, "a bool", value))
    return bool(cast("Any", value))


# --- what counts as an array (static_nonarrays) ----------------------------------------

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
