"""The ``buckets`` option checked once at wrap time (`check`) into a `Declared`
record; its combinations, and an example call resized to each (``precompile_buckets``).
A traced call is compared with it in `outside`.

A key, an argument's name or a path into it as tinax prints paths
(``"batch['tokens']"``), names every array under it, and on each declared axis those
arrays share one size, which must be a bucket. An axis given its own sizes is a
dimension of its own; axes given one `Dim` are one dimension, whose size they share
(`dims`). So the traces inside the buckets are at most the product of the dimensions'
lengths, or the combinations ``where`` allows (`Declared.combinations`), which
``max_traces`` must cover.
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import jax

from tinax._src.buckets import dims
from tinax._src.buckets.dims import Bucket, Dimension
from tinax._src.buckets.sizes import Dim
from tinax._src.core import validation


class Declared(NamedTuple):
    """The ``buckets`` option, checked.

    Attributes:
        entries: One `dims.Bucket` per declared axis, in the order given.
        dimensions: The dimensions (an axis's own list, or a `Dim` shared by axes), in
            the order of their first axis: a combination is one size per dimension.
        allowed: The combinations ``where`` allows, or ``None``: every one.
        combinations: How many combinations there are (those ``where`` allows): the
            most traces the buckets can take.
        shown: The option as the object shows it: read-only, sizes as tuples (or the
            `Buckets` given).
    """

    entries: tuple[Bucket, ...]
    dimensions: tuple[Dimension, ...]
    allowed: frozenset[tuple[int, ...]] | None
    combinations: int
    shown: Mapping[str, Mapping[int, tuple[int, ...] | Dim]] | dims.Buckets


def check(
    api: str,
    value: object,
    signature: inspect.Signature | None,
    max_traces: int,
) -> Declared | None:
    """``value`` (the ``buckets`` option: a mapping, or a `Buckets`) checked against the
    function's ``signature`` and the budget: every key a path from a parameter, every
    axis a non-negative int, every list of sizes positive and increasing, one `Dim` per
    name, no array named twice, and ``max_traces`` at least the number of combinations
    (those ``where`` allows)."""
    if value is None:
        return None
    shown: Mapping[str, Mapping[int, tuple[int, ...] | Dim]] | dims.Buckets
    if type(value) is dims.Buckets:
        layout = value.layout()
        for key in layout.shown:
            _check_path(api, key, signature)
        shown = value
    else:
        layout = dims.parse(
            api, "buckets", value, key_check=lambda api, key: _check_path(api, key, signature)
        )
        shown = layout.shown
    _check_disjoint(api, list(layout.shown))
    if not layout.entries:
        return None
    _check_budget(api, layout, max_traces)
    return Declared(layout.entries, layout.dimensions, layout.allowed, layout.combinations, shown)


def _check_budget(api: str, layout: dims.Layout, max_traces: int) -> None:
    """``max_traces`` at least the combinations the declaration allows."""
    count, dimensions = layout.combinations, layout.dimensions
    if max_traces >= count:
        return
    product = " x ".join(str(len(dimension.sizes)) for dimension in dimensions)
    if layout.allowed is not None:
        counted = "the number of combinations of buckets that where allows"
        product = f"{count} (of {math.prod(len(d.sizes) for d in dimensions)}: {product})"
    elif len(dimensions) == 1 and len(layout.entries) == 1:  # one axis: its buckets, named
        entry = layout.entries[0]
        counted, product = f"the number of buckets of {entry.path} axis {entry.axis}", f"{count}"
    elif len(dimensions) == 1:  # one Dim, on several axes: counted once
        counted, product = f"the number of buckets of Dim {dimensions[0].name!r}", f"{count}"
    else:
        counted, product = "the number of combinations of buckets", f"{count} ({product})"
    raise ValueError(
        f"{api}: max_traces must be at least {counted}, {product}, since each may trace; "
        f"got {max_traces}."
    )


def _check_path(api: str, given: object, signature: inspect.Signature | None) -> str:
    """A key of the option: a non-empty str whose argument is a parameter of the function
    (any name, where it takes ``**kwargs`` or has no signature)."""
    key = dims.check_key(api, given)
    if signature is None:
        return key
    argument = dims.root(key)
    parameters = signature.parameters
    if argument in parameters and parameters[argument].kind is not inspect.Parameter.VAR_KEYWORD:
        return key
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return key
    names = ", ".join(parameters) or "none"
    raise ValueError(
        validation.message(
            api, "buckets key", f"a path from a parameter of the function ({names})", key
        )
    )


def inside(path: str, key: str) -> bool:
    """Whether ``path`` is ``key`` or a path under it."""
    return path == key or (path.startswith(key) and path[len(key)] in "[.")


def _check_disjoint(api: str, keys: Sequence[str]) -> None:
    for first, second in itertools.combinations(keys, 2):
        if inside(first, second) or inside(second, first):
            raise ValueError(
                f"{api}: buckets must name each array once; got {first!r} and {second!r}, "
                "one inside the other."
            )


def check_not_static(api: str, buckets: Declared | None, static_argnames: Sequence[str]) -> None:
    """A bucket on a static argument (which has no shape) is refused at wrap time."""
    for entry in () if buckets is None else buckets.entries:
        if entry.argument in static_argnames:
            raise ValueError(
                validation.message(
                    api, "buckets key", "a path into an argument that is not static", entry.path
                )
            )


def combinations(buckets: Declared) -> Iterator[tuple[int, ...]]:
    """Every combination of sizes (one per dimension, in their order), smallest first:
    those ``where`` allows."""
    every = itertools.product(*(dimension.sizes for dimension in buckets.dimensions))
    allowed = buckets.allowed
    return every if allowed is None else (taken for taken in every if taken in allowed)


def example_arguments(
    buckets: Declared,
    signature: inspect.Signature | None,
    taken: tuple[int, ...],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` (an example call: arrays or `jax.ShapeDtypeStruct`s) with
    every array under a declared path given the sizes ``taken`` (one per dimension) on its
    declared axes, as a `jax.ShapeDtypeStruct` (its dtype, weak type and named sharding
    kept)."""
    axes: dict[str, dict[int, int]] = {}
    for entry in buckets.entries:
        axes.setdefault(entry.path, {})[entry.axis] = taken[entry.dimension]

    tree_util: Any = jax.tree_util

    def resize(root: str, value: Any) -> Any:
        def leaf(path: Any, item: Any) -> Any:
            text = root + tree_util.keystr(path)
            declared = [key for key in axes if inside(text, key)]
            shape, dtype = getattr(item, "shape", None), getattr(item, "dtype", None)
            if not declared or shape is None or dtype is None:
                return item
            new = list(shape)
            for axis, size in axes[declared[0]].items():
                if axis < len(new):  # beyond the rank: the call names it, as any call would
                    new[axis] = size
            sharding = getattr(item, "sharding", None)
            named = sharding if isinstance(sharding, jax.sharding.NamedSharding) else None
            weak = bool(getattr(item, "weak_type", False))
            return jax.ShapeDtypeStruct(tuple(new), dtype, sharding=named, weak_type=weak)

        return tree_util.tree_map_with_path(leaf, value)

    if signature is None:
        return (
            tuple(resize(f"args[{index}]", value) for index, value in enumerate(args)),
            {name: resize(name, value) for name, value in kwargs.items()},
        )
    bound = signature.bind(*args, **kwargs)
    for name, value in list(bound.arguments.items()):
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            bound.arguments[name] = {key: resize(key, item) for key, item in value.items()}
        elif kind is inspect.Parameter.VAR_POSITIONAL:
            bound.arguments[name] = tuple(
                resize(f"{name}[{index}]", item) for index, item in enumerate(value)
            )
        else:
            bound.arguments[name] = resize(name, value)
    return tuple(bound.args), dict(bound.kwargs)
