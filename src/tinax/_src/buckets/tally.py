"""The batches padded per combination of buckets, counted on the `Dim` padded to.

A cached call never enters Python, so no call can be counted. The batcher's pads can:
`pad_ragged` and `pad_to_bucket`, given `Dim`s, add each batch they pad to the `Tally`
of the `Dim` it was padded to (``sizes``', for `pad_ragged` given both): under the
combination (each `Dim`'s name and the size chosen, in axis order: ``rows=4,
length=32``), its real entries and its padded entries. `budgets()` reads the tallies of
the `Dim`s an object's buckets were given. The counts live on the user's `Dim`: none in
the library, none to reset.

A pad takes no lock (it would cost a pad of a few microseconds a tenth more): it
appends the batch's real entries to its key's cell, an append being atomic; cells are
folded into totals under a lock, by whoever fills one or reads them, and a fold removes
only what it added up, so threads padding at once are counted exactly.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
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


class Tally:
    """One `Dim`'s counts: each key's real entries per batch not yet folded (``cells``),
    and ``[batches, real entries]`` folded (``totals``)."""

    __slots__ = ("cells", "totals")

    def __init__(self) -> None:
        self.cells: dict[Key, list[int]] = {}
        self.totals: dict[Key, list[int]] = {}


FOLD_AT = 1024  # a cell's entries added up, at most: a long-running server stays small
_lock = threading.Lock()  # folds only; guards no value a pad reads


def add(tally: Tally, key: Key, real: int) -> None:
    """Counts one batch padded to ``key``, with ``real`` real entries (the pads inline
    it: a call is a tenth of their cost)."""
    cell = tally.cells.get(key)
    if cell is None:
        cell = new_cell(tally, key)
    cell.append(real)
    if len(cell) >= FOLD_AT:
        fold(tally, key, cell)


def new_cell(tally: Tally, key: Key) -> list[int]:
    """``key``'s cell in ``tally``, made once however many threads ask at once."""
    with _lock:
        return tally.cells.setdefault(key, [])


def fold(tally: Tally, key: Key, cell: list[int]) -> None:
    """Adds up the entries of ``cell`` into its key's totals, under the lock: only those
    it sees, so appends made meanwhile wait for the next fold."""
    with _lock:
        _fold(tally, key, cell)


def _fold(tally: Tally, key: Key, cell: list[int]) -> None:
    seen = len(cell)
    if not seen:
        return
    real = sum(cell[:seen])
    del cell[:seen]  # appends go after them; only a fold, under the lock, removes
    totals = tally.totals.get(key)
    if totals is None:
        tally.totals[key] = [seen, real]
    else:
        totals[0] += seen
        totals[1] += real


def counted(tallies: Iterable[Tally]) -> dict[Combination, Counted]:
    """Every combination counted so far in ``tallies`` (each once, however often given),
    the axes with a `Dim` in axis order."""
    found: list[tuple[Key, int, int]] = []
    with _lock:
        for tally in {id(tally): tally for tally in tallies}.values():
            for key, cell in list(tally.cells.items()):
                _fold(tally, key, cell)
            found.extend((key, batches, real) for key, (batches, real) in tally.totals.items())
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
