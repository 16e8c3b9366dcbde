"""tinax benchmarks: each row times tinax against its contenders, side by side.

Run from the repository root:  python benchmarks/run.py [--quick] [ROW ...]

Every row runs its contenders in one process, interleaved in alternating
rounds (so a noisy neighbour slows both alike), and reports per contender the
median time and the median, min and max of its per-round ratio to the
baseline. ``--quick`` runs few rounds: it checks that the rows still execute,
not their timings.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

from tinax._src import signature
from tinax.jit import batched_jit, bounded_jit

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

    def run(self, rounds: int) -> None:
        self.times = {name: [] for name in self.contenders}
        order = list(self.contenders)
        for _ in range(rounds):
            # Within a round, contenders alternate run by run (A B B A A B ...) and each
            # keeps its best run: this machine's speed drifts over ~0.1 s, so only
            # neighbouring runs compare fairly.
            best = dict.fromkeys(order, float("inf"))
            for index in range(self.repeat):
                for name in order if index % 2 == 0 else reversed(order):
                    best[name] = min(best[name], self._time_once(name))
            for name in order:
                self.times[name].append(best[name] / self.calls)

    def _time_once(self, name: str) -> float:
        action = self.contenders[name]()
        gc.collect()
        gc.disable()  # as timeit does: a collection must not land in one contender's time
        try:
            start = time.perf_counter()
            action()
            return time.perf_counter() - start
        finally:
            gc.enable()

    def ratios(self, name: str) -> list[float]:
        base = self.times[self.baseline]
        return [mine / theirs for mine, theirs in zip(self.times[name], base, strict=True)]


def _tree_of_leaves(count: int) -> dict[str, dict[str, jax.Array]]:
    return {f"layer{i:03}": {"w": jnp.ones((2,)), "b": jnp.ones(())} for i in range(count // 2)}


def _fresh_function() -> Callable[[dict[str, dict[str, jax.Array]]], object]:
    """A new function object each time: JAX caches traces per function."""

    def scale(params: dict[str, dict[str, jax.Array]]) -> object:
        return jax.tree.map(lambda leaf: leaf * 2.0, params)

    return scale


def recording_row() -> Row:
    """Trace time with signature recording, on a function of 1,000 array leaves."""
    tree = _tree_of_leaves(1000)

    def raw() -> Callable[[], object]:
        jitted = jax.jit(_fresh_function())
        return lambda: jitted.trace(tree)

    def tinax() -> Callable[[], object]:
        bounded = bounded_jit(_fresh_function(), max_traces=1)
        return lambda: bounded.trace(tree)

    def recording_alone(row: Row) -> list[str]:
        # The part of tinax's trace that is recording, timed alone (best of 50) inside a
        # trace of the same tree: a steadier figure than the side-by-side ratio.
        best = [float("inf")]

        def measure(params: object) -> object:
            for _ in range(50):
                start = time.perf_counter()
                signature.record(None, (), (params,), {})
                best[0] = min(best[0], time.perf_counter() - start)
            return params

        jax.make_jaxpr(measure)(tree)
        trace = statistics.median(row.times["jax.jit"])
        share = best[0] / trace
        return [f"  recording alone: {best[0] * 1e3:.3f} ms = {share:.1%} of a jax.jit trace"]

    return Row(
        "trace 1,000 leaves: recording cost",
        baseline="jax.jit",
        contenders={"jax.jit": raw, "tinax": tinax},
        target=1.05,
        notes=recording_alone,
    )


def repeated(call: Callable[[], jax.Array], count: int) -> Callable[[], object]:
    """``count`` calls, then a wait for the last result: dispatch and run, as a loop does."""

    def action() -> object:
        out = call()
        for _ in range(count - 1):
            out = call()
        return out.block_until_ready()

    return action


def _mesh8() -> jax.sharding.Mesh:
    return jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))


def _per_example(w: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.tanh(x @ w).sum()


def batched_mesh_row() -> Row:
    """batched_jit on an 8-device mesh, pre-sharded batch, vs the idioms it replaces."""
    mesh, count = _mesh8(), 50
    w = jnp.ones((3, 4))
    x = jax.device_put(jnp.ones((64, 3)), NamedSharding(mesh, PartitionSpec("x")))
    x_pmap = jax.pmap(lambda v: v)(jnp.ones((8, 8, 3)))  # already laid out for pmap
    by_hand = jax.jit(jax.vmap(_per_example, in_axes=(None, 0)))
    ours = batched_jit(_per_example, in_axes=(None, 0), max_traces=1, mesh=mesh)
    pmapped = jax.pmap(jax.vmap(_per_example, in_axes=(None, 0)), in_axes=(None, 0))

    def hand_written() -> jax.Array:
        with jax.set_mesh(mesh):
            return by_hand(w, x)

    return Row(
        "batched_jit, 8-device mesh, pre-sharded batch of 64",
        baseline="set_mesh+jit(vmap)",
        contenders={
            "set_mesh+jit(vmap)": lambda: repeated(hand_written, count),
            "tinax": lambda: repeated(lambda: ours(w, x), count),
            "jax.pmap": lambda: repeated(lambda: pmapped(w, x_pmap), count),
        },
        target=1.03,
        calls=count,
    )


def _mesh_call_row(inside: bool) -> Row:
    mesh, count = _mesh8(), 50
    x = jax.device_put(jnp.ones(8), NamedSharding(mesh, PartitionSpec("x")))
    jitted = jax.jit(lambda v: v * 2.0)
    ours = bounded_jit(lambda v: v * 2.0, max_traces=1, mesh=mesh)

    def hand_written() -> jax.Array:
        with jax.set_mesh(mesh):
            return jitted(x)

    def timed(call: Callable[[], jax.Array]) -> Setup:
        loop = repeated(call, count)
        if not inside:
            return lambda: loop

        def under_ambient_mesh() -> object:
            with jax.set_mesh(mesh):
                return loop()

        return lambda: under_ambient_mesh

    where = "inside an ambient set_mesh(mesh)" if inside else "from outside any mesh"
    return Row(
        f"mesh-bound call, {where}",
        baseline="set_mesh+jit",
        contenders={"set_mesh+jit": timed(hand_written), "tinax": timed(lambda: ours(x))},
        target=1.05,
        calls=count,
    )


ROWS: dict[str, Callable[[], Row]] = {
    "recording": recording_row,
    "batched-mesh": batched_mesh_row,
    "mesh-outside": lambda: _mesh_call_row(inside=False),
    "mesh-inside": lambda: _mesh_call_row(inside=True),
}


def report(row: Row) -> list[str]:
    lines = [f"{row.name}  (baseline: {row.baseline}, {len(row.times[row.baseline])} rounds)"]
    for name in row.contenders:
        median_time = statistics.median(row.times[name])
        ratios = row.ratios(name)
        verdict = ""
        if name == "tinax" and row.target is not None:
            median = statistics.median(ratios)
            verdict = f"  target <= {row.target:.2f}: {'met' if median <= row.target else 'MISSED'}"
        shown = (
            f"{median_time * 1e3:10.3f} ms"
            if median_time > 1e-3
            else f"{median_time * 1e6:10.1f} us"
        )
        lines.append(
            f"  {name:<20} {shown}   ratio {statistics.median(ratios):.3f}"
            f" (min {min(ratios):.3f}, max {max(ratios):.3f}){verdict}"
        )
    if row.notes is not None:
        lines.extend(row.notes(row))
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="*", help=f"rows to run, of {', '.join(ROWS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="3 rounds: check that rows execute")
    options = parser.parse_args(argv)
    unknown = [key for key in options.rows if key not in ROWS]
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {list(ROWS)}")
    for key in options.rows or list(ROWS):
        row = ROWS[key]()
        row.run(3 if options.quick else row.rounds)
        print("\n".join(report(row)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
