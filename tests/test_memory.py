"""Nothing of a dropped object stays behind: its ledger, its compiled function, its
registry entry, its places in tinax's tables."""

from __future__ import annotations

import gc
import pathlib
import sys
import tracemalloc
import warnings
import weakref

import jax
import jax.numpy as jnp

import tinax
from tinax._src.observe import rebuilt, registry
from tinax.jit import TraceBudgetWarning, bounded_jit

TINAX_SOURCE = pathlib.Path(tinax.__file__).parent

COUNT = 5000


def _scale(x):
    return x * 2.0


def _ignore(_: object) -> None:
    pass


def _build_trace_and_drop(count: int, x: jax.Array) -> list[weakref.ref]:
    """Objects built, traced once and dropped: half wrap one module-level function (one
    place in the rebuilt-wrapper table), half a fresh closure each (a place per object,
    pruned when its function dies)."""
    dropped: list[weakref.ref] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceBudgetWarning)  # rebuilt per step, on purpose
        for index in range(count):
            function = _scale if index % 2 else (lambda v: v * 3.0)
            step = bounded_jit(function, max_traces=1)
            step.eval_shape(x)  # a real, counted trace: recorded, registered, timed
            # A callback makes each reference the test's own: a plain weakref.ref(x) is the
            # one tinax holds, if it holds one, and its size would count as tinax's.
            parts = (step, step._ledger, step._jitted)
            dropped.extend(weakref.ref(part, _ignore) for part in parts)
            del step, function
    return dropped


def test_dropped_objects_leave_nothing_behind(outside_session_budgets):
    x = jnp.ones(3)
    # Warm, at the measured scale: first-use caches of JAX and tinax filled, and tinax's
    # tables grown to about the size that the objects alive at once need.
    _build_trace_and_drop(COUNT, x)
    gc.collect()
    jax.clear_caches()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        dead_before = _dead_in_registry()
        dropped = _build_trace_and_drop(COUNT, x)
        gc.collect()
        jax.clear_caches()
        gc.collect()
        after = tracemalloc.take_snapshot()
        dead_after = _dead_in_registry()
    finally:
        tracemalloc.stop()
    alive = [ref for ref in dropped if ref() is not None]
    assert alive == []  # the objects, their ledgers and their jax.jit objects
    # The rebuilt-wrapper table forgets the place of a function as it dies.
    dead = [key for key, site in rebuilt._sites.items() if site.alive and site.alive() is None]
    assert dead == []
    ours = tracemalloc.Filter(True, str(TINAX_SOURCE / "*"))
    # A table of tinax's (a dict: it keeps its capacity when entries go, and the capacity
    # it has depends on how many entries it held at its last resize) can end one size
    # larger than it began: one block. One block smaller than 4 bytes per object cannot
    # hold a reference (8 bytes) to each dropped object: that is capacity, not kept.
    kept = sum(
        stat.size_diff
        for stat in after.filter_traces([ours]).compare_to(before.filter_traces([ours]), "lineno")
        if not (stat.count_diff <= 1 and stat.size_diff < 4 * COUNT)
    )
    # The registry prunes its dead references in amortized O(1): it holds at most as many
    # as it holds live ones (64 at least), so how many it holds at either snapshot depends
    # on the objects earlier tests left alive. That slack is bounded, not kept per object.
    live = sum(1 for ref in registry._registry if ref() is not None)
    assert dead_after <= max(64, live + 1), (dead_after, live)
    kept -= (dead_after - dead_before) * sys.getsizeof(weakref.ref(_scale))
    # What tinax's own code allocated and still holds: nothing per object (JAX's own
    # caches, which keep a few of the functions it traced, are JAX's as for jax.jit).
    assert kept / COUNT < 4, (
        f"{kept / COUNT:.1f} bytes per dropped object kept by tinax; by line:\n"
        + "\n".join(
            str(stat)
            for stat in after.filter_traces([ours]).compare_to(
                before.filter_traces([ours]), "lineno"
            )[:8]
        )
    )


def _dead_in_registry() -> int:
    return sum(1 for ref in registry._registry if ref() is None)
