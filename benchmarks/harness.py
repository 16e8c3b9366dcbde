"""What every benchmark row shares: the `Row` that times contenders side by side, small
functions and meshes several families use, and the report, table and chart."""

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


def report(row: Row) -> list[str]:
    rounds = len(row.times[row.baseline])
    lines = [f"{row.name}  (baseline: {row.baseline}, {rounds} rounds)"]
    for name in row.contenders:
        shown, median, low, high, verdict = summary(row, name)
        lines.append(
            f"  {name:<20} {shown:>12}   ratio {median:.3f} (min {low:.3f}, max {high:.3f})"
            f"  {verdict}".rstrip()
        )
    if row.notes is not None:
        lines.extend(row.notes(row))
    return lines


TABLE_HEADER = "| row | contender | median | ratio (median) | min | max | target |"


def markdown_table(rows: list[Row]) -> str:
    lines = [TABLE_HEADER, "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for row in rows:
        for name in row.contenders:
            shown, median, low, high, verdict = summary(row, name)
            target = verdict.removeprefix("target ").replace("MISSED", "missed")
            lines.append(
                f"| {row.name} | {name} | {shown} | {median:.3f} | {low:.3f} | {high:.3f}"
                f" | {target} |"
            )
    return "\n".join(lines)


@dataclass(frozen=True)
class Bar:
    """One bar of the chart: a contender's ratio to its row's baseline."""

    row: str
    contender: str
    baseline: str
    median: float
    low: float  # the least per-round ratio
    high: float  # the greatest


def chart(rows: list[Row], path: pathlib.Path) -> None:
    """The chart of ``rows`` (see `draw`)."""
    bars: list[Bar] = []
    for row in rows:
        for name in row.contenders:
            if name != row.baseline:
                ratios = row.ratios(name)
                median = statistics.median(ratios)
                bars.append(Bar(row.name, name, row.baseline, median, min(ratios), max(ratios)))
    draw(bars, path)


LABEL_WIDTH = 64  # characters per line of a bar's label; longer row names wrap


def draw(bars: list[Bar], path: pathlib.Path) -> None:
    """A bar per contender (ratio to the row's baseline, log scale), whiskers from min to
    max, its median written beside it; tinax blue, other contenders grey, the rows'
    groups on alternating backgrounds. Labels wrap, and the figure grows to hold them."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [
        textwrap.fill(bar.row, LABEL_WIDTH) + f"\n{bar.contender} vs {bar.baseline}" for bar in bars
    ]
    pitch = 0.14 * max(label.count("\n") + 1 for label in labels) + 0.12  # inches per bar
    figure, axes = plt.subplots(figsize=(12, pitch * len(bars) + 1.2))
    positions = list(range(len(bars)))[::-1]
    medians = [bar.median for bar in bars]
    error = [[b.median - b.low for b in bars], [b.high - b.median for b in bars]]
    colors = ["tab:blue" if bar.contender == "tinax" else "tab:gray" for bar in bars]
    group, previous = 0, None
    for position, bar in zip(positions, bars, strict=True):
        group += bar.row != previous
        previous = bar.row
        if group % 2 == 0:
            axes.axhspan(position - 0.5, position + 0.5, color="0.93", zorder=0)
    axes.barh(positions, medians, xerr=error, color=colors, capsize=3, zorder=2)
    for position, bar in zip(positions, bars, strict=True):
        axes.annotate(
            f"{bar.median:.2f}",
            (max(bar.high, bar.median), position),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=6,
        )
    axes.axvline(1.0, color="black", linewidth=0.8, zorder=3)
    axes.set_yticks(positions, labels, fontsize=7)
    axes.set_ylim(-0.5, len(bars) - 0.5)
    axes.set_xscale("log")
    reach = min(bar.low for bar in bars), max(bar.high for bar in bars)
    steps = (0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
    ticks = [t for t in steps if reach[0] < t * 2 and t / 2 < reach[1]]
    axes.set_xticks(ticks, [f"{t:g}" for t in ticks])
    axes.set_xlabel("time (memory) relative to the row's baseline; median, whiskers min to max")
    axes.set_title("tinax benchmarks (blue: tinax; grey: other contenders)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")  # every label whole, however long
    plt.close(figure)
