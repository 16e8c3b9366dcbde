"""The trace budget: what counts, exactness, per-object ledgers, threads, chex as oracle."""

import threading

import chex
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tinax.jit import TraceBudgetError, TraceBudgetWarning, bounded_jit


def counting(function=None):
    """Wraps ``function`` with an independent counter of body runs."""
    runs = []

    def body(*args, **kwargs):
        runs.append(1)
        return function(*args, **kwargs) if function else args[0] * 2

    return body, runs


class TestExactBudget:
    def test_permits_exactly_n_traces_when_shapes_change(self, make_bounded):
        body, runs = counting()
        step = make_bounded(body, max_traces=3)
        for n in (1, 2, 3):
            step(jnp.ones(n))
        assert step.traces_used == 3
        assert len(runs) == 3
        with pytest.raises(TraceBudgetError):
            step(jnp.ones(4))

    def test_refuses_before_body_runs_when_budget_spent(self, make_bounded):
        body, runs = counting()
        step = make_bounded(body, max_traces=1)
        step(jnp.ones(2))
        with pytest.raises(TraceBudgetError):
            step(jnp.ones(5))
        assert len(runs) == 1
        assert step.traces_used == 1

    def test_earlier_signatures_still_run_when_budget_spent(self, make_bounded):
        body, runs = counting()
        step = make_bounded(body, max_traces=1)
        step(jnp.ones(2))
        with pytest.raises(TraceBudgetError):
            step(jnp.ones(3))
        np.testing.assert_array_equal(step(jnp.ones(2) * 3), [6.0, 6.0])
        assert step.traces_used == 1
        assert len(runs) == 1

    def test_refused_call_is_refused_again_when_repeated(self, make_bounded):
        step = make_bounded(lambda x: x, max_traces=1)
        step(jnp.ones(2))
        for _ in range(2):
            with pytest.raises(TraceBudgetError):
                step(jnp.ones(3))
        assert step.traces_used == 1

    def test_zero_budget_refuses_first_call(self, make_bounded):
        body, runs = counting()
        step = make_bounded(body, max_traces=0)
        with pytest.raises(TraceBudgetError):
            step(jnp.ones(2))
        assert runs == []
        assert step.traces_used == 0

    def test_cache_hits_are_not_traces_when_signature_repeats(self, make_bounded):
        body, runs = counting()
        step = make_bounded(body, max_traces=1)
        for value in range(5):
            step(jnp.ones(3) * value)
        assert step.traces_used == 1
        assert len(runs) == 1

    def test_error_is_an_assertion_error(self, make_bounded):
        step = make_bounded(lambda x: x, max_traces=0)
        with pytest.raises(AssertionError):
            step(jnp.ones(1))

    def test_numpy_integer_budget_counts_like_int(self, make_bounded):
        step = make_bounded(lambda x: x, max_traces=np.int64(1))
        step(jnp.ones(1))
        with pytest.raises(TraceBudgetError):
            step(jnp.ones(2))


class TestWhatCounts:
    def test_all_static_traces_count_when_static_value_changes(self, make_bounded):
        runs = []

        def scale(n):
            runs.append(n)
            return jnp.arange(3) * n

        step = make_bounded(scale, max_traces=2, static_argnames="n")
        step(n=1)
        step(n=2)
        step(n=2)
        assert step.traces_used == 2
        with pytest.raises(TraceBudgetError):
            step(n=3)
        assert runs == [1, 2]

    def test_static_argument_counts_when_passed_positionally(self, make_bounded):
        step = make_bounded(lambda x, n: x * n, max_traces=1, static_argnames=("n",))
        step(jnp.ones(2), 2)
        with pytest.raises(TraceBudgetError):
            step(jnp.ones(2), 3)
        assert step.traces_used == 1

    def test_failed_trace_is_not_counted_when_body_raises(self, make_bounded):
        calls = []

        def flaky(x):
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("first trace fails")
            return x + 1

        step = make_bounded(flaky, max_traces=1)
        with pytest.raises(RuntimeError, match="first trace fails"):
            step(jnp.ones(2))
        assert step.traces_used == 0
        np.testing.assert_array_equal(step(jnp.ones(2)), [2.0, 2.0])
        assert step.traces_used == 1

    def test_failed_trace_is_not_counted_when_output_is_not_an_array(self, make_bounded):
        calls = []

        def bad_output(x):
            calls.append(1)
            return "not an array" if len(calls) == 1 else x

        step = make_bounded(bad_output, max_traces=1)
        with pytest.raises(TypeError, match="not a valid JAX type"):
            step(jnp.ones(2))
        assert step.traces_used == 0
        step(jnp.ones(2))
        assert step.traces_used == 1
        assert len(calls) == 2

    @pytest.mark.parametrize("method", ["lower", "trace", "eval_shape"])
    def test_ahead_of_time_methods_count_a_trace(self, make_bounded, method):
        body, runs = counting()
        step = make_bounded(body, max_traces=1)
        getattr(step, method)(jnp.ones(3))
        assert step.traces_used == 1
        step(jnp.ones(3))  # same signature: served from the trace cache
        assert step.traces_used == 1
        assert len(runs) == 1
        with pytest.raises(TraceBudgetError):
            getattr(step, method)(jnp.ones(4))

    def test_nothing_counted_when_jit_disabled(self, make_bounded):
        body, runs = counting()
        step = make_bounded(body, max_traces=0)
        with jax.disable_jit():
            out = step(jnp.ones(2))
            step(jnp.ones(3))
        np.testing.assert_array_equal(out, [2.0, 2.0])
        assert len(runs) == 2
        assert step.traces_used == 0

    def test_lower_counts_when_jit_disabled(self, make_bounded):
        step = make_bounded(lambda x: x, max_traces=1)
        with jax.disable_jit():
            step.lower(jnp.ones(2))
        assert step.traces_used == 1

    def test_counts_without_raising_when_chex_asserts_disabled(self, make_bounded):
        step = make_bounded(lambda x: x, max_traces=1)
        chex.disable_asserts()
        try:
            for n in (1, 2, 3):
                step(jnp.ones(n))
        finally:
            chex.enable_asserts()
        assert step.traces_used == 3
        with pytest.raises(TraceBudgetError):
            step(jnp.ones(4))

    def test_inner_object_counts_its_own_traces_when_nested_in_jit(self, make_bounded):
        body, runs = counting()
        inner = make_bounded(body, max_traces=1)

        @jax.jit
        def outer(x):
            return inner(x) + 1

        np.testing.assert_array_equal(outer(jnp.ones(2)), [3.0, 3.0])
        assert inner.traces_used == 1
        with pytest.raises(TraceBudgetError):
            outer(jnp.ones(3))
        assert inner.traces_used == 1
        assert len(runs) == 1


class TestPerObject:
    def test_two_objects_never_share_a_budget_when_built_on_one_line(self, make_bounded):
        def f(x):
            return x

        a, b = (make_bounded(f, max_traces=1) for _ in range(2))
        a(jnp.ones(2))
        b(jnp.ones(2))
        assert (a.traces_used, b.traces_used) == (1, 1)
        b(jnp.ones(2))
        assert b.traces_used == 1

    def test_rebuilt_wrapper_gets_fresh_budget_when_built_in_a_loop(self, make_bounded):
        def f(x):
            return x

        # Each object starts from zero, and the third one traced alike is warned about
        # (tests/test_observe.py tests that warning).
        with pytest.warns(TraceBudgetWarning, match="built 3 times"):
            for _ in range(5):
                step = make_bounded(f, max_traces=1)
                step(jnp.ones(2))
                assert step.traces_used == 1

    def test_batched_objects_never_share_a_budget(self, make_batched):
        def f(x):
            return x.sum()

        a = make_batched(f, max_traces=1)
        b = make_batched(f, max_traces=1)
        a(jnp.ones((2, 3)))
        b(jnp.ones((2, 3)))
        assert (a.traces_used, b.traces_used) == (1, 1)
        with pytest.raises(TraceBudgetError):
            a(jnp.ones((4, 3)))


class TestThreads:
    @pytest.mark.parametrize("budget", [8, 4], ids=["budget-8", "budget-4"])
    def test_count_is_exact_when_eight_threads_trace_distinct_shapes(self, make_bounded, budget):
        barrier = threading.Barrier(8)
        body, runs = counting()
        step = make_bounded(body, max_traces=budget)
        outcomes = []
        lock = threading.Lock()

        def worker(n):
            barrier.wait()
            try:
                step(jnp.ones(n))
                outcome = "ok"
            except TraceBudgetError:
                outcome = "refused"
            with lock:
                outcomes.append(outcome)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(1, 9)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert outcomes.count("ok") == budget
        assert outcomes.count("refused") == 8 - budget
        assert step.traces_used == budget
        assert len(runs) == budget
        assert len(step.traced_signatures) == budget

    def test_one_trace_when_eight_threads_call_one_new_signature(self, make_bounded):
        barrier = threading.Barrier(8)
        body, runs = counting()
        step = make_bounded(body, max_traces=1)
        errors = []

        def worker():
            barrier.wait()
            try:
                step(jnp.ones(3))
            except TraceBudgetError as error:
                errors.append(error)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert step.traces_used == 1
        assert len(runs) == 1

    def test_new_signature_is_refused_while_the_only_permitted_trace_is_still_running(
        self, make_bounded
    ):
        entered, release = threading.Event(), threading.Event()
        runs = []

        def body(x):
            runs.append(x.shape)
            if x.shape == (3,):  # the first trace holds its slot until released
                entered.set()
                release.wait(timeout=60)
            return x * 2

        step = make_bounded(body, max_traces=1)
        outcomes = {}

        def call(n):
            try:
                step(jnp.ones(n))
                outcomes[n] = "ok"
            except TraceBudgetError:
                outcomes[n] = "refused"

        first = threading.Thread(target=call, args=(3,))
        second = threading.Thread(target=call, args=(4,))
        first.start()
        try:
            assert entered.wait(timeout=60), "the first trace never reached its body"
            second.start()
            second.join(timeout=60)
            assert not second.is_alive(), "the second call waited for the first trace"
            assert outcomes == {4: "refused"}  # decided while the first trace still runs
        finally:
            release.set()
            first.join(timeout=60)
            if second.ident is not None:
                second.join(timeout=60)
        assert not first.is_alive()
        assert outcomes == {3: "ok", 4: "refused"}
        assert step.traces_used == 1
        assert runs == [(3,)]
        assert len(step.traced_signatures) == 1


class TestChexOracle:
    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        n=st.integers(0, 4),
        calls=st.lists(
            st.tuples(
                st.integers(1, 3),
                st.integers(1, 3),
                st.sampled_from(["float32", "int32", "float16"]),
            ),
            min_size=1,
            max_size=8,
        ),
    )
    def test_refuses_exactly_where_chex_refuses(self, n, calls):
        """jax.jit(chex.assert_max_traces(f, n)) is the oracle for array arguments."""
        chex.clear_trace_counter()

        def f(x, y):
            return x.sum() + y.sum()

        ours = bounded_jit(f, max_traces=n)
        oracle = jax.jit(chex.assert_max_traces(f, n=n))
        for rows, cols, dtype in calls:
            x = np.ones((rows, cols), dtype=dtype)
            y = np.zeros((cols,), dtype=dtype)
            refused = []
            for candidate in (ours, oracle):
                try:
                    candidate(x, y)
                    refused.append(False)
                except AssertionError:
                    refused.append(True)
            assert refused[0] == refused[1], (rows, cols, dtype)
        assert ours.traces_used <= n


def _dot(a, b):
    return (a * b).sum()


def _outer(a, b):
    return a * b


def _tree(a, b):
    return a["a"] * a["b"] * b, jnp.float32(1.0)


class TestBatchedMatchesJitOfVmap:
    @pytest.mark.parametrize(
        ("f", "in_axes", "out_axes", "axis_size", "args"),
        [
            (_dot, 0, 0, None, (np.arange(12.0).reshape(4, 3), np.ones((4, 3)))),
            (_dot, (0, None), 0, None, (np.arange(12.0).reshape(4, 3), np.ones(3))),
            (_outer, (1, 0), 1, None, (np.arange(12.0).reshape(3, 4), np.ones((4, 3)))),
            (_outer, [None, 0], -1, None, (np.ones(3), np.arange(12.0).reshape(4, 3))),
            (_dot, (None, None), 0, 5, (np.ones(3), np.ones(3))),
            (
                _tree,
                ({"a": 0, "b": None}, 0),
                (0, None),
                None,
                ({"a": np.ones((2, 3)), "b": np.ones(3)}, np.ones((2, 3))),
            ),
        ],
        ids=["default", "broadcast-second", "axis1-out1", "list-out-last", "axis-size", "pytree"],
    )
    def test_equals_jit_of_vmap(self, make_batched, f, in_axes, out_axes, axis_size, args):
        ours = make_batched(
            f, in_axes=in_axes, out_axes=out_axes, axis_size=axis_size, max_traces=1
        )
        vmap_axes = tuple(in_axes) if isinstance(in_axes, list) else in_axes
        expected = jax.jit(jax.vmap(f, in_axes=vmap_axes, out_axes=out_axes, axis_size=axis_size))(
            *args
        )
        chex.assert_trees_all_close(ours(*args), expected)
        assert ours.traces_used == 1

    def test_budget_counts_batched_traces(self, make_batched):
        body, runs = counting(lambda x: x.sum())
        ours = make_batched(body, max_traces=1)
        ours(jnp.ones((4, 3)))
        ours(jnp.ones((4, 3)))
        with pytest.raises(TraceBudgetError):
            ours(jnp.ones((8, 3)))
        assert ours.traces_used == 1
        assert len(runs) == 1


def test_debug_nans_rerun_is_eager_and_not_a_trace():
    """Under jax.debug_nans JAX re-runs the function op by op to find the NaN: that run is
    not a trace, so a spent budget lets JAX's FloatingPointError through."""
    step = bounded_jit(lambda x: jnp.log(x), max_traces=1)
    step(jnp.ones(3))
    with jax.debug_nans(True), pytest.raises(FloatingPointError, match="nan"):
        step(-jnp.ones(3))
    assert step.traces_used == 1
