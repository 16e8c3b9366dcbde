"""The table `budgets()` prints: one row per budgeted function and place built.

Rows for objects that agree on function, definition and construction site are
merged (a trainer built twice at one line: one row, ``(x2)``, counts summed);
a "built at" column appears only where two rows would otherwise read alike.
Every line fits in `report.LINE_LIMIT` characters: names keep their tail
(``...<locals>.step``), the last column is cut at a word, never in a value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tinax._src.diagnosis import elide, report

_MAX_NAME = 56
_MAX_PLACE = 40
_MIN_CAUSE = 24


def _seconds(entries: Sequence[Any], fact: str) -> float | None:
    values = [getattr(entry, fact) for entry in entries]
    known = [value for value in values if value is not None]
    return sum(known) if known else None


class _Row:
    __slots__ = (
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

    def __init__(self, owner: Any, built: str, cause: str) -> None:
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


def table(
    objects: Sequence[Any],
    built_at: Callable[[Any], str],
    cause: Callable[[Any], str],
) -> str:
    """The printed table of ``objects`` (in the order given)."""
    if not objects:
        return "no live budgeted objects"
    rows: dict[tuple[str, str, str], _Row] = {}
    for owner in objects:
        row = _Row(owner, built_at(owner), cause(owner.traced_signatures))
        if row.key() in rows:
            rows[row.key()].merge(row)
        else:
            rows[row.key()] = row
    defined = [(row.name, row.location) for row in rows.values()]
    with_built = len(set(defined)) < len(defined)
    header = ["function", "location", *(["built at"] if with_built else [])]
    header += ["traces", "compiles", "cache loads", "trace time", "compile time", "last retrace"]
    cells: list[list[str]] = [header]
    for row in rows.values():
        name = row.name if row.count == 1 else f"{row.name} (x{row.count})"
        traces = f"{row.used}/{row.budget}" + (" over" if row.over else "")
        cells.append(
            [
                elide.tail(name, _MAX_NAME),
                elide.tail(row.location, _MAX_PLACE),
                *([elide.tail(row.built, _MAX_PLACE)] if with_built else []),
                traces,
                "?" if row.compiles is None else str(row.compiles),
                "?" if row.loads is None else str(row.loads),
                report.duration(row.trace),
                report.duration(row.compile),
                row.cause,
            ]
        )
    columns = len(header)
    widths = [max(len(line[column]) for line in cells) for column in range(columns - 1)]
    room = max(report.LINE_LIMIT - sum(widths) - 2 * (columns - 1), _MIN_CAUSE)
    for line in cells[1:]:
        line[-1] = elide.words(line[-1], room)
    widths.append(max(len(line[-1]) for line in cells))
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    )
