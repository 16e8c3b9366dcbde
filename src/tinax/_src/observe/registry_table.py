"""The table `budgets()` prints: one row per budgeted function and place built.

Rows for objects that agree on function, definition and construction site are
merged (a trainer built twice at one line: one row, ``(x2)``, counts summed);
a "built at" column appears only where two rows would otherwise read alike.
Every line fits in `report.LINE_LIMIT` characters: names keep their tail
(``...<locals>.step``); the last retrace's difference keeps both its values
(``old -> new``): its description goes first, then its path is cut between
segments, and only a value too long for the column alone is cut, in its middle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from tinax._src.diagnosis import elide, report
from tinax._src.diagnosis.kinds import ABSENT, Difference

if TYPE_CHECKING:
    from tinax._src.objects.handle import Budgeted

_MAX_NAME = 56
_MAX_PLACE = 40
_MIN_PLACE = 20
_CAUSE_ROOM = 48
_MIN_CAUSE = 24


def _seconds(entries: Sequence[Any], fact: str) -> float | None:
    values = [getattr(entry, fact) for entry in entries]
    known = [value for value in values if value is not None]
    return sum(known) if known else None


class Cause(NamedTuple):
    """The first difference of an object's latest retrace (trace ``number``) from its
    closest earlier trace, and how many more there are; fitted to the column by `table`."""

    number: int
    difference: Difference
    more: int

    def text(self, room: int) -> str:
        """``#N: path: old -> new (detail) (+k more)`` in at most ``room`` characters."""
        head = f"#{self.number}: "
        more = f" (+{self.more} more)" if self.more else ""
        found = self.difference
        if found.before == ABSENT:
            values, detail = f"added ({found.after})", ""
        elif found.after == ABSENT:
            values, detail = f"removed ({found.before})", ""
        else:
            values, detail = f"{found.before} -> {found.after}", f" ({found.detail})"
        line = f"{head}{found.path}: {values}{detail}{more}"
        if len(line) <= room:
            return line
        path_room = room - len(f"{head}: {values}{more}")
        if path_room >= min(len(found.path), _MIN_PATH):  # the description goes, then the path
            return f"{head}{elide.path(found.path, path_room)}: {values}{more}"
        path = elide.path(found.path, _MIN_PATH)
        value_room = max(room - len(f"{head}{path}: {more}"), 2 * _MIN_VALUE + 4)
        if found.before == ABSENT or found.after == ABSENT:
            values = _middle(values, value_room)
        else:
            total = value_room - 4  # a short value stays whole; a long one gets the rest
            first = min(len(found.before), max(total // 2, total - len(found.after)))
            second = total - first
            values = f"{_middle(found.before, first)} -> {_middle(found.after, second)}"
        return f"{head}{path}: {values}{more}"


_MIN_PATH = 12
_MIN_VALUE = 8


def _middle(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut in the middle (a value too long for
    the column alone: its start and its end both show)."""
    limit = max(limit, _MIN_VALUE)
    if len(text) <= limit:
        return text
    keep = limit - 3
    head = (keep + 1) // 2
    return f"{text[:head]}...{text[len(text) - (keep - head) :]}"


Bucketed = tuple[int, int, float]  # combinations compiled, declared, their compile time


class _Row:
    __slots__ = (
        "buckets",
        "budget",
        "built",
        "cause",
        "compile",
        "compiles",
        "count",
        "loads",
        "location",
        "name",
        "over",
        "trace",
        "used",
    )

    def __init__(
        self, owner: Budgeted, built: str, cause: str | Cause, buckets: Bucketed | None
    ) -> None:
        history = owner.traced_signatures
        self.name = report.function_name(owner.function)
        self.location = report.function_location(owner.function) or "?"
        self.built = built
        self.count = 1
        self.used = owner.traces_used
        self.budget = owner.max_traces
        self.over = self.used > self.budget
        self.compiles: int | None = getattr(owner, "compiles_used", None)
        self.loads: int | None = getattr(owner, "cache_loads", None)
        self.trace = _seconds(history, "trace_seconds")
        self.compile = _seconds(history, "compile_seconds")
        self.cause = cause
        self.buckets = buckets

    def key(self) -> tuple[str, str, str]:
        return self.name, self.location, self.built

    def merge(self, other: _Row) -> None:
        self.count += 1
        self.used += other.used
        self.budget += other.budget
        self.over = self.over or other.over
        if self.compiles is not None and other.compiles is not None:
            self.compiles += other.compiles
        if self.loads is not None and other.loads is not None:
            self.loads += other.loads
        for fact in ("trace", "compile"):
            mine, theirs = getattr(self, fact), getattr(other, fact)
            if theirs is not None:
                setattr(self, fact, theirs if mine is None else mine + theirs)
        if other.cause != "-":
            self.cause = other.cause
        if self.buckets is not None and other.buckets is not None:
            mine, theirs = self.buckets, other.buckets
            self.buckets = (mine[0] + theirs[0], mine[1] + theirs[1], mine[2] + theirs[2])


def _buckets_text(buckets: Bucketed | None) -> str:
    """``12/12 (3.4 s)``: the combinations compiled, of those declared, and their compile
    time; ``-`` for an object without buckets."""
    if buckets is None:
        return "-"
    done, declared, seconds = buckets
    return f"{done}/{declared} ({report.duration(seconds) if done else '-'})"


def _cells(
    rows: Iterable[_Row], header: list[str], with_built: bool, with_buckets: bool, shrink: int
) -> list[list[str]]:
    """The table's cells, the last column left empty; names and places cut to their
    tails at ``shrink`` characters under their widest."""
    cells = [header]
    for row in rows:
        name = row.name if row.count == 1 else f"{row.name} (x{row.count})"
        traces = f"{row.used}/{row.budget}" + (" over" if row.over else "")
        place = _MAX_PLACE - shrink
        cells.append(
            [
                elide.tail(name, _MAX_NAME - shrink),
                elide.tail(row.location, place),
                *([elide.tail(row.built, place)] if with_built else []),
                traces,
                "?" if row.compiles is None else str(row.compiles),
                "?" if row.loads is None else str(row.loads),
                report.duration(row.trace),
                report.duration(row.compile),
                *([_buckets_text(row.buckets)] if with_buckets else []),
                "",  # fitted by `table`, to the room the other columns leave
            ]
        )
    return cells


def table(
    objects: Sequence[Budgeted],
    built_at: Callable[[Budgeted], str],
    cause: Callable[[Budgeted], str | Cause],
    bucketed: Callable[[Budgeted], Bucketed | None] = lambda owner: None,
    threaded: Callable[[Budgeted], bool] = lambda owner: False,
) -> str:
    """The printed table of ``objects`` (in the order given); a ``buckets`` column
    (``compiled/declared (compile time)``) where an object declares buckets; where one
    compiled in threads (``threaded``: ``precompile_buckets``), its compile times are
    marked ``*`` and a note says they add up the threads' time."""
    if not objects:
        return "no live budgeted objects"
    rows: dict[tuple[str, str, str], _Row] = {}
    for owner in objects:
        row = _Row(owner, built_at(owner), cause(owner), bucketed(owner))
        if row.key() in rows:
            rows[row.key()].merge(row)
        else:
            rows[row.key()] = row
    defined = [(row.name, row.location) for row in rows.values()]
    with_built = len(set(defined)) < len(defined)
    header = ["function", "location", *(["built at"] if with_built else [])]
    with_buckets = any(row.buckets is not None for row in rows.values())
    summed = any(threaded(owner) for owner in objects)
    compile_time = "compile time*" if summed else "compile time"
    header += ["traces", "compiles", "cache loads", "trace time", compile_time]
    header += [*(["buckets"] if with_buckets else []), "last retrace"]
    columns = len(header)
    # The name and the places give way (to their tails) before the cause has less than
    # room for a difference with both its values (`_CAUSE_ROOM`).
    shrink = 0
    cells = _cells(rows.values(), header, with_built, with_buckets, shrink)
    widths = [max(len(line[column]) for line in cells) for column in range(columns - 1)]
    while sum(widths) + 2 * (columns - 1) + _CAUSE_ROOM > report.LINE_LIMIT and (
        _MAX_PLACE - shrink > _MIN_PLACE
    ):
        shrink += 4
        cells = _cells(rows.values(), header, with_built, with_buckets, shrink)
        widths = [max(len(line[column]) for line in cells) for column in range(columns - 1)]
    room = max(report.LINE_LIMIT - sum(widths) - 2 * (columns - 1), _MIN_CAUSE)
    for line, row in zip(cells[1:], rows.values(), strict=True):
        found = row.cause
        line[-1] = found.text(room) if isinstance(found, Cause) else elide.words(found, room)
    widths.append(max(len(line[-1]) for line in cells))
    shown = "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    )
    return shown + ("\n" + _SUMMED if summed else "")


_SUMMED = (
    "* compile time, here and in buckets: the compiles' own times added up; "
    "precompile_buckets runs several at once, so it can exceed the wall time they took"
)
