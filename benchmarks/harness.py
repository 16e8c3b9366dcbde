"""What every benchmark row shares: the `Row` that times contenders side by side, small
functions and meshes several families use, the report and the row's record (the data
that `results.py` makes the table and the chart from)."""

from __future__ import annotations

import gc
import operator
import pathlib
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp

HERE = pathlib.Path(__file__).resolve().parent


# A contender: a setup run outside the clock that returns the timed action.
Setup = Callable[[], Callable[[], object]]


@dataclass
class Row:
    """One benchmark row: a baseline and the contenders compared with it."""

    name: str
    baseline: str
    contenders: dict[str, Setup]
    target: float | None = None  # the highest acceptable median ratio for "tinax"
    rounds: int = 21
    repeat: int = 5  # per round, each contender's best of this many runs
    calls: int = 1  # calls per timed action: times are reported per call
    times: dict[str, list[float]] = field(default_factory=dict)
    notes: Callable[[Row], list[str]] | None = None  # extra lines for the report
    unit: str = "s"  # what times measure; "MiB" for the memory row
    measured: bool = False  # times filled in by the row itself (fresh processes)
    # Other contenders tinax is held to, with the target of its median per-round ratio to
    # each (None: the ratio is given, no target): e.g. {"equinox.filter_jit": 0.5}.
    against: dict[str, float | None] = field(default_factory=dict)

    def run(self, rounds: int, repeat: int) -> None:
        self.times = {name: [] for name in self.contenders}
        order = list(self.contenders)
        for _ in range(rounds):
            # Within a round, contenders alternate run by run (A B B A A B ...) and each
            # keeps its best run: this machine's speed drifts over ~0.1 s, so only
            # neighbouring runs compare fairly.
            best = dict.fromkeys(order, float("inf"))
            gc.collect()
            gc.disable()  # as timeit does: a collection must not land in one contender's time
            try:
                for index in range(repeat):
                    for name in order if index % 2 == 0 else reversed(order):
                        best[name] = min(best[name], self._time_once(name))
            finally:
                gc.enable()
            for name in order:
                self.times[name].append(best[name] / self.calls)

    def _time_once(self, name: str) -> float:
        action = self.contenders[name]()
        start = time.perf_counter()
        action()
        return time.perf_counter() - start

    def ratios(self, name: str) -> list[float]:
        base = self.times[self.baseline]
        return [mine / theirs for mine, theirs in zip(self.times[name], base, strict=True)]


def fresh_tiny() -> Callable[[jax.Array], jax.Array]:
    """A new tiny function each time: JAX caches traces per function."""

    def tiny(v: jax.Array) -> jax.Array:
        return v * 2.0 + 1.0

    return tiny


def repeated(call: Callable[[], jax.Array], count: int) -> Callable[[], object]:
    """``count`` calls, then a wait for the last result: dispatch and run, as a loop does."""

    def action() -> object:
        out = call()
        for _ in range(count - 1):
            out = call()
        return out.block_until_ready()

    return action


def mesh8() -> jax.sharding.Mesh:
    return jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))


def tiny_step(v: jax.Array) -> jax.Array:
    return v * 2.0 + 1.0


def two_hundred_ops() -> Callable[[jax.Array], jax.Array]:
    """A new 200-op function each time (a fresh function misses every JAX cache)."""

    def chain(v: jax.Array) -> jax.Array:
        for i in range(50):
            v = jnp.sin(v) * (1.0 + i) + jnp.cos(v) - v
        return v

    return chain


class Floor:
    """The least any Python object forwarding to a `jax.jit` object can cost: its
    ``__call__`` a property returning that object, as tinax's is (no Python frame)."""

    def __init__(self, jitted: Callable[..., jax.Array]) -> None:
        self._call = jitted

    __call__ = property(operator.attrgetter("_call"))


def ratios_of(row: Row, name: str, baseline: str) -> list[float]:
    return [a / b for a, b in zip(row.times[name], row.times[baseline], strict=True)]


def _shown(row: Row, value: float) -> str:
    if row.unit != "s":
        return f"{value:10.2f} {row.unit}"
    return f"{value * 1e3:10.3f} ms" if value > 1e-3 else f"{value * 1e6:10.1f} us"


def summary(row: Row, name: str) -> tuple[str, float, float, float, str]:
    """A contender's median time (shown), median/min/max ratio, and verdict on the target."""
    ratios = row.ratios(name)
    median = statistics.median(ratios)
    verdict = ""
    if name == "tinax" and row.target is not None:
        verdict = f"target <= {row.target:.2f}: {'met' if median <= row.target else 'MISSED'}"
    shown = _shown(row, statistics.median(row.times[name])).strip()
    return shown, median, min(ratios), max(ratios), verdict


def against_ratios(row: Row) -> list[tuple[str, float, float | None]]:
    """``(contender, tinax's median per-round ratio to it, target)`` for each contender of
    ``row.against`` that was timed."""
    return [
        (name, statistics.median(ratios_of(row, "tinax", name)), target)
        for name, target in row.against.items()
        if name in row.times and "tinax" in row.times
    ]


def report(row: Row) -> list[str]:
    rounds = len(row.times[row.baseline])
    lines = [f"{row.name}  (baseline: {row.baseline}, {rounds} rounds)"]
    for name in row.contenders:
        shown, median, low, high, verdict = summary(row, name)
        lines.append(
            f"  {name:<20} {shown:>12}   ratio {median:.3f} (min {low:.3f}, max {high:.3f})"
            f"  {verdict}".rstrip()
        )
    for name, ratio, target in against_ratios(row):
        verdict = ""
        if target is not None:
            verdict = f" (target <= {target:.2f}: {'met' if ratio <= target else 'MISSED'})"
        lines.append(f"  tinax / {name}: {ratio:.3f}{verdict}")
    if row.notes is not None:
        lines.extend(row.notes(row))
    return lines


def record(row: Row, row_id: str, **run: object) -> dict[str, object]:
    """The data of a timed row (see `results.py`): ``row_id`` names it, ``run`` gives what
    is known of the run (date, tinax's version, quick)."""
    contenders = []
    for name in row.contenders:
        ratios = row.ratios(name)
        contenders.append(
            {
                "name": name,
                "median": float(f"{statistics.median(row.times[name]):.6g}"),
                "ratio": round(statistics.median(ratios), 6),
                "min": round(min(ratios), 6),
                "max": round(max(ratios), 6),
            }
        )
    return {
        "id": row_id,
        "name": row.name,
        **run,
        "rounds": len(row.times[row.baseline]),
        "unit": row.unit,
        "baseline": row.baseline,
        "target": row.target,
        "contenders": contenders,
        "against": [
            {"contender": name, "ratio": round(ratio, 6), "target": target}
            for name, ratio, target in against_ratios(row)
        ],
        "notes": row.notes(row) if row.notes is not None else [],
    }
