"""The batches padded per combination of buckets: counted where tinax pads a batch.

A cached call never enters Python, so no call can be counted. The batcher's pads can:
`pad_ragged` and `pad_to_bucket`, given `Dim`s, add each batch they pad here, under
the combination it was padded to (each `Dim`'s name and the size chosen, in axis
order: ``rows=4, length=32``), with its real entries and its padded entries.
`budgets()` reads it back for each object whose buckets declare those names.

One tally for the process, as the pads are plain functions with no object to hold
it. Sizes given as plain tuples are not counted: no name ties them to an object's
buckets. A pad takes no lock (it would cost a pad of a few microseconds a tenth more):
it appends the batch's real entries to its key's cell, an append being atomic; the
cells are folded into totals under a lock, by whoever fills one or reads them, and a
fold removes only what it added up, so threads padding at once are counted exactly.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

Combination = tuple[tuple[str, int], ...]
"""Each `Dim`'s name and the size a batch was padded to on it, in axis order."""

Key = tuple[str | int | None, ...]
"""A pad's key, flat (a nested tuple hashes slower, on every batch): `pad_ragged`'s
``(rows name, rows, length name, length)`` (a name `None` for plain sizes), whose
batches each hold rows x length entries; `pad_to_bucket`'s ``(name, size, across)``,
whose batches each hold size x across (the elements of the axes before the padded
one)."""


class Counted(NamedTuple):
    """The batches padded to one combination, their real entries and padded entries."""

    batches: int
    real: int
    padded: int


_FOLD_AT = 1024  # a cell's entries added up, at most: a long-running server stays small
_lock = threading.Lock()
_cells: dict[Key, list[int]] = {}  # each batch's real entries, not yet folded
_totals: dict[Key, list[int]] = {}  # [batches, real entries] folded


def add(key: Key, real: int) -> None:
    """Counts one batch padded to ``key``, with ``real`` real entries."""
    cell = _cells.get(key)
    if cell is None:
        with _lock:
            cell = _cells.setdefault(key, [])
    cell.append(real)
    if len(cell) >= _FOLD_AT:
        with _lock:
            _fold(key, cell)


def _fold(key: Key, cell: list[int]) -> None:
    """Adds up the entries of ``cell`` into its key's totals (under the lock): only
    those it sees, so appends made meanwhile wait for the next fold."""
    seen = len(cell)
    if not seen:
        return
    real = sum(cell[:seen])
    del cell[:seen]  # appends go after them; only a fold, under the lock, removes
    totals = _totals.get(key)
    if totals is None:
        _totals[key] = [seen, real]
    else:
        totals[0] += seen
        totals[1] += real


def counted() -> dict[Combination, Counted]:
    """Every combination counted so far (the axes with a `Dim`, in axis order)."""
    with _lock:
        for key, cell in list(_cells.items()):
            _fold(key, cell)
        found = [(key, batches, real) for key, (batches, real) in _totals.items()]
    combined: dict[Combination, Counted] = {}
    for key, batches, real in found:
        if len(key) == 4:  # pad_ragged's: rows x length entries a batch
            down, height, across, width = key
            pairs = ((down, height), (across, width))
            each = int(height or 0) * int(width or 0)
        else:  # pad_to_bucket's: size x across
            name, size, across = key
            pairs = ((name, size),)
            each = int(size or 0) * int(across or 0)
        combination = tuple(
            (name, size) for name, size in pairs if isinstance(name, str) and isinstance(size, int)
        )
        counts = Counted(batches, real, batches * each)
        earlier = combined.get(combination)
        if earlier is not None:  # one combination from two keys (rows of plain sizes)
            counts = Counted(*(a + b for a, b in zip(earlier, counts, strict=True)))
        combined[combination] = counts
    return combined


def clear() -> None:
    """Forgets every count (a test's fresh start)."""
    with _lock:
        _cells.clear()
        _totals.clear()
