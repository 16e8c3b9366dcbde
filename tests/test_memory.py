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
import pytest

import tinax
from tinax._src.observe import rebuilt, registry
from tinax.jit import TraceBudgetWarning, batched_jit, bounded_jit

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
            parts = (step, step._handle, step._ledger, step._jitted)
            dropped.extend(weakref.ref(part, _ignore) for part in parts)
            del step, function
    return dropped


def test_dropped_objects_leave_nothing_behind(outside_session_budgets, caplog):
    # tinax's own tables are measured, not the log records a handler of the session keeps
    # (pytest's capture keeps every record the tinax logger's level lets through)
    caplog.set_level("WARNING", logger="tinax")
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


def _branching(x):
    return jax.lax.cond(x.sum() > 0, lambda: x, lambda: -x)


STAGED = [
    pytest.param(jax.jit, id="jax.jit"),
    pytest.param(lambda f: bounded_jit(f, max_traces=2), id="bounded_jit"),
    pytest.param(
        lambda f: bounded_jit(f, max_traces=2, static_nonarrays=True), id="static_nonarrays"
    ),
    pytest.param(lambda f: batched_jit(f, max_traces=2), id="batched_jit"),
]


@pytest.mark.parametrize("jit", STAGED)
def test_a_dropped_stage_and_its_jaxpr_are_freed_without_the_garbage_collector(jit):
    step = jit(_branching)
    x = jnp.ones((2, 3))
    step(x)
    gc.collect()
    gc.disable()  # no cycle may hold them: refcounting alone must free them, as for jax.jit
    try:
        traced = step.trace(x)
        lowered = step.lower(x)
        again = lowered.compile()  # each stage's own method, as shadowed, has run once
        staged = traced.lower()
        alive = [weakref.ref(stage) for stage in (traced, lowered, staged, traced.jaxpr.jaxpr)]
        jax.clear_caches()  # JAX's trace cache holds the jaxpr too, for jax.jit alike
        del traced, lowered, again, staged
        assert [ref() is None for ref in alive] == [True] * 4
    finally:
        gc.enable()


@pytest.mark.parametrize("jit", STAGED)
def test_a_traced_jaxpr_leaves_jax_s_close_jaxpr_cache_when_dropped(jit):
    """JAX's own check (its api_test, test_pe_close_jaxpr_cache_leak, as of jax 0.10):
    the cache keyed weakly on a traced jaxpr empties when the jaxpr goes."""
    from jax._src import util as jax_util
    from jax._src.interpreters import partial_eval as pe

    close_jaxpr = getattr(pe, "close_jaxpr", None)
    if not hasattr(close_jaxpr, "cache_keys"):  # jax 0.12: close_jaxpr is the identity
        pytest.skip("this JAX keeps no close_jaxpr cache")
    step = jit(_branching)
    jaxpr = step.trace(jnp.ones((2, 3))).jaxpr
    jax_util.clear_all_caches()
    assert close_jaxpr(jaxpr.jaxpr) is close_jaxpr(jaxpr.jaxpr)
    assert len(close_jaxpr.cache_keys()) > 0
    del jaxpr
    assert len(close_jaxpr.cache_keys()) == 0
