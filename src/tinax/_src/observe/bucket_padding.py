"""The batches padded per combination of buckets, per object: `Budgets.padding` and
the lines `budgets()` prints under its table.

A cached call is never counted (it runs no tinax code); `pad_ragged` and
`pad_to_bucket` count each batch they pad on the `Dim` padded to (`buckets.tally`). An
object is shown the counts of the `Dim`s its buckets were given, each combination
whose names are all among its own: a length-only pad counts for an object whose
buckets have rows and length. Two objects given the same `Dim` are shown the same
counts: a pad knows its `Dim`s, never the object the batch is for.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from tinax._src.buckets import tally
from tinax._src.buckets.dims import Buckets
from tinax._src.buckets.sizes import Dim, tally_of
from tinax._src.diagnosis import elide, names

if TYPE_CHECKING:
    from tinax._src.buckets.declared import Declared
    from tinax._src.objects.handle import Budgeted


@attrs.frozen
class BucketPadding:
    """The batches padded to one combination of an object's buckets.

    Attributes:
        object: The `BoundedJit` or `BatchedJit` whose buckets declare the names.
        combination: Each `Dim`'s name and the size padded to, in axis order
            (read-only): ``{"rows": 4, "length": 32}``.
        batches: How many batches `pad_ragged` and `pad_to_bucket` padded to it.
        real: Their real entries (the rows' lengths added up; per element of the
            axes before the padded one, for `pad_to_bucket`).
        padded: Their entries once padded: real and padding.
        share: The share of padding, ``1 - real / padded`` (0.0 where nothing was
            padded).
    """

    object: Any
    combination: Mapping[str, int]
    batches: int
    real: int
    padded: int
    share: float


def records(
    objects: Sequence[Budgeted], declared: Callable[[Budgeted], Declared | None]
) -> tuple[BucketPadding, ...]:
    """The combinations counted for each of ``objects`` whose buckets (``declared``)
    name `Dim`s, in the order of ``objects``; per object, most batches first."""
    found: list[BucketPadding] = []
    for owner in objects:
        buckets = declared(owner)
        if buckets is None:
            continue
        shown = buckets.shown
        given = shown.axes if isinstance(shown, Buckets) else shown
        dims = [dim for axes in given.values() for dim in axes.values() if type(dim) is Dim]
        if not dims:
            continue
        counted = tally.counted(tally_of(dim) for dim in dims)
        own = {dim.name for dim in dims}
        shown = [
            (combination, counts)
            for combination, counts in counted.items()
            if combination and all(name in own for name, _ in combination)
        ]
        shown.sort(key=lambda item: (-item[1].batches, item[0]))
        for combination, (batches, real, padded) in shown:
            share = 1.0 - real / padded if padded else 0.0
            at = types.MappingProxyType(dict(combination))
            found.append(BucketPadding(owner, at, batches, real, padded, share))
    return tuple(found)


HEADER = (
    "batches padded per combination of Dims (counted where pad_ragged and pad_to_bucket "
    "padded them; a cached call is not seen):"
)


def lines(found: Sequence[BucketPadding]) -> list[str]:
    """The lines under `budgets()`'s table: the header, then per object its name and
    definition, and one line per combination; none where nothing was counted."""
    if not found:
        return []
    shown: list[str] = [HEADER]
    per_object: dict[int, list[BucketPadding]] = {}
    for record in found:
        per_object.setdefault(id(record.object), []).append(record)
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for group in per_object.values():
        function = group[0].object.function
        label = names.function_name(function)
        location = names.function_location(function)
        title = elide.tail(f"{label} ({location})" if location else label, _TITLE)
        body = tuple(_line(record) for record in group)
        if (title, body) in seen:  # one function built twice: its lines once
            continue
        seen.add((title, body))
        shown.append(f"{title}:")
        shown.extend(f"  {line}" for line in body)
    return shown


_TITLE = 120


def _line(record: BucketPadding) -> str:
    """``rows=4, length=32: 12 batches, 23% padding``."""
    combination = ", ".join(f"{name}={size}" for name, size in record.combination.items())
    batches = "1 batch" if record.batches == 1 else f"{record.batches} batches"
    return f"{combination}: {batches}, {record.share:.0%} padding"
