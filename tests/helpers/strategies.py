"""Hypothesis strategies for the wrap-time inputs of `BoundedJit` and `BatchedJit`.

Two families:

- ``wide_values()``: anything a caller might pass by mistake, from plain
  Python and NumPy values through containers and callables to deliberately
  hostile objects whose ``__repr__``, ``__iter__``, ``__len__``,
  ``__getitem__``, ``__hash__``, ``__eq__``, ``__class__``, ``__int__`` or
  attribute access raise. Validation must turn every one of them into either
  an accepted, normalized value or exactly a ``TypeError``/``ValueError``.
- ``valid_*()``: values the API page documents as accepted, one strategy per
  argument, for properties about acceptance and normalization.

Hostile classes define ``_repr_pretty_`` so that Hypothesis can print a
falsifying example without calling the ``__repr__`` they sabotage. Meshes and
JAX arrays are built lazily (inside the strategies), so importing this module
does not touch the backend before ``conftest.py`` has configured 8 CPU devices.
"""

from __future__ import annotations

import collections
import enum
import fractions
import functools
import math
import operator
import sys
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh


def single_device_sharding(device):
    """A one-device sharding, as each JAX spells it: jax 0.12 deprecates the class."""
    make = getattr(jax.sharding, "make_single_device_sharding", None)
    return make(device) if make is not None else jax.sharding.SingleDeviceSharding(device)


__all__ = [
    "HOSTILE_CALLABLES",
    "HOSTILE_VALUES",
    "NUMPY_INTEGER_TYPES",
    "builtins_without_signature",
    "callables",
    "hostile_values",
    "identifiers",
    "integers_wide",
    "meshes_any",
    "numpy_integers",
    "valid_argnames",
    "valid_argnames_pair",
    "valid_axis_sizes",
    "valid_axis_specs",
    "valid_functions",
    "valid_max_traces",
    "valid_meshes",
    "valid_on_exceed",
    "wide_values",
]


class Boom(RuntimeError):
    """The exception every hostile object raises: never a TypeError or ValueError."""


def _pretty(text: str) -> Callable[..., None]:
    def _repr_pretty_(self: object, printer: Any, cycle: bool) -> None:
        printer.text(text)

    return _repr_pretty_


# --- hostile objects -----------------------------------------------------------------------


class RaisingRepr:
    """``repr`` raises."""

    _repr_pretty_ = _pretty("RaisingRepr()")

    def __repr__(self) -> str:
        raise Boom("__repr__")


class RaisingContainer:
    """Iteration, ``len`` and indexing raise (not a registered Sequence)."""

    _repr_pretty_ = _pretty("RaisingContainer()")

    def __iter__(self) -> Any:
        raise Boom("__iter__")

    def __len__(self) -> int:
        raise Boom("__len__")

    def __getitem__(self, index: int) -> Any:
        raise Boom("__getitem__")


class RaisingSequence(Sequence[str]):
    """A real `collections.abc.Sequence` whose iteration, ``len`` and indexing raise."""

    _repr_pretty_ = _pretty("RaisingSequence()")

    def __iter__(self) -> Any:
        raise Boom("__iter__")

    def __len__(self) -> int:
        raise Boom("__len__")

    def __getitem__(self, index: Any) -> Any:
        raise Boom("__getitem__")


class RaisingComparisons:
    """``hash``, ``==``, ``<`` and ``bool`` raise."""

    _repr_pretty_ = _pretty("RaisingComparisons()")

    def __hash__(self) -> int:
        raise Boom("__hash__")

    def __eq__(self, other: object) -> bool:
        raise Boom("__eq__")

    def __lt__(self, other: object) -> bool:
        raise Boom("__lt__")

    def __bool__(self) -> bool:
        raise Boom("__bool__")


class RaisingClass:
    """Reading ``__class__`` raises, so ``isinstance`` against an unrelated class raises."""

    _repr_pretty_ = _pretty("RaisingClass()")

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # pyright: ignore[reportIncompatibleMethodOverride]
        raise Boom("__class__")


class RaisingIndex:
    """``__index__`` and ``__int__`` raise (not an ``int`` subclass)."""

    _repr_pretty_ = _pretty("RaisingIndex()")

    def __index__(self) -> int:
        raise Boom("__index__")

    def __int__(self) -> int:
        raise Boom("__int__")


class IntRaisingInt(int):
    """An ``int`` subclass (so an integer by ``isinstance``) whose ``__int__`` raises."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"IntRaisingInt({int.__repr__(self)})")

    def __int__(self) -> int:
        raise Boom("__int__")

    def __index__(self) -> int:
        raise Boom("__index__")


class IntReturningStr(int):
    """An ``int`` subclass whose ``__int__`` returns a ``str``."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"IntReturningStr({int.__repr__(self)})")

    def __int__(self) -> int:
        return "not an int"  # type: ignore[return-value]


class IntRaisingRepr(int):
    """An ``int`` subclass whose ``repr`` raises."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"IntRaisingRepr({int.__repr__(self)})")

    def __repr__(self) -> str:
        raise Boom("__repr__")


class StrRaisingRepr(str):
    """A ``str`` subclass whose ``repr`` raises."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"StrRaisingRepr({str.__repr__(self)})")

    def __repr__(self) -> str:
        raise Boom("__repr__")


class StrRaisingHash(str):
    """A ``str`` subclass whose ``hash`` and ``==`` raise."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"StrRaisingHash({str.__repr__(self)})")

    def __hash__(self) -> int:
        raise Boom("__hash__")

    def __eq__(self, other: object) -> bool:
        raise Boom("__eq__")


class StrRaisingLen(str):
    """A ``str`` subclass whose ``len`` raises (so does its truth value)."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"StrRaisingLen({str.__repr__(self)})")

    def __len__(self) -> int:
        raise Boom("__len__")


class CallableRaisingGetattr:
    """Callable, but reading any attribute it lacks (``__name__``, ...) raises."""

    _repr_pretty_ = _pretty("CallableRaisingGetattr()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return 0

    def __getattr__(self, name: str) -> Any:
        raise Boom(f"__getattr__({name!r})")


class CallableRaisingSignature:
    """Callable, but its ``__signature__`` raises."""

    _repr_pretty_ = _pretty("CallableRaisingSignature()")

    def __call__(self, x: Any) -> Any:
        return x

    @property
    def __signature__(self) -> Any:
        raise Boom("__signature__")


class CallableWithOddNames:
    """Callable whose ``__name__`` and ``__qualname__`` are not ``str``."""

    _repr_pretty_ = _pretty("CallableWithOddNames()")

    def __init__(self) -> None:
        self.__name__ = 5
        self.__qualname__ = None

    def __call__(self, x: Any) -> Any:
        return x


class CallableRaisingRepr:
    """Callable whose ``repr`` raises."""

    _repr_pretty_ = _pretty("CallableRaisingRepr()")

    def __call__(self, x: Any) -> Any:
        return x

    def __repr__(self) -> str:
        raise Boom("__repr__")


HOSTILE_VALUES: dict[str, Callable[[], object]] = {
    "raising-repr": RaisingRepr,
    "raising-container": RaisingContainer,
    "raising-sequence": RaisingSequence,
    "raising-comparisons": RaisingComparisons,
    "raising-class": RaisingClass,
    "raising-index": RaisingIndex,
    "int-raising-int": lambda: IntRaisingInt(3),
    "int-returning-str": lambda: IntReturningStr(3),
    "int-raising-repr-negative": lambda: IntRaisingRepr(-3),
    "str-raising-repr": lambda: StrRaisingRepr("x"),
    "str-raising-hash": lambda: StrRaisingHash("x"),
    "str-raising-len": lambda: StrRaisingLen("x"),
    "list-of-raising-repr": lambda: [RaisingRepr()],
    "list-of-raising-comparisons": lambda: [RaisingComparisons()],
    "list-of-str-raising-repr-twice": lambda: [StrRaisingRepr("x"), StrRaisingRepr("x")],
    "list-of-str-raising-hash": lambda: [StrRaisingHash("x")],
    "list-of-str-raising-len": lambda: [StrRaisingLen("x")],
}
"""Hostile objects by readable name (for parametrize ids); each entry builds a fresh one."""

HOSTILE_CALLABLES: dict[str, Callable[[], object]] = {
    "callable-raising-getattr": CallableRaisingGetattr,
    "callable-raising-signature": CallableRaisingSignature,
    "callable-with-odd-names": CallableWithOddNames,
    "callable-raising-repr": CallableRaisingRepr,
}
"""Callable, hence valid ``function`` arguments, that sabotage introspection."""


def hostile_values() -> st.SearchStrategy[object]:
    """Fresh hostile objects, callable or not."""
    # st.builds, not .map: a mapped strategy runs isinstance() on its result, which
    # RaisingClass would break inside Hypothesis itself.
    builders = [*HOSTILE_VALUES.values(), *HOSTILE_CALLABLES.values()]
    return st.one_of(*(st.builds(build) for build in builders))


# --- plain Python and NumPy leaves ---------------------------------------------------------

NUMPY_INTEGER_TYPES: tuple[type[np.integer[Any]], ...] = (
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
)


def numpy_integers(min_value: int | None = None) -> st.SearchStrategy[np.integer[Any]]:
    """NumPy integer scalars of every width, optionally at least ``min_value``."""

    def of(kind: type[np.integer[Any]]) -> st.SearchStrategy[np.integer[Any]]:
        info = np.iinfo(kind)
        low = int(info.min) if min_value is None else max(int(info.min), min_value)
        return st.integers(low, int(info.max)).map(kind)

    return st.one_of(*(of(kind) for kind in NUMPY_INTEGER_TYPES))


def integers_wide() -> st.SearchStrategy[int]:
    """Python ints: small, negative, and far beyond 64 bits."""
    return st.one_of(
        st.integers(-3, 10),
        st.integers(),
        st.sampled_from([2**31, 2**63 - 1, 2**63, 2**64, 10**100, -(2**63), -(10**100)]),
    )


class Colour(enum.Enum):
    RED = 1


class Size(enum.IntEnum):
    SMALL = 2


def _numpy_and_jax_values() -> st.SearchStrategy[object]:
    return st.one_of(
        numpy_integers(),
        st.booleans().map(np.bool_),
        st.floats(width=32).map(np.float32),
        st.floats().map(np.float64),
        st.integers(-5, 5).map(np.array),  # 0-d ndarray
        st.lists(st.integers(-5, 5), max_size=3).map(np.array),
        st.lists(st.text(max_size=3), max_size=3).map(np.array),  # array of str
        st.integers(-5, 5).map(jnp.asarray),
        st.booleans().map(jnp.asarray),
        st.floats(-5, 5).map(jnp.float32),
    )


def _python_leaves() -> st.SearchStrategy[object]:
    return st.one_of(
        st.none(),
        st.booleans(),
        integers_wide(),
        st.floats(),
        st.complex_numbers(),
        st.fractions(),
        st.decimals(),
        st.just(Decimal(3)),
        st.just(fractions.Fraction(3, 1)),
        st.text(max_size=8),  # includes ""
        st.sampled_from(["", "x", "args", "kwargs", "self", " ", "a b", "1x", "\x00"]),
        st.sampled_from(["warn", "WARN", "raise ", "log\x00", "error", "ignore"]),
        st.binary(max_size=4),  # includes b""
        st.binary(max_size=4).map(bytearray),
        st.sampled_from([..., NotImplemented, Colour.RED, Size.SMALL, slice(1, 2), object()]),
        st.sampled_from([int, str, type, object, math, range(0), range(3)]),
    )


def _leaves() -> st.SearchStrategy[object]:
    return st.one_of(_python_leaves(), _numpy_and_jax_values())


def _hashable_leaves() -> st.SearchStrategy[object]:
    return st.one_of(
        st.none(), st.booleans(), st.integers(), st.text(max_size=4), st.binary(max_size=3)
    )


def _one_shot(items: list[object]) -> object:
    return (item for item in items)


def _containers(inner: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.lists(inner, max_size=4).map(collections.deque),
        st.lists(inner, max_size=4).map(_one_shot),  # generator
        st.lists(inner, max_size=4).map(iter),  # plain iterator
        st.dictionaries(st.text(max_size=4), inner, max_size=3),
        st.sets(_hashable_leaves(), max_size=4),
        st.frozensets(_hashable_leaves(), max_size=4),
        st.lists(st.text(max_size=4), max_size=4).map(lambda names: dict.fromkeys(names).keys()),
    )


# --- callables -----------------------------------------------------------------------------


def _plain(x: Any) -> Any:
    return x


def _two(x: Any, y: Any = 0) -> Any:
    return x


def _keywords(x: Any, **kwargs: Any) -> Any:
    return x


def _everything(a: Any, /, b: Any, *args: Any, c: Any = 0, **kwargs: Any) -> Any:
    return a


def _generator(x: Any) -> Any:
    yield x


async def _coroutine(x: Any) -> Any:
    return x


class _CallableObject:
    def __call__(self, x: Any) -> Any:
        return x

    def method(self, x: Any) -> Any:
        return x


# Builtins that gained a signature in a later Python: `inspect.signature(bool)` and
# `inspect.signature(zip)` raise on 3.11 and 3.12 and answer on 3.13.
BUILTINS_WITH_A_SIGNATURE_FROM_3_13: tuple[Callable[..., Any], ...] = (bool, zip)


def builtins_without_signature() -> st.SearchStrategy[Callable[..., Any]]:
    """Callables for which `inspect.signature` raises on the running Python: builtins
    and builtin classes."""
    every_python: list[Callable[..., Any]] = [
        max,
        min,
        iter,
        next,
        getattr,
        vars,
        int,
        range,
        functools.partial(max, 1),
    ]
    if sys.version_info < (3, 13):
        every_python.extend(BUILTINS_WITH_A_SIGNATURE_FROM_3_13)
    return st.sampled_from(every_python)


def valid_functions() -> st.SearchStrategy[Callable[..., Any]]:
    """Ordinary callables a user would wrap (every one is a valid ``function``)."""
    return st.one_of(
        st.sampled_from(
            [
                _plain,
                _two,
                _keywords,
                _everything,
                lambda x: x,
                lambda *args, **kwargs: 0,
                _CallableObject(),
                _CallableObject().method,
                functools.partial(_two, y=1),
                len,
                abs,
                operator.add,
                math.sqrt,
                np.sin,
                jnp.sin,
                jax.jit(_plain),
                str.upper,
                object,
            ]
        ),
        builtins_without_signature(),
    )


def callables() -> st.SearchStrategy[object]:
    """Every callable: ordinary, generator and coroutine functions, hostile ones."""
    return st.one_of(
        valid_functions(),
        st.sampled_from([_generator, _coroutine, print, type, Colour, Size]),
        st.one_of(*(st.builds(build) for build in HOSTILE_CALLABLES.values())),
    )


# --- meshes --------------------------------------------------------------------------------


def _mesh(shape: tuple[int, ...], names: tuple[str, ...], kind: AxisType) -> Mesh:
    return jax.make_mesh(shape, names, axis_types=(kind,) * len(names))


def _empty_mesh() -> Mesh:
    return Mesh(np.empty((0,), dtype=object), ("x",))


_VALID_MESH_BUILDERS: tuple[Callable[[], Mesh], ...] = (
    lambda: _mesh((8,), ("x",), AxisType.Auto),
    lambda: _mesh((8,), ("x",), AxisType.Explicit),
    lambda: _mesh((2, 4), ("x", "y"), AxisType.Auto),
    lambda: _mesh((1,), ("x",), AxisType.Explicit),
    lambda: Mesh(np.array(jax.devices()[:2]), ("d",)),
)


def valid_meshes() -> st.SearchStrategy[Mesh | None]:
    """``None`` or a non-empty concrete mesh without Manual axes."""
    return st.one_of(st.none(), st.sampled_from(_VALID_MESH_BUILDERS).map(lambda build: build()))


def meshes_any() -> st.SearchStrategy[object]:
    """Valid meshes and the mesh-like values that must be rejected."""
    invalid: tuple[Callable[[], object], ...] = (
        lambda: _mesh((8,), ("x",), AxisType.Auto).abstract_mesh,  # AbstractMesh
        lambda: jax.sharding.AbstractMesh((2,), ("x",)),
        lambda: _mesh((8,), ("x",), AxisType.Manual),
        _empty_mesh,
        lambda: jax.devices(),
        lambda: np.array(jax.devices()),
        lambda: single_device_sharding(jax.devices()[0]),
    )
    return st.one_of(valid_meshes(), st.sampled_from(invalid).map(lambda build: build()))


# --- everything ----------------------------------------------------------------------------


def wide_values() -> st.SearchStrategy[object]:
    """Any value at all: leaves, nested containers, callables, meshes, hostile objects."""
    leaves = st.one_of(_leaves(), hostile_values())
    nested = st.recursive(leaves, _containers, max_leaves=6)
    return st.one_of(leaves, nested, callables(), meshes_any())


# --- valid values, one strategy per argument -----------------------------------------------


def valid_max_traces() -> st.SearchStrategy[object]:
    """Non-negative Python or NumPy integers (never a bool)."""
    return st.one_of(
        st.integers(0, 10),
        st.integers(min_value=0),
        st.sampled_from([2**63, 10**100]),
        numpy_integers(min_value=0),
        st.just(Size.SMALL),  # an IntEnum is an int
    )


def valid_axis_sizes() -> st.SearchStrategy[object]:
    """``None`` or a positive Python or NumPy integer (never a bool)."""
    return st.one_of(st.none(), st.integers(1, 2**40), numpy_integers(min_value=1))


def identifiers(exclude: Sequence[str] = ()) -> st.SearchStrategy[str]:
    """Short Python identifiers (keywords too: ``f(**{"if": 1})`` is valid), not in ``exclude``."""
    names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
    return names.filter(lambda name: name not in exclude)


def valid_argnames(
    exclude: Sequence[str] = (), *, max_size: int = 6
) -> st.SearchStrategy[list[str]]:
    """Lists of distinct, non-empty identifiers, none of them in ``exclude``."""
    return st.lists(identifiers(exclude), unique=True, max_size=max_size)


def valid_argnames_pair(
    exclude: Sequence[str] = (),
) -> st.SearchStrategy[tuple[list[str], list[str]]]:
    """Two disjoint lists of distinct identifiers: (static_argnames, donate_argnames)."""

    def split(names: list[str]) -> st.SearchStrategy[tuple[list[str], list[str]]]:
        return st.integers(0, len(names)).map(lambda cut: (names[:cut], names[cut:]))

    return valid_argnames(exclude, max_size=8).flatmap(split)


class Policy(enum.StrEnum):
    WARN = "warn"


def valid_on_exceed() -> st.SearchStrategy[object]:
    """``None`` or an overrun policy: a plain ``str``, or a ``str`` subclass (hostile ones
    too) holding one; each is normalized to the plain ``str``."""
    policies = st.sampled_from(["raise", "warn", "log"])
    subclasses = st.sampled_from([StrRaisingRepr, StrRaisingHash, StrRaisingLen])
    return st.one_of(
        st.none(),
        policies,
        st.builds(lambda kind, text: kind(text), subclasses, policies),
        st.just(Policy.WARN),
    )


def valid_axis_specs() -> st.SearchStrategy[object]:
    """``in_axes``/``out_axes`` values `jax.vmap` accepts for a one-argument function."""
    axis = st.one_of(st.none(), st.integers(-2, 2))
    return st.one_of(axis, st.tuples(axis))
