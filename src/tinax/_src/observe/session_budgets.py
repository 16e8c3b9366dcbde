"""The budgeted functions of a test session: what ``pytest --tinax-budgets`` counts.

A collector hears of every object built (wrap time) and every trace counted
(trace time) through `watchers.watch`, so objects that tests drop are counted
too, not only those still alive at the end. It keeps each object's ledger (its
count and trace history) and compile book, never the object, its handle or its
function, and at the end of
the session gives each object's figures as a plain record (function and
construction site, traces, compiles, cache loads, trace and compile time, the
cause of each retrace): the plugin groups them into its table, a serial run's
and an xdist controller's alike, without importing JAX (`_tinax_pytestplugin`).
A compile is a trace whose compile time `observe` attributed (from
`jax.monitoring`), as ``traced_signatures`` shows it; a load from JAX's persistent
compilation cache is no compile, and has a column of its own (the object's
compile book, `budget.compiles.Book`, counts them).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from tinax._src.buckets import outside
from tinax._src.buckets.declared import Declared
from tinax._src.diagnosis import compare, report
from tinax._src.diagnosis.record import TracedSignature
from tinax._src.objects.ledger import Ledger
from tinax._src.observe import rebuilt, sites, watchers

if TYPE_CHECKING:
    from _tinax_pytestplugin import Record
    from tinax._src.objects.handle import Handle


@attrs.define(eq=False)
class _Group:
    """The objects built for one function at one place."""

    function: str  # name (defined at file:line)
    built_at: str  # file:line, or "?" when no user code built them
    kept: list[_Kept] = attrs.field(factory=lambda: list[_Kept]())


class _Kept:
    """What is kept of one object: its ledger, and its compile book (`budget.compiles`,
    made at its first trace; read duck-typed, as this layer stands below it)."""

    __slots__ = ("book", "buckets", "ledger")

    def __init__(self, ledger: Ledger, book: object, buckets: Declared | None) -> None:
        self.ledger = ledger
        self.book = book
        self.buckets = buckets  # its declared buckets: their first traces are no retraces


class Collector:
    """Collects, while it is started, every object built and every trace counted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: dict[tuple[str, str], _Group] = {}
        self._seen: dict[int, _Kept] = {}  # by the ids of the ledgers held (ids stay unique)

    def built(self, handle: Handle) -> None:
        self._add(handle)

    def traced(self, handle: Handle) -> None:
        kept = self._seen.get(id(handle.ledger))
        if kept is None:  # built before the collector started
            self._add(handle)
        elif kept.book is None:  # made at its first trace
            kept.book = handle.book

    def _add(self, handle: Handle) -> None:
        ledger, function = handle.ledger, handle.function
        name = report.function_name(function)
        location = report.function_location(function)
        shown = f"{name} ({location})" if location else name
        birth = rebuilt.birth_of(handle)
        built_at = "?" if birth is None else _place(birth[0])
        with self._lock:
            if id(ledger) in self._seen:
                return
            kept = self._seen[id(ledger)] = _Kept(
                ledger, handle.book, handle.buckets
            )  # never the handle
            group = self._groups.get((shown, built_at))
            if group is None:
                group = self._groups[(shown, built_at)] = _Group(shown, built_at)
            group.kept.append(kept)

    def records(self) -> list[Record]:
        """Each object collected, as `_tinax_pytestplugin.rows` groups them (the order
        they were built)."""
        with self._lock:
            groups = list(self._groups.values())
        return [_record(group, kept) for group in groups for kept in group.kept]


def _place(site: tuple[str, int]) -> str:
    return f"{sites.shown(site[0])}:{site[1]}"


def _history(ledger: Ledger) -> tuple[TracedSignature, ...]:
    with ledger.lock:
        return tuple(ledger.history)


def _loads(book: object) -> int:
    """Executables loaded from JAX's persistent cache (`budget.compiles.Book.loads`; no
    book: nothing compiled or loaded)."""
    loads = getattr(book, "loads", 0)
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


def _record(group: _Group, kept: _Kept) -> Record:
    """One object's figures, in plain values that an xdist worker can send. The first
    trace of a combination of its declared buckets is no retrace: it is counted among
    the buckets compiled, of the combinations declared."""
    history = _history(kept.ledger)
    buckets = kept.buckets
    retraces = [
        index
        for index in range(1, len(history))
        if buckets is None or not outside.declared_trace(buckets, history[index], history[:index])
    ]
    timed = [entry.trace_seconds for entry in history if entry.trace_seconds is not None]
    compiled = [entry.compile_seconds for entry in history if entry.compile_seconds is not None]
    return {
        "function": group.function,
        "built_at": group.built_at,
        "traces": len(history),
        "compiles": len(compiled),
        "cache_loads": _loads(kept.book),
        "trace_seconds": sum(timed) if timed else None,
        "compile_seconds": sum(compiled) if compiled else None,
        "causes": [retrace_cause(history[:index], history[index]) for index in retraces],
        "buckets": 0 if buckets is None else outside.compiled_summary(buckets, history)[0],
        "combinations": 0 if buckets is None else buckets.combinations,
    }


# --- started collectors --------------------------------------------------------------------

_active: list[Collector] = []
_active_lock = threading.Lock()


def _built(handle: Handle) -> None:
    for collector in tuple(_active):
        try:
            collector.built(handle)
        except Exception:  # a report must never break the user's code
            pass


def _traced(handle: Handle) -> None:
    for collector in tuple(_active):
        try:
            collector.traced(handle)
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
