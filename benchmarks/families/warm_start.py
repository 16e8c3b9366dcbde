"""Warm start: a program's start-up to its first step, each run a fresh process.

Two programs: `benchmarks/startup.py` (8 budgeted functions of 300 operations, a
second of loading) and `benchmarks/startup_transformer.py` (an equinox transformer's
training and eval steps, whose tracing and lowering take longer than its loading).
Each prints its phases (``import``, ``loading``, ``first_step``, ``total``).

What warm start can save is above the floor that no start-up skips, JAX's import
and the program's loading: the rows time the first step **above import +
loading**, ``total - import - loading``, where ``loading`` is the loading of the
round's run with JAX's persistent cache alone (no background work). Warm start's
compiles run while the program loads; where they slow the loading down (a loading
that runs Python, as building a model does), that slowdown counts against it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable

from harness import HERE, Row

STARTUP = HERE / "startup.py"
TRANSFORMER = HERE / "startup_transformer.py"

Phases = dict[str, float]  # import, loading, first_step, total (seconds)


def _phases(program: object, *options: str) -> Phases:
    """The phases a fresh process of ``program`` printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINAX_", "XLA_FLAGS"))}
    command = [sys.executable, str(program), *options]
    result = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    words = result.stdout.split("\n")[-2].split()
    return {name: float(value) for name, value in zip(words[::2], words[1::2], strict=True)}


def _round(program: object, index: int, *, cold: bool, recording: bool) -> dict[str, Phases]:
    """One round: each way of starting, primed where it needs a cache or signatures.
    The cache-alone and warm runs alternate their order from round to round."""
    with tempfile.TemporaryDirectory(prefix="tinax-startup-") as folder:
        cache = ("--cache", os.path.join(folder, "cache"))
        warm = ("--signatures", os.path.join(folder, "signatures.json"))
        runs: dict[str, Phases] = {}
        if cold and recording:  # A B B A: a drift of the machine over the round cancels
            # no signatures yet: a cold run that records them, timing its recording
            record = ("--signatures", f"{folder}/recorded.json", "--measure-recording")
            first, second = _phases(program), _phases(program, *record)
            os.remove(record[1])
            third, fourth = _phases(program, *record), _phases(program)
            runs["cold"] = first
            runs["cold, twice"] = _sum(first, fourth)
            runs["cold, recording, twice"] = _sum(second, third)
        elif cold:
            runs["cold"] = _phases(program)
        _phases(program, *cache, *warm)  # primes the cache and the signatures
        pair = [("cache alone", cache), ("warm start + cache", (*cache, *warm))]
        for name, options in pair if index % 2 == 0 else reversed(pair):
            runs[name] = _phases(program, *options)
        runs["warm start, no cache"] = _phases(program, *warm)
    return runs


def _sum(one: Phases, other: Phases) -> Phases:
    return {phase: one[phase] + other[phase] for phase in one}


def _measure(
    program: object, rounds: int, *, cold: bool, recording: bool
) -> list[dict[str, Phases]]:
    return [_round(program, i, cold=cold, recording=recording) for i in range(rounds)]


def _above_floor(runs: dict[str, Phases], name: str) -> float:
    """Seconds of ``name``'s start-up above its import and an undisturbed loading (the
    round's cache-alone run's)."""
    return runs[name]["total"] - runs[name]["import"] - runs["cache alone"]["loading"]


def _row(
    name: str, baseline: str, times: dict[str, list[float]], target: float, rounds: int
) -> Row:
    made = Row(name, baseline, {n: lambda: lambda: None for n in times}, target=target)
    made.times, made.rounds, made.measured = times, rounds, True
    return made


def _notes(measured: list[dict[str, Phases]], names: list[str]) -> Callable[[Row], list[str]]:
    def median(name: str, phase: str) -> float:
        return statistics.median(runs[name][phase] for runs in measured)

    def notes(_: Row) -> list[str]:
        phases = ", ".join(
            f"{n} {median(n, 'import'):.2f} + {median(n, 'loading'):.2f}"
            f" + {median(n, 'first_step'):.2f} = {median(n, 'total'):.2f} s"
            for n in names
        )
        own = [
            (runs["warm start + cache"]["first_step"]) / runs["cache alone"]["first_step"]
            for runs in measured
        ]
        whole = [
            runs["warm start + cache"]["total"] / runs["cache alone"]["total"] for runs in measured
        ]
        return [
            f"  phases (import + loading + first step = total, medians): {phases}",
            f"  warm/cache, each run less its own loading: {statistics.median(own):.2f};"
            f" from the program's first line: {statistics.median(whole):.2f}",
        ]

    return notes


def startup_rows(quick: bool) -> list[Row]:
    """`benchmarks/startup.py`: the first step above import + loading, cold, JAX's
    persistent cache alone, warm start with and without it; and what recording costs a
    cold run (from the end of the import, where recording starts)."""
    rounds = 1 if quick else 5
    measured = _measure(STARTUP, rounds, cold=True, recording=True)
    names = ["cache alone", "warm start + cache", "warm start, no cache", "cold"]
    times = {
        (n if n != "warm start + cache" else "tinax"): [_above_floor(r, n) for r in measured]
        for n in names
    }
    starts = _row(
        "first step above import + loading: 8 functions x 300 ops, 1 s of loading"
        " (tinax: warm start + cache)",
        "cache alone",
        times,
        0.5,
        rounds,
    )
    starts.notes = _notes(measured, names)

    # Recording runs after the import (`tinax.warm_start` is called in `main`), so both
    # measures start there. The row: a recording run's import to first step against the
    # same less recording's own CPU time (the program measures it: `--measure-recording`),
    # exact where the end-to-end comparison, in the notes, is noise-bound (its rounds
    # range over 15 % here; each is two pairs, A B B A, summed).
    def after_import(run: Phases) -> float:
        return run["total"] - run["import"]

    recording_runs = [runs["cold, recording, twice"] for runs in measured]
    recording = _row(
        "import to first step, cold: tinax recording its signatures, against its own CPU time",
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
            after_import(runs["cold, recording, twice"]) / after_import(runs["cold, twice"])
            for runs in measured
        ]
        spent = statistics.median(r["recording"] / 2 for r in recording_runs)
        return [
            f"  recording's CPU time per run (median): {spent * 1000:.1f} ms",
            f"  end to end, against runs that do not record (A B B A): median"
            f" {statistics.median(ratios):.3f}, rounds {min(ratios):.3f} to {max(ratios):.3f}",
        ]

    recording.notes = recording_notes
    return [starts, recording]


def transformer_rows(quick: bool) -> list[Row]:
    """`benchmarks/startup_transformer.py`: an equinox transformer's training and eval
    steps, their first step above import + loading, JAX's persistent cache alone against
    warm start with it (and without)."""
    rounds = 1 if quick else 5
    measured = _measure(TRANSFORMER, rounds, cold=False, recording=False)
    names = ["cache alone", "warm start + cache", "warm start, no cache"]
    times = {
        (n if n != "warm start + cache" else "tinax"): [_above_floor(r, n) for r in measured]
        for n in names
    }
    row = _row(
        "first step above import + loading: equinox transformer (4 layers, 237k params)"
        " + adamw, train and eval steps (tinax: warm start + cache)",
        "cache alone",
        times,
        0.5,
        rounds,
    )
    row.notes = _notes(measured, names)
    return [row]
