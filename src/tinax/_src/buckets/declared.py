"""The ``buckets`` option: checked once at wrap time (`check`), and a traced call
compared with it (`misses`), so that a call outside the buckets is named before it
traces. A call inside them never comes here: it is JAX's own cached call.

One key is one bucket dimension: an argument's name, or a path into it as tinax
prints paths (``"batch['tokens']"``), names every array under it, and on each
declared axis those arrays share one size, which must be a bucket. So the traces
inside the buckets are at most the product of the lists' lengths (`Buckets.combinations`),
which ``max_traces`` must cover.
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple, TypeAlias, cast

import jax

from tinax._src.buckets.sizes import check_sizes
from tinax._src.core import validation
from tinax._src.diagnosis.record import Leaf, TracedSignature

ShapeBuckets: TypeAlias = Mapping[str, Mapping[int, Sequence[int]]]
"""The ``buckets`` option's type: argument name or path -> axis -> sizes."""


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
    """One declared axis: the arrays under ``path`` take one of ``sizes`` on ``axis``."""

    path: str
    argument: str
    axis: int
    sizes: tuple[int, ...]


class Buckets(NamedTuple):
    """The ``buckets`` option, checked.

    Attributes:
        entries: One `Bucket` per declared axis, in the order given.
        combinations: How many combinations of sizes there are (the product of the
            lists' lengths): the most traces the buckets can take.
        shown: The option as the object shows it: read-only, sizes as tuples.
    """

    entries: tuple[Bucket, ...]
    combinations: int
    shown: Mapping[str, Mapping[int, tuple[int, ...]]]


_EXPECTED = "None or a mapping of argument name or path to a mapping of axis to sizes"


def _root(path: str) -> str:
    """The argument a path starts from: ``batch`` of ``batch['tokens']``."""
    cut = min((index for index in (path.find("["), path.find(".")) if index >= 0), default=None)
    return path if cut is None else path[:cut]


def check(
    api: str,
    value: object,
    signature: inspect.Signature | None,
    max_traces: int,
) -> Buckets | None:
    """``value`` (the ``buckets`` option) checked against the function's ``signature``
    and the budget: every key a path from a parameter, every axis a non-negative int,
    every list of sizes positive and increasing, no array named twice, and
    ``max_traces`` at least the number of combinations."""
    if value is None:
        return None
    entries: list[Bucket] = []
    shown: dict[str, Mapping[int, tuple[int, ...]]] = {}
    for key, axes in _items(api, "buckets", _EXPECTED, value):
        path = _check_path(api, key, signature)
        where = f"buckets[{path!r}]"
        expected = "a non-empty mapping of axis (an int) to sizes"
        per_axis: dict[int, tuple[int, ...]] = {}
        for axis, sizes in _items(api, where, expected, axes):
            if type(axis) is bool or not issubclass(type(axis), int):
                raise TypeError(validation.message(api, f"{where} key", "an int (an axis)", axis))
            index = int.__index__(cast("int", axis))
            if index < 0:
                raise ValueError(
                    validation.message(api, f"{where} key", "a non-negative axis", axis)
                )
            per_axis[index] = check_sizes(api, f"{where}[{index}]", sizes)
            entries.append(Bucket(path, _root(path), index, per_axis[index]))
        if not per_axis:
            raise ValueError(validation.message(api, where, expected, axes))
        shown[path] = ReadOnly(per_axis)
    _check_disjoint(api, list(shown))
    if not entries:
        return None
    combinations = math.prod(len(entry.sizes) for entry in entries)
    if max_traces < combinations:
        if len(entries) == 1:  # one axis: its buckets, named
            counted = f"the number of buckets of {entries[0].path} axis {entries[0].axis}"
            product = f"{combinations}"
        else:
            counted = "the number of combinations of buckets"
            product = f"{combinations} ({' x '.join(str(len(e.sizes)) for e in entries)})"
        raise ValueError(
            f"{api}: max_traces must be at least {counted}, {product}, since each may trace; "
            f"got {max_traces}."
        )
    return Buckets(tuple(entries), combinations, ReadOnly(shown))


def _items(api: str, parameter: str, expected: str, value: object) -> list[tuple[Any, Any]]:
    """The items of ``value``, a mapping, read once; anything else (or a mapping whose
    items cannot be read) is a `TypeError` naming ``parameter``."""
    items: list[tuple[Any, Any]] | None = None
    if issubclass(type(value), Mapping):
        try:
            items = list(cast("Mapping[Any, Any]", value).items())
        except Exception:
            items = None
    if items is None:
        raise TypeError(validation.message(api, parameter, expected, value))
    return items


def _check_path(api: str, given: object, signature: inspect.Signature | None) -> str:
    """A key of the option: a non-empty str whose argument is a parameter of the function
    (any name, where it takes ``**kwargs`` or has no signature)."""
    if not issubclass(type(given), str):
        raise TypeError(
            validation.message(api, "buckets key", "a str (an argument's name or path)", given)
        )
    key = str.__str__(cast("str", given))  # a plain str, whatever a subclass overrides
    root = _root(key)
    if not root.isidentifier():
        raise ValueError(
            validation.message(
                api, "buckets key", "an argument's name, or a path into it (\"batch['x']\")", key
            )
        )
    if signature is None:
        return key
    parameters = signature.parameters
    if root in parameters and parameters[root].kind is not inspect.Parameter.VAR_KEYWORD:
        return key
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return key
    names = ", ".join(parameters) or "none"
    raise ValueError(
        validation.message(
            api, "buckets key", f"a path from a parameter of the function ({names})", key
        )
    )


def _inside(path: str, key: str) -> bool:
    """Whether ``path`` is ``key`` or a path under it."""
    return path == key or (path.startswith(key) and path[len(key)] in "[.")


def _check_disjoint(api: str, keys: Sequence[str]) -> None:
    for first, second in itertools.combinations(keys, 2):
        if _inside(first, second) or _inside(second, first):
            raise ValueError(
                f"{api}: buckets must name each array once; got {first!r} and {second!r}, "
                "one inside the other."
            )


def check_not_static(api: str, buckets: Buckets | None, static_argnames: Sequence[str]) -> None:
    """A bucket on a static argument (which has no shape) is refused at wrap time."""
    for entry in () if buckets is None else buckets.entries:
        if entry.argument in static_argnames:
            raise ValueError(
                validation.message(
                    api, "buckets key", "a path into an argument that is not static", entry.path
                )
            )


# --- at trace time -------------------------------------------------------------------------


class Miss(NamedTuple):
    """A declared axis whose size in a call is no bucket."""

    path: str
    axis: int
    size: int
    sizes: tuple[int, ...]
    others: str = ""  # arrays under one key that disagree: their sizes, as text
    arrays: tuple[str, ...] = ()  # the paths of the call's arrays under ``path``

    @property
    def paddable(self) -> bool:
        """Whether a bucket holds the size: padding the input fixes the call."""
        return not self.others and self.size <= self.sizes[-1]

    def text(self) -> str:
        """``batch['tokens'], axis 1: 37 is no bucket of (16, 32, 64): pad it to 64``."""
        head = f"{self.path}, axis {self.axis}: "
        if self.others:
            return (
                f"{head}its arrays differ ({self.others}); the arrays under one key share a bucket"
            )
        if self.size > self.sizes[-1]:
            return (
                f"{head}{self.size} is larger than the largest bucket, {self.sizes[-1]}: "
                "split the input, or add a larger bucket"
            )
        target = next(size for size in self.sizes if size > self.size)
        return f"{head}{self.size} is no bucket of {_sizes_text(self.sizes)}: pad it to {target}"

    def fixes(self) -> list[str]:
        """The fix, one line per array, as code to run before the call where padding is
        one: ``pad before the call: tokens, length = tinax.jit.pad_to_bucket(tokens,
        (16, 32, 64), axis=1) (length: its true size, to mask the padding)``."""
        largest = self.sizes[-1]
        if self.size > largest:  # with ``others``: the largest of the arrays' sizes
            return [
                f"{self.path}, axis {self.axis}: split the input into pieces of at most "
                f"{largest} (the largest bucket), or add a larger bucket to buckets= and "
                "raise max_traces with it"
            ]
        arrays = self.arrays or (self.path,)
        if self.others:  # every array padded to the bucket that holds the largest of them
            target = next(size for size in self.sizes if size >= self.size)
            sizes: tuple[int, ...] = (target,)
            head = f"pad to {target}, one bucket for the arrays under {self.path}"
        else:
            sizes, head = self.sizes, "pad"
        lines = [
            f"{head} before the call: {path}, length = tinax.jit.pad_to_bucket({path}, "
            f"{sizes!r}, axis={self.axis}) (length: its true size, to mask the padding)"
            for path in arrays[:_LISTED]
        ]
        if len(arrays) > _LISTED:
            lines.append(f"and the {len(arrays) - _LISTED} more arrays under {self.path} alike")
        return lines


_LISTED = 3  # arrays of one key whose padding a fix writes out


def _padding(found: Sequence[Miss]) -> tuple[str, ...]:
    """Each miss's fix lines (`Miss.fixes`), each line once."""
    return tuple(dict.fromkeys(line for miss in found for line in miss.fixes()))


def fix_lines(found: Sequence[Miss]) -> list[str]:
    """The "How to fix:" lines of a call outside the buckets: each miss's fix, then, where
    one is padding, that the size can be declared instead, and where arrays under one key
    differ, that each can have a key of its own."""
    lines = list(_padding(found))
    if any(miss.paddable for miss in found):
        lines.append("or add the size to buckets= and raise max_traces with it")
    if any(miss.others for miss in found):
        lines.append(
            "or, where those arrays' sizes differ by design, give each its own key in buckets= "
            "and raise max_traces to the combinations"
        )
    return lines


def _sizes_text(sizes: tuple[int, ...]) -> str:
    if len(sizes) <= 12:
        return f"({', '.join(map(str, sizes))})"
    return f"({', '.join(map(str, sizes[:6]))}, ..., {', '.join(map(str, sizes[-3:]))})"


def _arrays(call: TracedSignature) -> list[Leaf]:
    return [leaf for leaf in call.leaves if leaf.kind == "array" and leaf.shape is not None]


def _under(leaves: Sequence[Leaf], key: str) -> list[Leaf]:
    return [leaf for leaf in leaves if _inside(leaf.path, key)]


def sizes_of(api: str, buckets: Buckets, call: TracedSignature) -> Iterator[tuple[Bucket, Leaf]]:
    """Each declared axis with each array of ``call`` under its path. Raises
    `ValueError` for a declaration the call shows wrong: a path under which the
    call has no array while its argument has some, an axis beyond an array's rank."""
    arrays = _arrays(call)
    for entry in buckets.entries:
        found = _under(arrays, entry.path)
        if not found:
            of_argument = _under(call.leaves, entry.argument)
            if of_argument:  # the argument is passed, but nothing lies at the path
                paths = ", ".join(leaf.path for leaf in of_argument[:6])
                more = ", ..." if len(of_argument) > 6 else ""
                raise ValueError(
                    f"{api}: buckets names {entry.path!r}, under which this call has no "
                    f"array; the leaves of {entry.argument} are: {paths}{more}."
                )
            continue
        for leaf in found:
            shape = cast("tuple[int, ...]", leaf.shape)
            if entry.axis >= len(shape):
                raise ValueError(
                    f"{api}: buckets names axis {entry.axis} of {entry.path!r}, but "
                    f"{leaf.path} is {leaf.text}, of rank {len(shape)}: "
                    + (
                        "its only axis is 0."
                        if len(shape) == 1
                        else f"its axes are 0 to {len(shape) - 1}."
                    )
                    if shape
                    else f"{api}: buckets names axis {entry.axis} of {entry.path!r}, but "
                    f"{leaf.path} is {leaf.text}, a scalar: it has no axis."
                )
            yield entry, leaf


def _grouped(
    api: str, buckets: Buckets, call: TracedSignature
) -> Iterator[tuple[Bucket, list[Leaf], set[int]]]:
    """Each declared axis, in declaration order, with the arrays of ``call`` under its
    path and the sizes they take on it (`sizes_of`'s errors raised)."""
    seen: dict[tuple[str, int], list[Leaf]] = {}
    for entry, leaf in sizes_of(api, buckets, call):
        seen.setdefault((entry.path, entry.axis), []).append(leaf)
    for entry in buckets.entries:
        leaves = seen.get((entry.path, entry.axis), [])
        yield entry, leaves, {cast("tuple[int, ...]", leaf.shape)[entry.axis] for leaf in leaves}


def misses(api: str, buckets: Buckets, call: TracedSignature) -> tuple[Miss, ...]:
    """The declared axes of ``call`` whose size is no bucket (empty: every size is one)."""
    found: list[Miss] = []
    for entry, leaves, sizes in _grouped(api, buckets, call):
        if len(sizes) > 1:
            others = ", ".join(
                f"{leaf.path} {cast('tuple[int, ...]', leaf.shape)[entry.axis]}"
                for leaf in leaves[:4]
            )
            arrays = tuple(leaf.path for leaf in leaves)
            found.append(Miss(entry.path, entry.axis, max(sizes), entry.sizes, others, arrays))
        elif sizes and (size := next(iter(sizes))) not in entry.sizes:
            arrays = tuple(leaf.path for leaf in leaves)
            found.append(Miss(entry.path, entry.axis, size, entry.sizes, arrays=arrays))
    return tuple(found)


def combination(buckets: Buckets, call: TracedSignature) -> tuple[int, ...] | None:
    """The sizes ``call`` takes on the declared axes, in declaration order, where every
    one is a bucket; else ``None`` (a call outside the buckets, or one not recorded)."""
    taken: list[int] = []
    try:
        for entry, _, sizes in _grouped("", buckets, call):
            if len(sizes) != 1 or (size := next(iter(sizes))) not in entry.sizes:
                return None
            taken.append(size)
    except ValueError:
        return None
    return tuple(taken)


def declared_trace(
    buckets: Buckets, entry: TracedSignature, earlier: Sequence[TracedSignature]
) -> bool:
    """Whether ``entry`` is the first trace of a combination of buckets: one the buckets
    declare. A second trace of one combination (a new dtype) is a retrace as any other."""
    taken = combination(buckets, entry)
    return taken is not None and all(combination(buckets, old) != taken for old in earlier)


def shape_fix(
    api: str, buckets: Buckets, closest: TracedSignature | None, call: TracedSignature
) -> tuple[str, ...]:
    """The fix for ``call``'s shape differences from ``closest`` that is true of an object
    with ``buckets``, one line each: its misses' padding (`Miss.fixes`), or, where only
    declared axes changed and to buckets, compiling every combination ahead; none where
    the usual fix (pad or bucket the inputs) is the true one."""
    try:
        found = misses(api, buckets, call)
    except ValueError:  # a declaration the call shows wrong: its own error says so
        return ()
    if found:
        return _padding(found)
    taken = combination(buckets, call)
    if closest is None or taken is None:
        return ()
    before = {leaf.path: leaf.shape for leaf in _arrays(closest)}
    changed = False
    for leaf in _arrays(call):
        shape, old = cast("tuple[int, ...]", leaf.shape), before.get(leaf.path)
        if old is None or old == shape:
            continue
        if len(old) != len(shape):  # a new rank: no bucket makes it
            return ()
        covered = {entry.axis for entry in buckets.entries if _inside(leaf.path, entry.path)}
        if any(
            a != b and axis not in covered
            for axis, (a, b) in enumerate(zip(old, shape, strict=True))
        ):
            return ()  # an axis with no buckets changed: the usual fix
        changed = True
    if not changed:
        return ()
    return (
        f"this call's sizes ({combination_text(buckets, taken)}) are buckets, each "
        "combination traced once: compile them all ahead with the object's "
        "precompile_buckets(*example_args), and no call inside them traces",
    )


def combination_text(buckets: Buckets, taken: Sequence[int]) -> str:
    """``batch axis 1: 64, image axis 0: 8``: a combination of sizes, for a person."""
    return ", ".join(
        f"{entry.path} axis {entry.axis}: {size}"
        for entry, size in zip(buckets.entries, taken, strict=True)
    )


def combinations(buckets: Buckets) -> Iterator[tuple[int, ...]]:
    """Every combination of sizes, in declaration order, smallest first."""
    return itertools.product(*(entry.sizes for entry in buckets.entries))


def compiled_summary(buckets: Buckets, history: Sequence[TracedSignature]) -> tuple[int, float]:
    """How many combinations of buckets ``history`` compiled (or loaded), and the total
    compile time of their traces (`budgets`'s column)."""
    done: set[tuple[int, ...]] = set()
    seconds = 0.0
    for entry in history:
        taken = combination(buckets, entry)
        if taken is None or taken in done:
            continue
        done.add(taken)
        seconds += entry.compile_seconds or 0.0
    return len(done), seconds


def example_arguments(
    buckets: Buckets,
    signature: inspect.Signature | None,
    taken: tuple[int, ...],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` (an example call: arrays or `jax.ShapeDtypeStruct`s) with
    every array under a declared path given the sizes ``taken`` on its declared axes, as
    a `jax.ShapeDtypeStruct` (its dtype, weak type and named sharding kept)."""
    axes: dict[str, dict[int, int]] = {}
    for entry, size in zip(buckets.entries, taken, strict=True):
        axes.setdefault(entry.path, {})[entry.axis] = size

    tree_util: Any = jax.tree_util

    def resize(root: str, value: Any) -> Any:
        def leaf(path: Any, item: Any) -> Any:
            text = root + tree_util.keystr(path)
            declared = [key for key in axes if _inside(text, key)]
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
