"""Dispatch: what a cached call costs (plain, batched, with options), and what tinax's
trace-time bookkeeping (recording, call sites, timings) costs a trace."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import chex
import jax
import jax.numpy as jnp
from harness import (
    Floor,
    Row,
    Setup,
    fresh_tiny,
    mesh8,
    ratios_of,
    repeated,
    tiny_step,
    two_hundred_ops,
)
from jax.sharding import NamedSharding, PartitionSpec

from tinax._src import private
from tinax._src.budget import counting
from tinax._src.core.statics import Statics
from tinax._src.diagnosis import record
from tinax._src.observe import compile_events, rebuilt, sites, trace_reports
from tinax.jit import batched_jit, bounded_jit


def _tree_of_leaves(count: int) -> dict[str, dict[str, jax.Array]]:
    return {f"layer{i:03}": {"w": jnp.ones((2,)), "b": jnp.ones(())} for i in range(count // 2)}


def _fresh_function() -> Callable[[dict[str, dict[str, jax.Array]]], object]:
    """A new function object each time: JAX caches traces per function."""

    def scale(params: dict[str, dict[str, jax.Array]]) -> object:
        return jax.tree.map(lambda leaf: leaf * 2.0, params)

    return scale


@dataclass(frozen=True)
class _Config:
    """A static argument kept by value in the recorded signature."""

    name: str = "digits-mlp-baseline-experiment-2024"
    activation: str = "relu"


def _fresh_static_function() -> Callable[..., object]:
    """A new function of a tree and a static config each time."""

    def scale(params: dict[str, dict[str, jax.Array]], config: _Config) -> object:
        return jax.tree.map(lambda leaf: leaf * 2.0, params)

    return scale


def recording_row() -> Row:
    """Trace time with signature recording, on a function of 1,000 array leaves and a
    static config (kept by value)."""
    tree = _tree_of_leaves(1000)
    config = _Config()

    def raw() -> Callable[[], object]:
        jitted = jax.jit(_fresh_static_function(), static_argnames="config")
        return lambda: jitted.trace(tree, config=config)

    def tinax() -> Callable[[], object]:
        bounded = bounded_jit(_fresh_static_function(), max_traces=1, static_argnames="config")
        return lambda: bounded.trace(tree, config=config)

    def recording_alone(row: Row) -> list[str]:
        # The part of tinax's trace that is recording, timed alone (best of 50) inside a
        # trace of the same tree: a steadier figure than the side-by-side ratio.
        best = [float("inf")]

        def measure(params: object) -> object:
            for _ in range(50):
                start = time.perf_counter()
                record.record(None, Statics((), ("config",)), (params,), {"config": config})
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


_ORIGINALS: dict[str, Any] = {}


def _bookkeeping(on: bool) -> None:
    """Turns the per-trace bookkeeping (call site, trace timing, the
    rebuilt-wrapper check, the nesting check and the compile-time listener, the
    check whether a record is wanted) on or off.

    Each contender of the row calls it before every run (four assignments either way;
    the listener moves only when the state changes, which alternating runs share).
    """
    if not _ORIGINALS:
        _ORIGINALS.update(
            call_site=sites.call_site,
            check_rebuilt=rebuilt.check_rebuilt,
            committed=trace_reports.committed,
            staged_out=private.staged_out,
            time=counting.time,
            on=True,
        )
    sites.call_site = _ORIGINALS["call_site"] if on else lambda: (None, False)
    rebuilt.check_rebuilt = _ORIGINALS["check_rebuilt"] if on else lambda *args: None
    trace_reports.committed = _ORIGINALS["committed"] if on else lambda *args: None
    private.staged_out = _ORIGINALS["staged_out"] if on else lambda: False
    counting.time = _ORIGINALS["time"] if on else _NO_CLOCK
    if _ORIGINALS["on"] != on:
        listener = compile_events._on_duration  # pyright: ignore[reportPrivateUsage]
        if on:
            jax.monitoring.register_event_duration_secs_listener(listener)
        else:
            jax.monitoring.unregister_event_duration_listener(listener)
        _ORIGINALS["on"] = on


class _NoClock:
    @staticmethod
    def perf_counter() -> float:
        return 0.0


_NO_CLOCK: Any = _NoClock()


def bookkeeping_row(tiny: bool) -> Row:
    """Trace time with and without the per-trace bookkeeping (logging off): the 200-op
    function of the first-call row, or (worst case, no target) a two-op function."""
    x = jnp.ones(3, jnp.float32)
    fresh = fresh_tiny if tiny else two_hundred_ops

    def contender(on: bool) -> Setup:
        def setup() -> Callable[[], object]:
            bounded = bounded_jit(fresh(), max_traces=1)

            def action() -> object:
                _bookkeeping(on)
                return bounded.trace(x)

            return action

        return setup

    def overhead(row: Row) -> list[str]:
        _bookkeeping(True)  # as it was, for the rows after this one
        on, off = (statistics.median(row.times[name]) for name in ("tinax", "bookkeeping off"))
        return [f"  bookkeeping per trace: {(on - off) * 1e6:.1f} us (difference of medians)"]

    what = "a two-op function (worst case)" if tiny else "200 ops"
    return Row(
        f"trace {what}: call site, timing, checks (logging off)",
        baseline="bookkeeping off",
        contenders={"bookkeeping off": contender(False), "tinax": contender(True)},
        target=None if tiny else 1.02,
        rounds=31 if tiny else 21,
        repeat=9 if tiny else 5,
        notes=overhead,
    )


def dispatch_row(quick: bool) -> Row:
    """Per-call dispatch on a tiny f32 input, no mesh: tinax and the alternatives."""
    count = 50  # short runs, many of them: the machine's speed drifts within a second
    x = jnp.ones(3, jnp.float32)
    contenders: dict[str, Setup] = {}
    raw = jax.jit(tiny_step)
    ours = bounded_jit(tiny_step, max_traces=1)
    chexed = jax.jit(chex.assert_max_traces(tiny_step, n=1))
    contenders["jax.jit"] = lambda: repeated(lambda: raw(x), count)
    contenders["tinax"] = lambda: repeated(lambda: ours(x), count)
    contenders["chex+jax.jit"] = lambda: repeated(lambda: chexed(x), count)
    missing: list[str] = []
    try:
        import equinox

        filtered = equinox.filter_jit(tiny_step)
        contenders["equinox.filter_jit"] = lambda: repeated(lambda: filtered(x), count)
    except ImportError:
        missing.append("equinox")
    try:
        from flax import nnx

        nnx_jitted = nnx.jit(tiny_step)
        contenders["flax.nnx.jit"] = lambda: repeated(lambda: nnx_jitted(x), count)
    except ImportError:
        missing.append("flax")
    notes = None
    if missing:
        text = f"  not measured: {', '.join(missing)} (pip install -e '.[bench]')"
        notes = lambda row: [text]  # noqa: E731
    return Row(
        "dispatch, tiny f32, no mesh",
        "jax.jit",
        contenders,
        target=1.03,
        calls=count,
        repeat=15,
        notes=notes,
    )


def batched_row(quick: bool) -> Row:
    """batched_jit against the jax.jit(jax.vmap(f)) it stands for, on one device."""
    count = 50
    x = jnp.ones((8, 3), jnp.float32)
    raw = jax.jit(jax.vmap(tiny_step))
    ours = batched_jit(tiny_step, max_traces=1)
    return Row(
        "batched_jit vs jit(vmap), tiny f32",
        "jit(vmap)",
        {
            "jit(vmap)": lambda: repeated(lambda: raw(x), count),
            "tinax": lambda: repeated(lambda: ours(x), count),
        },
        target=1.03,
        calls=count,
        repeat=15,
    )


def _sharded_step(w: jax.Array, batch: jax.Array) -> jax.Array:
    return w - 0.01 * batch  # elementwise: no collective (8 CPU devices on 2 cores)


def dispatch_options_row(quick: bool) -> Row:
    """A cached call with in/out shardings and a donated argument on the 8-device mesh,
    against jax.jit with the same options, and the floor of a forwarding object."""
    count = 50
    mesh = mesh8()
    data = NamedSharding(mesh, PartitionSpec("x"))
    options: dict[str, Any] = {
        "in_shardings": (data, data),
        "out_shardings": data,
        "donate_argnums": 0,
    }
    batch = jax.device_put(jnp.ones((64, 16), jnp.float32), data)
    raw = jax.jit(_sharded_step, **options)
    ours = bounded_jit(_sharded_step, max_traces=1, **options)
    floor = Floor(jax.jit(_sharded_step, **options))

    def loop(step: Callable[[jax.Array, jax.Array], jax.Array]) -> Setup:
        def setup() -> Callable[[], object]:
            w = jax.device_put(jnp.zeros((64, 16), jnp.float32), data)

            def action() -> object:
                nonlocal w
                for _ in range(count):
                    w = step(w, batch)  # w is donated: each call gets the one before's
                return w.block_until_ready()

            return action

        return setup

    return Row(
        "dispatch with in/out shardings + donate_argnums, 8-device mesh",
        "jax.jit",
        {"jax.jit": loop(raw), "tinax": loop(ours), "floor object": loop(floor)},
        target=1.03,
        calls=count,
        repeat=15,
        notes=lambda row: [
            "  tinax / floor object: "
            f"{statistics.median(ratios_of(row, 'tinax', 'floor object')):.3f}"
            " (target 1.01): what remains once a forwarding object's own cost is paid"
        ],
    )
