"""The budgeted functions of a test session: what ``pytest --tinax-budgets`` prints.

A collector hears of every object built (wrap time) and every trace counted
(trace time) through `watchers.watch`, so objects that tests drop are counted
too, not only those still alive at the end. It keeps each object's ledger (its
count and trace history, never the object or its function), and at the end of
the session groups them by function and construction site: objects built,
traces, compiles, retraces and their most common cause, trace and compile
time. A compile is a trace whose compile time `observe` attributed (from
`jax.monitoring`), as ``traced_signatures`` shows it; a load from JAX's persistent
compilation cache is no compile, and has a column of its own (the ledger's
compile book, `budget.compiles.Book`, counts them).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from tinax._src.diagnosis import compare, elide, report
from tinax._src.diagnosis.record import TracedSignature
from tinax._src.ledger import Ledger
from tinax._src.observe import sites, watchers

_MAX_NAME = 60
_MAX_CAUSE = 60


@attrs.define(eq=False)
class _Group:
    """The objects built for one function at one place."""

    function: str  # name (defined at file:line)
    built_at: str  # file:line, or "?" when no user code built them
    ledgers: list[Ledger] = attrs.field(factory=lambda: list[Ledger]())


@attrs.frozen
class Row:
    """One function and construction site, as ``--tinax-budgets`` prints it."""

    function: str
    built_at: str
    objects: int
    traces: int
    compiles: int
    cache_loads: int
    retraces: int
    cause: str
    trace_seconds: float | None
    compile_seconds: float | None


class Collector:
    """Collects, while it is started, every object built and every trace counted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: dict[tuple[str, str], _Group] = {}
        self._seen: set[int] = set()  # ids of ledgers held in a group (held: ids stay unique)

    def built(self, owner: Any, ledger: Ledger) -> None:
        self._add(ledger, owner.function)

    def traced(self, ledger: Ledger, function: Callable[..., Any]) -> None:
        if id(ledger) not in self._seen:  # built before the collector started
            self._add(ledger, function)

    def _add(self, ledger: Ledger, function: Callable[..., Any]) -> None:
        name = report.function_name(function)
        location = report.function_location(function)
        shown = f"{name} ({location})" if location else name
        birth = ledger.birth
        built_at = "?" if birth is None else _place(birth[0])
        with self._lock:
            if id(ledger) in self._seen:
                return
            self._seen.add(id(ledger))
            group = self._groups.get((shown, built_at))
            if group is None:
                group = self._groups[(shown, built_at)] = _Group(shown, built_at)
            group.ledgers.append(ledger)

    def rows(self) -> list[Row]:
        """One row per function and construction site, most compile time first (then
        most trace time, then by name)."""
        with self._lock:
            groups = list(self._groups.values())
        rows = [_row(group) for group in groups]
        rows.sort(
            key=lambda row: (
                -(row.compile_seconds or 0.0),
                -(row.trace_seconds or 0.0),
                row.function,
                row.built_at,
            )
        )
        return rows


def _place(site: tuple[str, int]) -> str:
    return f"{sites.shown(site[0])}:{site[1]}"


def _history(ledger: Ledger) -> tuple[TracedSignature, ...]:
    with ledger.lock:
        return tuple(ledger.history)


def _loads(ledger: Ledger) -> int:
    """Executables loaded from JAX's persistent cache (`budget.compiles.Book.loads`; no
    book: nothing compiled or loaded)."""
    loads = getattr(ledger.book, "loads", 0)
    return loads if isinstance(loads, int) else 0


def retrace_cause(earlier: Sequence[TracedSignature], entry: TracedSignature) -> str:
    """What made ``entry`` trace again: its first difference from the closest earlier
    trace, as ``path: kind``."""
    try:
        found = compare.closest(earlier, entry)[1]
    except Exception:  # a report for a person must print whatever the history holds
        return "?"
    if not found:
        return "no difference in the abstract signature (a cleared cache)"
    first = found[0]
    return f"{first.path}: {', '.join(first.kinds)}"


def _row(group: _Group) -> Row:
    traces = compiles = retraces = loads = 0
    trace_seconds = compile_seconds = 0.0
    timed = compile_timed = False
    causes: collections.Counter[str] = collections.Counter()
    for ledger in group.ledgers:
        history = _history(ledger)
        traces += len(history)
        loads += _loads(ledger)
        for index, entry in enumerate(history):
            if entry.trace_seconds is not None:
                timed = True
                trace_seconds += entry.trace_seconds
            if entry.compile_seconds is not None:
                compiles += 1
                compile_timed = True
                compile_seconds += entry.compile_seconds
            if index:
                retraces += 1
                causes[retrace_cause(history[:index], entry)] += 1
    cause = "-"
    if causes:
        (common, count), *_ = causes.most_common(1)
        cause = common if count == retraces else f"{common} ({count} of {retraces})"
    return Row(
        function=group.function,
        built_at=group.built_at,
        objects=len(group.ledgers),
        traces=traces,
        compiles=compiles,
        retraces=retraces,
        cause=cause,
        cache_loads=loads,
        trace_seconds=trace_seconds if timed else None,
        compile_seconds=compile_seconds if compile_timed else None,
    )


# --- started collectors --------------------------------------------------------------------

_active: list[Collector] = []
_active_lock = threading.Lock()


def _built(owner: Any, ledger: Ledger) -> None:
    for collector in tuple(_active):
        try:
            collector.built(owner, ledger)
        except Exception:  # a report must never break the user's code
            pass


def _traced(ledger: Ledger, function: Callable[..., Any]) -> None:
    for collector in tuple(_active):
        try:
            collector.traced(ledger, function)
        except Exception:  # a report must never break the user's trace
            pass


def start() -> Collector:
    """A new collector, hearing of every object built and trace counted from now on."""
    collector = Collector()
    with _active_lock:
        _active.append(collector)
        watchers.watch(_built, _traced)
    return collector


def stop(collector: Collector) -> None:
    """Stops ``collector`` (what it collected stays readable); the hooks go when no
    collector is left, and tinax's bookkeeping is as if none had been started."""
    with _active_lock:
        if collector in _active:
            _active.remove(collector)
        if not _active:
            watchers.watch(None, None)


# --- the report ----------------------------------------------------------------------------

HEADER = (
    "compile time",
    "trace time",
    "objects",
    "traces",
    "compiles",
    "cache loads",
    "retraces",
    "function (defined at)",
    "built at",
    "most common retrace cause",
)
_RIGHT = 7  # the first seven columns are figures: aligned right


def table(rows: Sequence[Row]) -> list[str]:
    """The rows as lines of a table under `HEADER`."""
    cells: list[list[str]] = [list(HEADER)]
    for row in rows:
        cells.append(
            [
                report.duration(row.compile_seconds),
                report.duration(row.trace_seconds),
                str(row.objects),
                str(row.traces),
                str(row.compiles),
                str(row.cache_loads),
                str(row.retraces),
                elide.tail(row.function, _MAX_NAME),
                row.built_at,
                elide.words(row.cause, _MAX_CAUSE),
            ]
        )
    widths = [max(len(line[column]) for line in cells) for column in range(len(HEADER))]
    return [
        "  ".join(
            cell.rjust(width) if column < _RIGHT else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(line, widths, strict=True))
        ).rstrip()
        for line in cells
    ]


def summary(collector: Collector, top: int) -> tuple[str, list[str]]:
    """``(title, lines)`` of the session's report: every function and construction
    site (``top=0``), or the ``top`` with the most compile time."""
    rows = collector.rows()
    if not rows:
        return "tinax budgets", ["no budgeted function was built in this session"]
    shown = rows if top <= 0 else rows[:top]
    what = "budgeted function" + ("s" if len(rows) > 1 else "")
    if len(shown) < len(rows):
        title = f"tinax budgets: top {len(shown)} of {len(rows)} {what}, by compile time"
    else:
        title = f"tinax budgets: {len(rows)} {what}, by compile time"
    lines = table(shown)
    if len(shown) < len(rows):
        lines.append(f"({len(rows) - len(shown)} more: --tinax-budgets shows every one)")
    return title, lines
