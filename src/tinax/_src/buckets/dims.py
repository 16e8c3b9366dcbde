"""Bucket dimensions: what a declaration of buckets means before any function is known.

A `Dim` (made in `sizes`, where `pad_to_bucket` reads it) names one dimension that
several axes share (a batch's tokens, its mask, its lengths); an axis given a plain
list of sizes is a dimension of its own. `Buckets`
adds ``where``, which says which combinations of the dimensions can occur. `parse`
reads either form (or the plain mapping ``buckets=`` always took) once into a
`Layout`: each declared axis with its dimension, and the combinations allowed.
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, TypeAlias, cast

import attrs
import numpy as np

from tinax._src.buckets.sizes import Dim, check_sizes
from tinax._src.core import validation

AxisSizes: TypeAlias = Sequence[int] | Dim
"""The sizes of one declared axis: its own list, or a `Dim` it shares."""

ShapeBuckets: TypeAlias = Mapping[str, Mapping[int, AxisSizes]]
"""The ``buckets`` option's mapping: argument name or path -> axis -> sizes or `Dim`."""


class ReadOnly(Mapping[Any, Any]):
    """A mapping no one can change, shown as the dict it holds (the option as an object
    shows it: ``{'batch': {1: (16, 32, 64)}}``)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[Any, Any]) -> None:
        self._data = dict(data)

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return repr(self._data)


class Bucket(NamedTuple):
    """One declared axis: the arrays under ``path`` take one of ``sizes`` on ``axis``;
    ``dimension`` is the index of its dimension in `Layout.dimensions`."""

    path: str
    argument: str
    axis: int
    sizes: tuple[int, ...]
    dimension: int


class Dimension(NamedTuple):
    """One dimension of the combinations: a `Dim`'s name (``None`` for an axis's own
    list), its sizes, and the indices of its axes in `Layout.entries`."""

    name: str | None
    sizes: tuple[int, ...]
    entries: tuple[int, ...]


class Layout(NamedTuple):
    """A declaration of buckets, read (the paths not yet checked against a function).

    Attributes:
        entries: One `Bucket` per declared axis, in the order given.
        dimensions: The dimensions, in the order of their first axis.
        allowed: The combinations ``where`` allows (sizes per dimension), or
            ``None``: every combination.
        combinations: How many combinations there are (those ``where`` allows).
        shown: The mapping as an object shows it: read-only, sizes as tuples.
    """

    entries: tuple[Bucket, ...]
    dimensions: tuple[Dimension, ...]
    allowed: frozenset[tuple[int, ...]] | None
    combinations: int
    shown: Mapping[str, Mapping[int, tuple[int, ...] | Dim]]


_EXPECTED = "None or a mapping of argument name or path to a mapping of axis to sizes"


def root(path: str) -> str:
    """The argument a path starts from: ``batch`` of ``batch['tokens']``."""
    cut = min((index for index in (path.find("["), path.find(".")) if index >= 0), default=None)
    return path if cut is None else path[:cut]


def check_key(api: str, given: object) -> str:
    """A key of the declaration: a non-empty str whose argument part is an identifier."""
    if not issubclass(type(given), str):
        raise TypeError(
            validation.message(api, "buckets key", "a str (an argument's name or path)", given)
        )
    key = str.__str__(cast("str", given))  # a plain str, whatever a subclass overrides
    if not root(key).isidentifier():
        raise ValueError(
            validation.message(
                api, "buckets key", "an argument's name, or a path into it (\"batch['x']\")", key
            )
        )
    return key


def items(api: str, parameter: str, expected: str, value: object) -> list[tuple[Any, Any]]:
    """The items of ``value``, a mapping, read once; anything else (or a mapping whose
    items cannot be read) is a `TypeError` naming ``parameter``."""
    found: list[tuple[Any, Any]] | None = None
    if issubclass(type(value), Mapping):
        try:
            found = list(cast("Mapping[Any, Any]", value).items())
        except Exception:
            found = None
    if found is None:
        raise TypeError(validation.message(api, parameter, expected, value))
    return found


def parse(
    api: str,
    parameter: str,
    value: object,
    where: Callable[..., Any] | None = None,
    key_check: Callable[[str, object], str] = check_key,
) -> Layout:
    """``value``, a mapping of key to axis to sizes or `Dim`, read into a `Layout`:
    ``key_check(api, key)`` on each key (then its axes), every axis a non-negative
    int, every list of sizes positive and increasing, one `Dim` per name; with
    ``where``, every dimension a `Dim`, and the combinations it allows."""
    entries: list[Bucket] = []
    dimensions: list[Dimension] = []
    by_name: dict[str, tuple[int, Dim]] = {}
    shown: dict[str, Mapping[int, tuple[int, ...] | Dim]] = {}
    for key, axes in items(api, parameter, _EXPECTED, value):
        path = key_check(api, key)
        at = f"{parameter}[{path!r}]"
        expected = "a non-empty mapping of axis (an int) to sizes or a Dim"
        per_axis: dict[int, tuple[int, ...] | Dim] = {}
        for axis, sizes in items(api, at, expected, axes):
            if type(axis) is bool or not issubclass(type(axis), int):
                raise TypeError(validation.message(api, f"{at} key", "an int (an axis)", axis))
            index = int.__index__(cast("int", axis))
            if index < 0:
                raise ValueError(validation.message(api, f"{at} key", "a non-negative axis", axis))
            if type(sizes) is Dim:
                dim: Dim = sizes
                known = by_name.get(dim.name)
                if known is None:
                    by_name[dim.name] = (len(dimensions), dim)
                    dimensions.append(Dimension(dim.name, dim.sizes, ()))
                elif known[1] != dim:
                    raise ValueError(
                        f"{api}: {at}[{index}] must be the Dim named {dim.name!r} given before, "
                        f"{known[1]!r}; got {dim!r}: one name is one dimension."
                    )
                number, per_axis[index] = by_name[dim.name][0], dim
            else:
                number = len(dimensions)
                per_axis[index] = check_sizes(api, f"{at}[{index}]", sizes)
                dimensions.append(Dimension(None, per_axis[index], ()))  # pyright: ignore[reportArgumentType]
            dimension = dimensions[number]
            dimensions[number] = dimension._replace(entries=(*dimension.entries, len(entries)))
            entries.append(Bucket(path, root(path), index, dimension.sizes, number))
        if not per_axis:
            raise ValueError(validation.message(api, at, expected, axes))
        shown[path] = ReadOnly(per_axis)
    layout = Layout(
        tuple(entries),
        tuple(dimensions),
        None,
        math.prod(len(dimension.sizes) for dimension in dimensions),
        ReadOnly(shown),
    )
    if where is None or not entries:
        return layout
    allowed = _allowed(api, layout, where)
    return layout._replace(allowed=allowed, combinations=len(allowed))


def _allowed(api: str, layout: Layout, where: Callable[..., Any]) -> frozenset[tuple[int, ...]]:
    """The combinations ``where`` allows, each asked once (every dimension a `Dim`)."""
    dimensions = layout.dimensions
    for dimension in dimensions:
        if dimension.name is None:
            entry = layout.entries[dimension.entries[0]]
            raise ValueError(
                f"{api}: where= is called with one keyword per Dim name, so every axis "
                f"must be given a Dim; {entry.path!r} axis {entry.axis} has its own sizes "
                f"{entry.sizes}: give it a Dim."
            )
    names = [cast("str", dimension.name) for dimension in dimensions]
    try:
        signature: inspect.Signature | None = inspect.signature(where)
    except Exception:  # a builtin, a C callable: asked as it is
        signature = None
    if signature is not None:
        try:
            signature.bind(**dict.fromkeys(names))
        except TypeError:
            expected = f"a callable taking the keywords {', '.join(names)} (the Dim names)"
            raise ValueError(validation.message(api, "where", expected, where)) from None
    allowed: set[tuple[int, ...]] = set()
    for taken in itertools.product(*(dimension.sizes for dimension in dimensions)):
        keywords = dict(zip(names, taken, strict=True))
        shown = ", ".join(f"{name}={size}" for name, size in keywords.items())
        try:
            answer = where(**keywords)
        except Exception as error:
            raise ValueError(
                f"{api}: where raised {type(error).__name__} for the combination ({shown}): "
                f"{error}; it must return True or False for every combination of the Dims."
            ) from error
        if type(answer) is not bool and type(answer) is not np.bool_:
            raise TypeError(
                validation.message(
                    api, f"where({shown})", "True or False (a bool or a NumPy bool)", answer
                )
            )
        if answer:
            allowed.add(taken)
    if not allowed:
        raise ValueError(
            f"{api}: where must allow at least one combination of the Dims; it returned False "
            f"for all {math.prod(len(d.sizes) for d in dimensions)}."
        )
    return frozenset(allowed)


@attrs.frozen(eq=False)
class Buckets:
    """Shape buckets with a rule of which combinations of sizes can occur.

    A server's batch is bounded twice: by its rows and its length, and by a
    token budget (rows x length at most N). Declared as two dimensions, every
    combination of their sizes would be compiled and budgeted, most of them
    never served. ``where`` says which can occur: ``precompile_buckets`` compiles
    only those, ``max_traces`` must cover only those, and a call in a combination
    ``where`` rules out is refused before it traces, as a call outside the
    buckets is (``on_exceed``). Pass it as ``buckets=`` of `bounded_jit` or
    `batched_jit`.

    Args:
        axes: An argument's name, or a path into it as tinax prints paths
            (``"batch['tokens']"``), to a mapping of axis to its sizes (its own
            dimension) or to a `Dim` (shared), as ``buckets=`` takes them.
        where: `None` (the default): every combination can occur. Else a
            callable taking one keyword per `Dim` name (every dimension must
            then be a `Dim`) and returning `True` where that combination can
            occur. It is called once per combination, here, and never on a call.

    Raises:
        TypeError: If ``axes`` is not a mapping of str to a mapping of int to
            sizes or a `Dim`, ``where`` is neither `None` nor callable, or
            ``where`` returns anything but a bool.
        ValueError: If a key is not an argument's name or a path, an axis is
            negative, sizes are empty or not positive and increasing, two
            different Dims share a name, ``where`` is given while an axis has
            its own sizes, ``where`` cannot take the Dims' names as keywords,
            raises for a combination (the error names it), or allows none.

    Examples:
        >>> from tinax.jit import Buckets, Dim
        >>> rows, length = Dim("rows", (1, 2, 4, 8)), Dim("length", (16, 32, 64))
        >>> buckets = Buckets(
        ...     {"tokens": {0: rows, 1: length}, "lengths": {0: rows}},
        ...     where=lambda rows, length: rows * length <= 128,
        ... )
        >>> buckets.combinations  # of 12
        9
    """

    axes: ShapeBuckets
    where: Callable[..., bool] | None = attrs.field(default=None, kw_only=True)
    _layout: Layout = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        where: object = self.where
        if where is not None and not callable(where):
            raise TypeError(validation.message("Buckets", "where", "None or a callable", where))
        layout = parse(
            "Buckets", "axes", cast("object", self.axes), cast("Callable[..., Any] | None", where)
        )
        object.__setattr__(self, "axes", layout.shown)
        object.__setattr__(self, "_layout", layout)

    @property
    def combinations(self) -> int:
        """How many combinations of sizes can occur: those ``where`` allows."""
        return self._layout.combinations

    def layout(self) -> Layout:
        """The declaration, read (for the wrap-time check of ``buckets=``)."""
        return self._layout
