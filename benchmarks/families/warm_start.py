"""Warm start: a program's start-up to its first step, each run a fresh process
(`benchmarks/startup.py`)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

from harness import HERE, Row

STARTUP = HERE / "startup.py"


_AFTER_IMPORTS: dict[str, list[float]] = {}  # the same runs, from after `import jax, tinax`


def _startup_seconds(*options: str, name: str = "") -> float:
    """Seconds from the first line of `benchmarks/startup.py` to its first step done (and,
    under ``name``, from after its imports)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINAX_", "XLA_FLAGS"))}
    command = [sys.executable, str(STARTUP), *options]
    result = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    from_start, after_imports = (float(part) for part in result.stdout.split()[-2:])
    if name:
        _AFTER_IMPORTS.setdefault(name, []).append(after_imports)
    return from_start


def _startup_round() -> dict[str, float]:
    """One round: each way of starting, primed where it needs a cache or signatures."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tinax-startup-") as folder:
        cache = ("--cache", os.path.join(folder, "cache"))
        warm = ("--signatures", os.path.join(folder, "signatures.json"))
        recording = ("--signatures", os.path.join(folder, "recorded.json"))
        times = {"cold": _startup_seconds(name="cold")}
        # no signatures yet: a cold run that records them
        times["cold, recording"] = _startup_seconds(*recording, name="tinax")
        _startup_seconds(*cache, *warm)  # primes the cache and the signatures
        times["cache alone"] = _startup_seconds(*cache, name="cache alone")
        times["warm start + cache"] = _startup_seconds(*cache, *warm, name="warm start + cache")
        times["warm start, no cache"] = _startup_seconds(*warm, name="warm start, no cache")
    return times


def startup_rows(quick: bool) -> list[Row]:
    """Time to the first step of a program with 8 budgeted functions and 1 s of other
    start-up work: cold, JAX's persistent cache alone, warm start with and without it;
    and what recording costs a cold run. Each run a fresh process."""
    rounds = 1 if quick else 5
    measured: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, seconds in _startup_round().items():
            measured.setdefault(name, []).append(seconds)

    def row(name: str, baseline: str, times: dict[str, list[float]], target: float) -> Row:
        made = Row(name, baseline, {n: lambda: lambda: None for n in times}, target=target)
        made.times, made.rounds, made.measured = times, rounds, True
        return made

    starts = row(
        "start to first step: 8 functions x 300 ops, 1 s of loading (tinax: warm start + cache)",
        "cache alone",
        {
            "cache alone": measured["cache alone"],
            "tinax": measured["warm start + cache"],
            "warm start, no cache": measured["warm start, no cache"],
            "cold": measured["cold"],
        },
        0.5,
    )

    def after_imports(_: Row) -> list[str]:
        names = ["cache alone", "warm start + cache", "warm start, no cache", "cold"]
        medians = {n: statistics.median(_AFTER_IMPORTS[n]) for n in names}
        shown = ", ".join(f"{n} {medians[n]:.2f} s" for n in names)
        ratio = medians["warm start + cache"] / medians["cache alone"]
        return [f"  from after the imports (1 s of it loading): {shown}; warm/cache {ratio:.2f}"]

    starts.notes = after_imports
    recording = row(
        "start to first step, cold: tinax recording its signatures vs not",
        "cold",
        {"cold": measured["cold"], "tinax": measured["cold, recording"]},
        1.01,
    )
    return [starts, recording]
