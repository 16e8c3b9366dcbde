"""Warm start: a program's start-up to its first step, each run a fresh process.

Three programs: `benchmarks/startup.py` (8 budgeted functions of 300 operations, about
a second of loading; built at import, as module-level steps are, or in ``main()`` after
the loading), `benchmarks/startup_transformer.py` (an equinox transformer's training
and eval steps) and `benchmarks/startup_lengths.py` (one function with 6 recorded
lengths, whose first call uses one). Each prints its phases (``import``, ``loading``,
``first_step``, ``total``; ``first_call`` for the last), and what JAX's compile events
measured in the main thread during the first step (``trace``, ``lower``, ``compile``).

What warm start can save is above the floor that no start-up skips, JAX's import
and the program's loading: the start-up rows time the first step **above import +
loading**, ``total - import - loading``, where ``loading`` is the loading of the
round's run with JAX's persistent cache alone (no background work). Warm start's
compiles run once the program has started JAX's backend, while it loads; where they
slow the loading down (a loading that runs Python or compiles eager operations), that
slowdown counts against it. Every warm run reads a copy of the round's recorded
manifest, so that no run's own use (which reorders the signatures, most used first)
changes what the next one compiles ahead, and warm runs without the cache read one
recorded without it (the cache's folder is in the compile options JAX records).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable

from harness import HERE, Row

STARTUP = HERE / "startup.py"
TRANSFORMER = HERE / "startup_transformer.py"
LENGTHS = HERE / "startup_lengths.py"

Phases = dict[str, float]  # import, loading, first_step, total, trace, lower, compile (s)
Round = dict[str, Phases]

CACHE, WARM_CACHE, WARM, COLD = "cache alone", "warm start + cache", "warm start, no cache", "cold"


def _phases(program: object, *options: str) -> Phases:
    """What a fresh process of ``program`` printed on its last line: name value pairs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINAX_", "XLA_FLAGS"))}
    command = [sys.executable, str(program), *options]
    result = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    words = result.stdout.strip().split("\n")[-1].split()
    return {name: float(value) for name, value in zip(words[::2], words[1::2], strict=True)}


def _copy(signatures: str, to: str) -> tuple[str, str]:
    """``("--signatures", copy)``: a copy of the manifest ``signatures`` and its modules'
    folder (`<stem>.modules`), for one warm run."""
    stem = os.path.splitext(signatures)[0]
    copy = os.path.splitext(to)[0]
    shutil.copyfile(signatures, to)
    if os.path.isdir(stem + ".modules"):
        shutil.copytree(stem + ".modules", copy + ".modules", dirs_exist_ok=True)
    return "--signatures", to


def _alternating(index: int, runs: list[tuple[str, Callable[[], Phases]]]) -> Round:
    """Runs ``runs`` in their order on even rounds, reversed on odd ones."""
    return {name: run() for name, run in (runs if index % 2 == 0 else runs[::-1])}


def _startup_round(
    program: object, index: int, options: Iterable[str], *, cold: bool, uncached: bool = True
) -> Round:
    """One round: two runs that record signatures, one of them filling a cache (JAX puts
    the cache's folder in the compile options, so that a run without the cache matches
    only executables recorded without it), then each way of starting, in an order that
    alternates from round to round (``uncached``: warm start without the cache too)."""
    extra = tuple(options)
    with tempfile.TemporaryDirectory(prefix="tinax-startup-") as folder:
        cache = ("--cache", os.path.join(folder, "cache"))
        with_cache, without = os.path.join(folder, "cached.json"), os.path.join(folder, "cold.json")
        _phases(program, *extra, *cache, "--signatures", with_cache)  # primes the cache too
        runs: list[tuple[str, Callable[[], Phases]]] = [
            (CACHE, lambda: _phases(program, *extra, *cache)),
            (
                WARM_CACHE,
                lambda: _phases(program, *extra, *cache, *_copy(with_cache, f"{folder}/a.json")),
            ),
        ]
        if uncached:
            _phases(program, *extra, "--signatures", without)
            runs.append(
                (WARM, lambda: _phases(program, *extra, *_copy(without, f"{folder}/b.json")))
            )
        if cold:
            runs.append((COLD, lambda: _phases(program, *extra)))
        return _alternating(index, runs)


def _recording_round(index: int, options: Iterable[str], pairs: int) -> Round:
    """Cold runs that record and that do not, A B B A (``pairs`` 2) or A B (1): a drift
    of the machine over the round cancels."""
    extra = tuple(options)
    with tempfile.TemporaryDirectory(prefix="tinax-recording-") as folder:
        record = ("--signatures", f"{folder}/recorded.json", "--measure-recording")
        plain, recording = [], []
        for turn in range(pairs):
            order = [False, True] if turn % 2 == 0 else [True, False]
            for records in order:
                if records:
                    recording.append(_phases(STARTUP, *extra, *record))
                    os.remove(record[1])
                else:
                    plain.append(_phases(STARTUP, *extra))
    return {"cold": _sum(plain), "cold, recording": _sum(recording)}


def _sum(runs: list[Phases]) -> Phases:
    return {phase: sum(run[phase] for run in runs) for phase in runs[0]}


def _above_floor(runs: Round, name: str) -> float:
    """Seconds of ``name``'s start-up above its import and an undisturbed loading (the
    round's cache-alone run's)."""
    return runs[name]["total"] - runs[name]["import"] - runs[CACHE]["loading"]


def _row(
    name: str, baseline: str, times: dict[str, list[float]], target: float | None, rounds: int
) -> Row:
    made = Row(name, baseline, {n: lambda: lambda: None for n in times}, target=target)
    made.times, made.rounds, made.measured = times, rounds, True
    return made


def _median(measured: list[Round], name: str, phase: str) -> float:
    return statistics.median(runs[name][phase] for runs in measured)


def _notes(
    measured: list[Round], names: list[str], pair: tuple[str, str]
) -> Callable[[Row], list[str]]:
    """The phases of each way of starting, where its first step went (JAX's events in
    the main thread), and the ratio of ``pair`` less each run's own loading and from
    the program's first line."""
    mine, theirs = pair

    def notes(_: Row) -> list[str]:
        phases = ", ".join(
            f"{n} {_median(measured, n, 'import'):.2f} + {_median(measured, n, 'loading'):.2f}"
            f" + {_median(measured, n, 'first_step'):.2f} = {_median(measured, n, 'total'):.2f} s"
            for n in names
        )
        parts = ", ".join(
            f"{n} trace {_median(measured, n, 'trace'):.3f} + lower"
            f" {_median(measured, n, 'lower'):.3f} + compile"
            f" {_median(measured, n, 'compile'):.3f} s"
            f" (compiles_used {_median(measured, n, 'compiles_used'):g},"
            f" cache_loads {_median(measured, n, 'cache_loads'):g})"
            for n in names
        )
        own = [runs[mine]["first_step"] / runs[theirs]["first_step"] for runs in measured]
        whole = [runs[mine]["total"] / runs[theirs]["total"] for runs in measured]
        return [
            f"  phases (import + loading + first step = total, medians): {phases}",
            f"  first step, main thread (JAX's events, medians): {parts}",
            f"  {mine} / {theirs}, each run less its own loading: {statistics.median(own):.2f};"
            f" from the program's first line: {statistics.median(whole):.2f}",
        ]

    return notes


def _times(measured: list[Round], names: list[str], tinax: str) -> dict[str, list[float]]:
    return {
        (n if n != tinax else "tinax"): [_above_floor(runs, n) for runs in measured] for n in names
    }


def _small(quick: bool) -> tuple[str, ...]:
    """``--quick``: 2 functions and 0.2 s of loading (the rows execute; timings aside)."""
    return ("--functions", "2", "--loading", "0.2") if quick else ()


def startup_rows(quick: bool) -> list[Row]:
    """`benchmarks/startup.py`, its 8 functions built at import (module-level steps): the
    first step above import + loading, cold, JAX's persistent cache alone, warm start
    with and without it; and what recording costs a cold run (from the end of the
    import, where recording starts)."""
    rounds = 1 if quick else 5
    options = ("--build", "import", *_small(quick))
    measured = [_startup_round(STARTUP, i, options, cold=True) for i in range(rounds)]
    names = [CACHE, WARM_CACHE, WARM, COLD]
    starts = _row(
        "first step above import + loading: 8 functions x 300 ops built at import, 1 s of"
        " loading (tinax: warm start + cache)",
        CACHE,
        _times(measured, names, WARM_CACHE),
        0.5,
        rounds,
    )
    starts.notes = _notes(measured, names, (WARM_CACHE, CACHE))

    # Recording runs after the import (`tinax.warm_start` is called there, before the
    # steps are built), so both measures start there. The row: a recording run's import
    # to first step against the same less recording's own CPU time (the program measures
    # it: `--measure-recording`), exact where the end-to-end comparison, in the notes, is
    # noise-bound (its rounds range over 15 % here; each is two pairs, A B B A, summed).
    def after_import(run: Phases) -> float:
        return run["total"] - run["import"]

    paired = [_recording_round(i, options, 1 if quick else 2) for i in range(rounds)]
    recording_runs = [runs["cold, recording"] for runs in paired]
    recording = _row(
        "import to first step, cold: tinax recording its signatures and executables,"
        " against its own CPU time",
        "without recording's time",
        {
            "without recording's time": [after_import(r) - r["recording"] for r in recording_runs],
            "tinax": [after_import(r) for r in recording_runs],
        },
        1.01,
        rounds,
    )

    def recording_notes(_: Row) -> list[str]:
        ratios = [
            after_import(runs["cold, recording"]) / after_import(runs["cold"]) for runs in paired
        ]
        per_run = 1 if quick else 2
        spent = statistics.median(r["recording"] / per_run for r in recording_runs)
        return [
            f"  recording's CPU time per run (median): {spent * 1000:.1f} ms",
            f"  end to end, against runs that do not record (A B B A): median"
            f" {statistics.median(ratios):.3f}, rounds {min(ratios):.3f} to {max(ratios):.3f}",
        ]

    recording.notes = recording_notes
    return [starts, recording]


def built_in_main_rows(quick: bool) -> list[Row]:
    """`benchmarks/startup.py --build main`: the 8 functions built in ``main()`` after the
    loading, so that nothing compiles ahead before they are built; warm start against
    JAX's persistent cache alone (with the cache) and against cold (without it)."""
    rounds = 1 if quick else 5
    options = ("--build", "main", *_small(quick))
    measured = [_startup_round(STARTUP, i, options, cold=True) for i in range(rounds)]
    name = "first step above import + loading: 8 functions x 300 ops built in main() after 1 s of"
    with_cache = _row(
        f"{name} loading (tinax: warm start + cache)",
        CACHE,
        _times(measured, [CACHE, WARM_CACHE], WARM_CACHE),
        1.0,
        rounds,
    )
    with_cache.notes = _notes(measured, [CACHE, WARM_CACHE], (WARM_CACHE, CACHE))
    without = _row(
        f"{name} loading, no cache (tinax: warm start)",
        COLD,
        _times(measured, [COLD, WARM], WARM),
        1.0,
        rounds,
    )
    without.notes = _notes(measured, [COLD, WARM], (WARM, COLD))
    return [with_cache, without]


def transformer_rows(quick: bool) -> list[Row]:
    """`benchmarks/startup_transformer.py`: an equinox transformer's training and eval
    steps, their first step above import + loading, JAX's persistent cache alone against
    warm start with it (and without, but for ``--quick``)."""
    rounds = 1 if quick else 5
    measured = [
        _startup_round(TRANSFORMER, i, (), cold=False, uncached=not quick) for i in range(rounds)
    ]
    names = [CACHE, WARM_CACHE] if quick else [CACHE, WARM_CACHE, WARM]
    row = _row(
        "first step above import + loading: equinox transformer (4 layers, 237k params)"
        " + adamw, train and eval steps (tinax: warm start + cache)",
        CACHE,
        _times(measured, names, WARM_CACHE),
        0.5,
        rounds,
    )
    row.notes = _notes(measured, names, (WARM_CACHE, CACHE))
    return [row]


PER_CPU, EVERY = "warm start, a worker per CPU", "every length compiled first"
COLD_FIRST, WARM_FIRST = "cold, the length ranked first", "warm start, the length ranked first"


def _lengths_round(index: int, small: tuple[str, ...], names: list[str]) -> Round:
    """One round: a run that records every length, then each contender of ``names``, in
    an order that alternates from round to round."""
    with tempfile.TemporaryDirectory(prefix="tinax-lengths-") as folder:
        recorded = os.path.join(folder, "recorded.json")
        _phases(LENGTHS, *small, "--record", "--signatures", recorded)

        def warm(name: str, *more: str) -> Phases:
            return _phases(LENGTHS, *small, *_copy(recorded, f"{folder}/{name}.json"), *more)

        runs: list[tuple[str, Callable[[], Phases]]] = [
            (COLD, lambda: _phases(LENGTHS, *small)),
            ("tinax", lambda: warm("a")),
            (PER_CPU, lambda: warm("b", "--workers", str(os.cpu_count() or 1))),
            (EVERY, lambda: _phases(LENGTHS, *small, "--every")),
            (COLD_FIRST, lambda: _phases(LENGTHS, *small, "--length", "16")),
            (WARM_FIRST, lambda: warm("c", "--length", "16")),
        ]
        return _alternating(index, [(name, run) for name, run in runs if name in names])


def lengths_rows(quick: bool) -> list[Row]:
    """`benchmarks/startup_lengths.py`: one function with 6 recorded lengths, built just
    before its first call, which uses the length ranked last (512): its latency cold,
    warm (the call waits for its own executable, or compiles it where no worker has
    begun it), warm with a worker per CPU (0.4.0's default; now one fewer), and with
    every length compiled first (`precompile_buckets`, what a first call waiting for
    all of them would cost); and
    a call of the length ranked first (16), whose compile a worker begins at once, cold
    and warm (their ratio is in the notes: the row's baseline is the other length's).
    ``--quick``: 3 lengths; cold, warm and every length first."""
    rounds = 1 if quick else 5
    small = ("--lengths", "3") if quick else ()
    names = [COLD, "tinax", EVERY]
    if not quick:
        names = [COLD, "tinax", PER_CPU, EVERY, COLD_FIRST, WARM_FIRST]
    measured = [_lengths_round(index, small, names) for index in range(rounds)]
    row = _row(
        "first call, 6 recorded lengths, built just before it, calling the one ranked last"
        " (tinax: warm start, no cache)",
        COLD,
        {n: [runs[n]["first_call"] for runs in measured] for n in names},
        1.0,
        rounds,
    )

    def notes(_: Row) -> list[str]:
        parts = ", ".join(
            f"{n} trace {_median(measured, n, 'trace'):.3f} + lower"
            f" {_median(measured, n, 'lower'):.3f} + compile"
            f" {_median(measured, n, 'compile'):.3f} s"
            f" (compiles_used {_median(measured, n, 'compiles_used'):g})"
            for n in names
        )
        lines = [f"  first call, main thread (JAX's events, medians): {parts}"]
        if WARM_FIRST in names:
            first = [r[WARM_FIRST]["first_call"] / r[COLD_FIRST]["first_call"] for r in measured]
            lines.append(
                f"  the length ranked first, warm / cold: median {statistics.median(first):.2f},"
                f" rounds {min(first):.2f} to {max(first):.2f}"
            )
        return lines

    row.notes = notes
    return [row]
