"""tinax's pytest plugin: ``pytest --tinax-budgets[=N]``.

pytest loads it at start-up wherever tinax is installed (entry point ``pytest11``
named ``tinax``; ``-p no:tinax`` turns it off). It is a top-level module, as
hypothesis's own plugin is, so that loading it imports neither JAX nor tinax:
without ``--tinax-budgets`` it only adds the option. With it, tinax collects,
from the start of the session, every budgeted object built and every trace
counted (objects that tests drop included), and prints at the end one row per
function and construction site, most compile time first, as ``--durations``
does for tests. The collecting is in ``tinax._src.observe.session_budgets``;
the table is here, so that pytest-xdist's controller prints it without
importing JAX: each worker collects its own objects and sends their records
(`Record`, plain values) in ``workeroutput``, and the controller groups every
worker's records as a serial run groups its own. An object is its process's:
one built at import (module level) is built once per worker, and counts once
per worker.

PYTEST_DONT_REWRITE: the module has no assertions for pytest to rewrite, and
pytest would warn (an error under ``filterwarnings = error``) when ``-p`` loads
it after something imported it.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

import pytest

if TYPE_CHECKING:
    from tinax._src.observe.session_budgets import Collector

OPTION = "--tinax-budgets"
_OUTPUT = "tinax_budgets"  # the key of a worker's records in xdist's workeroutput


@dataclasses.dataclass
class _Started:
    """What ``--tinax-budgets`` started: a collector in the process that runs the tests
    (none in xdist's controller), and the records the workers sent, by worker."""

    top: int
    collector: Collector | None
    received: dict[str, list[Record]] = dataclasses.field(
        default_factory=lambda: dict[str, list[Record]]()
    )
    lost: list[str] = dataclasses.field(default_factory=lambda: list[str]())


_KEY: pytest.StashKey[_Started] = pytest.StashKey()


def _top(value: str) -> int:
    """``N`` of ``--tinax-budgets=N``: a whole number, 0 for every row."""
    try:
        top = int(value)
    except ValueError:
        top = -1
    if top < 0:
        raise argparse.ArgumentTypeError(
            f"expected N, a whole number of rows (0 for all); got {value!r}. The bare "
            f"option takes no value: write {OPTION}=N, or put {OPTION} after the paths."
        )
    return top


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tinax", "tinax: trace budgets of compiled functions")
    group.addoption(
        OPTION,
        dest="tinax_budgets",
        nargs="?",
        const=0,
        default=None,
        type=_top,
        metavar="N",
        help=(
            "at the end of the session, print every budgeted function (BoundedJit, "
            "BatchedJit) the session built, by function and construction site: objects, "
            "traces, compiles, retraces and their most common cause, the combinations of "
            "declared buckets compiled (no retraces), trace and compile time; most compile "
            "time first. =N: the top N only."
        ),
    )


def _controller(config: pytest.Config) -> bool:
    """Whether this process is pytest-xdist's controller: it runs no test (its workers
    do), as xdist decides when it starts its distributed session."""
    if hasattr(config, "workerinput") or config.getoption("collectonly", False):
        return False
    return config.getoption("dist", "no") != "no" and bool(config.getoption("tx", None))


def pytest_configure(config: pytest.Config) -> None:
    top: int | None = config.getoption("tinax_budgets", None)
    if top is None:
        return
    if _controller(config):  # the workers collect; nothing to import here
        config.stash[_KEY] = _Started(top, None)
        return
    from tinax._src.observe import session_budgets

    config.stash[_KEY] = _Started(top, session_budgets.start())


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On an xdist worker: its records, for the controller (xdist sends ``workeroutput``
    once this hook has run)."""
    started = session.config.stash.get(_KEY, None)
    output: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if started is None or started.collector is None or output is None:
        return
    output[_OUTPUT] = started.collector.records()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object | None) -> None:
    """On xdist's controller: a worker's records, once it has finished (one that went
    down without finishing sent none, and the report says so)."""
    started = node.config.stash.get(_KEY, None)
    if started is None:
        return
    name = str(node.gateway.id)
    records = getattr(node, "workeroutput", {}).get(_OUTPUT)
    if records is None:
        started.lost.append(name)
    else:
        started.received[name] = records


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    started = config.stash.get(_KEY, None)
    if started is None or hasattr(config, "workerinput"):
        return
    if started.collector is None:
        records = [record for sent in started.received.values() for record in sent]
    else:
        records = started.collector.records()
    title, lines = summary(records, started.top)
    if started.lost:
        lines.append(
            f"(not counted: the objects of {', '.join(sorted(started.lost))}, "
            "which went down before the end of the session)"
        )
    terminalreporter.write_sep("=", title)
    for line in lines:
        terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    started = config.stash.get(_KEY, None)
    if started is None:
        return
    if started.collector is not None:
        from tinax._src.observe import session_budgets

        session_budgets.stop(started.collector)
    del config.stash[_KEY]


# --- the report ----------------------------------------------------------------------------


class Record(TypedDict):
    """One budgeted object's figures (`session_budgets.Collector.records`), in plain
    values that an xdist worker sends to its controller."""

    function: str  # name (defined at file:line)
    built_at: str  # file:line, or "?" when no user code built it
    traces: int
    compiles: int
    cache_loads: int
    trace_seconds: float | None  # None: no trace timed
    compile_seconds: float | None  # None: no compile attributed
    causes: list[str]  # of each retrace, in order: its first difference, ``path: kind``
    buckets: int  # combinations of its declared buckets traced (a bucket is no retrace)
    combinations: int  # the combinations its buckets declare; 0: none declared


@dataclasses.dataclass(frozen=True)
class Row:
    """One function and construction site, as ``--tinax-budgets`` prints it."""

    function: str
    built_at: str
    objects: int
    traces: int
    compiles: int
    cache_loads: int
    retraces: int
    buckets: int
    combinations: int  # 0: no object of the row declares buckets
    cause: str
    trace_seconds: float | None
    compile_seconds: float | None


def _total(values: Iterable[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def rows(records: Iterable[Record]) -> list[Row]:
    """One row per function and construction site, most compile time first (then most
    trace time, then by name)."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for record in records:
        groups.setdefault((record["function"], record["built_at"]), []).append(record)
    found: list[Row] = []
    for (function, built_at), group in groups.items():
        causes = collections.Counter(cause for record in group for cause in record["causes"])
        retraces = sum(len(record["causes"]) for record in group)
        cause = "-"
        if causes:
            (common, count), *_ = causes.most_common(1)
            cause = common if count == retraces else f"{common} ({count} of {retraces})"
        found.append(
            Row(
                function=function,
                built_at=built_at,
                objects=len(group),
                traces=sum(record["traces"] for record in group),
                compiles=sum(record["compiles"] for record in group),
                cache_loads=sum(record["cache_loads"] for record in group),
                retraces=retraces,
                buckets=sum(record["buckets"] for record in group),
                combinations=sum(record["combinations"] for record in group),
                cause=cause,
                trace_seconds=_total(record["trace_seconds"] for record in group),
                compile_seconds=_total(record["compile_seconds"] for record in group),
            )
        )
    found.sort(
        key=lambda row: (
            -(row.compile_seconds or 0.0),
            -(row.trace_seconds or 0.0),
            row.function,
            row.built_at,
        )
    )
    return found


HEADER = (
    "compile time",
    "trace time",
    "objects",
    "traces",
    "compiles",
    "cache loads",
    "retraces",
    "buckets",
    "function (defined at)",
    "built at",
    "most common retrace cause",
)
_RIGHT = 8  # the first eight columns are figures: aligned right
_MAX_NAME = 60
_MAX_CAUSE = 60


def table(shown: Sequence[Row]) -> list[str]:
    """The rows as lines of a table under `HEADER`."""
    cells: list[list[str]] = [list(HEADER)]
    for row in shown:
        cells.append(
            [
                duration(row.compile_seconds),
                duration(row.trace_seconds),
                str(row.objects),
                str(row.traces),
                str(row.compiles),
                str(row.cache_loads),
                str(row.retraces),
                f"{row.buckets} of {row.combinations}" if row.combinations else "-",
                tail(row.function, _MAX_NAME),
                row.built_at,
                words(row.cause, _MAX_CAUSE),
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


def summary(records: Iterable[Record], top: int) -> tuple[str, list[str]]:
    """``(title, lines)`` of the session's report: every function and construction
    site (``top=0``), or the ``top`` with the most compile time."""
    every = rows(records)
    if not every:
        return "tinax budgets", ["no budgeted function was built in this session"]
    shown = every if top <= 0 else every[:top]
    what = "budgeted function" + ("s" if len(every) > 1 else "")
    if len(shown) < len(every):
        title = f"tinax budgets: top {len(shown)} of {len(every)} {what}, by compile time"
    else:
        title = f"tinax budgets: {len(every)} {what}, by compile time"
    lines = table(shown)
    if len(shown) < len(every):
        lines.append(f"({len(every) - len(shown)} more: --tinax-budgets shows every one)")
    return title, lines


# tinax's own text helpers, which this module cannot import without JAX
# (`tinax._src.diagnosis.history.duration`, `elide.tail`, `elide.words`; a test holds
# each to the same output as tinax's).


def duration(seconds: float | None) -> str:
    """``12.3 ms``, ``45 us`` or ``1.23 s``; ``-`` for an unknown duration."""
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    return f"{seconds * 1e3:.1f} ms" if seconds < 1.0 else f"{seconds:.2f} s"


def tail(text: str, limit: int) -> str:
    """The end of ``text`` in at most ``limit`` characters (``...`` first): for dotted
    names (``test_x.<locals>.step``) the end is the name itself."""
    if len(text) <= limit:
        return text
    if "." in text:
        parts = text.split(".")
        kept: list[str] = []
        room = limit - 2
        for part in reversed(parts):
            if len(part) + 1 > room:
                break
            kept.insert(0, part)
            room -= len(part) + 1
        if kept:
            return "..." + ".".join(kept)
    return "..." + text[len(text) - (limit - 3) :]


def words(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a space (never inside a value),
    ending in ``...``."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 3)
    if cut <= 0:
        return text[: limit - 3] + "..."
    return text[:cut].rstrip(",;:") + " ..."
