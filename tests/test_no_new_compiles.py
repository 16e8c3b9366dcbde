"""tinax.testing.no_new_compiles: a scope in which nothing is traced or compiled.

Budgeted objects refuse a trace or a compile before it happens, with the budget
error's diagnosis; every other JAX compile in the scope makes the scope raise at
its end, naming the function, its arguments' types and the line that called it.
Cached calls, host callbacks included, never fail.
"""

import pathlib
import threading

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import monitoring as jax_monitoring
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from tinax._src.budget import compile_guard
from tinax.jit import TraceBudgetError, bounded_jit
from tinax.testing import no_new_compiles

HERE = "tests/test_no_new_compiles.py"
SOURCE = pathlib.Path(__file__).read_text().splitlines()


def line_of(marker):
    """The line number of the one line of this file that ends with ``# <marker>``."""
    [number] = [i + 1 for i, line in enumerate(SOURCE) if line.endswith(f"# {marker}")]
    return number


def scale(x, k):
    return x * k


def features(w, x):
    return jnp.tanh(x @ w)


def shift(x, k):  # compiled by one test only: its first compile is always inside the scope
    return x + k


def fresh():
    """A new function, jitted: its first call always compiles."""
    return jax.jit(lambda x, k: x * k)


def listeners_installed():
    return (
        compile_guard._on_start in jax_monitoring.get_scalar_listeners()
        or compile_guard._on_end in jax_monitoring.get_event_duration_listeners()
    )


# --- budgeted objects ------------------------------------------------------------------------


class TestBudgetedObjects:
    def test_a_new_signature_is_refused_before_tracing_with_budget_left(self):
        runs = 0

        def counted(w, x):  # counted
            nonlocal runs
            runs += 1
            return features(w, x)

        embed = bounded_jit(counted, max_traces=8)
        w = jnp.ones((8, 4))
        embed(w, jnp.ones((64, 8)))
        partial = jnp.ones((50, 8))
        with pytest.raises(TraceBudgetError) as caught, no_new_compiles():
            embed(w, partial)  # refused-new-shape
        lines = str(caught.value).splitlines()
        assert lines[0].endswith(
            f".<locals>.counted ({HERE}:{line_of('counted')}) would trace inside "
            "no_new_compiles: max_traces=8, traces_used=1; this call would be trace 2."
        )
        assert lines[1] == (
            "no_new_compiles refuses every new trace and compile of a budgeted object: this "
            "call was refused before tracing, and calls that match an earlier trace still run."
        )
        assert lines[2:4] == [
            "Closest earlier trace: #1 (1 difference):",
            "  x: f32[64,8] -> f32[50,8] (shape)",
        ]
        assert lines[-1].startswith(f"Called from {HERE}:{line_of('refused-new-shape')}; ")
        assert caught.value.closest is not None and caught.value.closest.number == 1
        assert (runs, embed.traces_used, embed.compiles_used) == (1, 1, 1)
        embed(w, partial)  # after the scope: traces as usual
        assert (runs, embed.traces_used) == (2, 2)

    def test_a_cached_call_passes(self, make_bounded):
        double = make_bounded(lambda x: 2 * x, max_traces=1)
        x = jnp.ones(3)
        double(x)
        with no_new_compiles():
            for _ in range(3):
                double(x)
        assert (double.traces_used, double.compiles_used) == (1, 1)

    def test_a_batched_object_refuses_a_new_batch_size(self, make_batched):
        per_example = make_batched(lambda x: x.sum(), max_traces=4)
        per_example(jnp.ones((8, 3)))
        per_example(jnp.ones((8, 3)))
        smaller = jnp.ones((5, 3))
        with pytest.raises(TraceBudgetError, match="would trace inside no_new_compiles"):
            with no_new_compiles():
                per_example(smaller)
        assert per_example.traces_used == 1

    @pytest.mark.parametrize("method", ["lower", "trace", "eval_shape", "precompile"])
    def test_every_way_to_trace_is_refused(self, method):
        step = bounded_jit(scale, max_traces=4, static_argnames="k")
        step(jnp.ones(3), k=2)
        x = jnp.ones(4)
        with pytest.raises(TraceBudgetError, match="would trace inside no_new_compiles"):
            with no_new_compiles():
                getattr(step, method)(x, k=2)
        assert step.traces_used == 1

    @pytest.mark.parametrize("setting", ["on_exceed='warn'", "chex asserts disabled"])
    def test_the_refusal_holds_whatever_the_overrun_policy(self, setting):
        step = bounded_jit(scale, max_traces=4, on_exceed="warn" if "warn" in setting else None)
        step(jnp.ones(3), 2)
        x = jnp.ones(4)
        if "chex" in setting:
            chex.disable_asserts()
        try:
            with pytest.raises(TraceBudgetError), no_new_compiles():
                step(x, 2)
        finally:
            chex.enable_asserts()
        assert step.traces_used == 1

    def test_an_eager_run_under_disable_jit_is_no_trace(self):
        step = bounded_jit(scale, max_traces=1)
        x = jnp.ones(3)
        with jax.disable_jit():
            step(x, 2)  # its eager operations, compiled before the scope
            with no_new_compiles():
                assert step(x, 2).tolist() == [2.0, 2.0, 2.0]
        assert step.traces_used == 0

    def test_a_call_jax_rejects_raises_jax_s_error_not_a_refusal(self):
        step = bounded_jit(scale, max_traces=4)
        step(jnp.ones(3), 2)
        with pytest.raises(TypeError, match="missing 1 required positional argument: 'k'"):
            with no_new_compiles():
                step(jnp.ones(4))

    def test_a_compile_without_a_new_trace_is_refused_before_xla_compiles(self):
        mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
        step = bounded_jit(lambda x: x * 2, max_traces=1, mesh=mesh)
        batch = np.ones((8, 4), np.float32)
        step(jax.device_put(batch, NamedSharding(mesh, P("data"))))
        replicated = jax.device_put(batch, NamedSharding(mesh, P()))
        with pytest.raises(TraceBudgetError) as caught, no_new_compiles():
            step(replicated)  # refused-compile
        lines = str(caught.value).splitlines()
        assert lines[0].endswith(
            "would compile inside no_new_compiles, reusing trace #1: max_traces=1, traces_used=1."
        )
        assert lines[1].endswith(
            "this call was refused before XLA compiled it, and calls that have an executable "
            "still run."
        )
        assert lines[2] == (
            "XLA would compile again without tracing (compiles_used counts it, the budget "
            "does not): input sharding changed: x: placed P('data',) -> placed P()."
        )
        assert lines[3].startswith(f"Called from {HERE}:{line_of('refused-compile')}; ")
        assert (step.traces_used, step.compiles_used) == (1, 1)
        step(replicated)  # after the scope: compiled as usual
        assert (step.traces_used, step.compiles_used) == (1, 2)

    def test_a_trace_lowered_but_never_compiled_is_refused_its_compile(self):
        step = bounded_jit(features, max_traces=2)
        w, x = jnp.ones((8, 4)), jnp.ones((64, 8))
        step.lower(w, x)
        with pytest.raises(TraceBudgetError) as caught, no_new_compiles():
            step(w, x)
        assert caught.value.closest is not None and caught.value.closest.number == 1
        assert caught.value.differences == ()
        assert str(caught.value).splitlines()[2] == (
            "Its trace was made without a compile (by lower, trace or eval_shape): compile it "
            "before the scope (precompile, or a first call)."
        )
        assert (step.traces_used, step.compiles_used) == (1, 0)

    def test_a_precompiled_object_runs_its_first_call_inside(self):
        step = bounded_jit(features, max_traces=1)
        w, x = jnp.ones((8, 4)), jnp.ones((64, 8))
        step.precompile(w, x)
        with no_new_compiles():
            step(w, x)
        assert (step.traces_used, step.compiles_used) == (1, 1)

    def test_a_cached_call_with_host_callbacks_passes(self):
        seen = []

        def noisy(x):
            jax.debug.callback(seen.append, x)
            return jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

        step = bounded_jit(noisy, max_traces=1)
        plain = jax.jit(noisy)
        x = jnp.ones(3)
        step(x)
        plain(x)
        with no_new_compiles():
            for _ in range(3):
                step(x)
                plain(x)
        jax.effects_barrier()
        assert len(seen) == 8  # the callbacks ran on every call
        assert step.traces_used == 1

    def test_a_compiles_arguments_are_recorded_as_the_user_passed_them_where_they_can_be(self):
        """The scope names a compile by the call's signature: the arguments `jax.jit` got,
        read back by the object's calling convention, which cannot read back a call split
        into array leaves and a static key (``static_nonarrays``)."""
        x = jnp.ones(3)
        plain = bounded_jit(scale, max_traces=1, static_argnames="k")
        signature = compile_guard._recorded(plain._handle, (x,), {"k": 2.0}, "here:1")
        assert signature is not None and "k: 2.0" in str(signature)
        split = bounded_jit(scale, max_traces=1, static_nonarrays=True)
        jax_args, jax_kwargs = split._plan.convention.jax_arguments((x, 2.0), {})
        assert compile_guard._recorded(split._handle, jax_args, jax_kwargs, "here:1") is None


# --- other compiles ---------------------------------------------------------------------------


class TestOtherCompiles:
    def test_a_plain_jit_compile_is_reported_at_the_end_with_its_types_and_line(self):
        compiled = jax.jit(shift)
        x = jnp.ones(3)
        after = []
        with pytest.raises(AssertionError) as caught:
            with no_new_compiles():  # scope-plain
                compiled(x, 2)  # plain-call
                after.append(True)
        assert after == [True]  # the block runs to its end
        assert str(caught.value).splitlines() == [
            f"1 JAX compile inside no_new_compiles, entered at {HERE}:{line_of('scope-plain')}:",
            f"  jit(shift)(x: f32[3], k: weak-typed i32[]), called from {HERE}:"
            f"{line_of('plain-call')}",
            "Each new abstract signature of a jitted function, and each eager jax.numpy "
            "operation on a new shape or dtype, compiles: run these once before the scope (or "
            "precompile them), or move them out of it.",
        ]
        assert type(caught.value) is AssertionError

    def test_an_eager_primitive_on_a_new_shape_is_reported(self):
        x = jnp.ones(7)
        with pytest.raises(AssertionError) as caught, no_new_compiles():
            x + 1  # eager-add
        assert str(caught.value).splitlines()[1] == (
            f"  jit(add)(x: f32[7], y: weak-typed i32[]), called from {HERE}:{line_of('eager-add')}"
        )

    def test_an_eager_primitive_on_a_known_shape_passes(self):
        x = jnp.ones(6)
        x * 3
        with no_new_compiles():
            x * 3

    def test_a_compile_outside_a_call_is_reported_without_its_arguments(self):
        lowered = jax.jit(lambda v: v - 1).lower(jnp.ones(9))
        with pytest.raises(AssertionError) as caught, no_new_compiles():
            lowered.compile()
        assert (
            str(caught.value)
            .splitlines()[1]
            .startswith(
                "  jit(<lambda>) (arguments not known: compiled outside a call), called from "
            )
        )

    def test_a_budgeted_object_inside_a_plain_jit_is_refused(self):
        inner = bounded_jit(lambda x: x + 1, max_traces=4)
        outer = jax.jit(lambda x: inner(x) * 2)
        x = jnp.ones(11)
        with pytest.raises(TraceBudgetError, match="would trace inside no_new_compiles"):
            with no_new_compiles():
                outer(x)
        assert inner.traces_used == 0

    def test_at_most_twelve_compiles_are_listed(self):
        arrays = [jnp.ones(n) for n in range(20, 34)]
        with pytest.raises(AssertionError) as caught, no_new_compiles():
            for array in arrays:
                fresh()(array, 2)
        lines = str(caught.value).splitlines()
        assert lines[0].startswith("14 JAX compiles inside no_new_compiles")
        assert len(lines) == 1 + 12 + 1 + 1
        assert lines[-2] == "  ... and 2 more"


# --- scopes -----------------------------------------------------------------------------------


class TestScopes:
    def test_an_exception_inside_passes_through_unchanged(self):
        raised = ValueError("the user's own error")
        x = jnp.ones(13)
        with pytest.raises(ValueError) as caught, no_new_compiles():
            fresh()(x, 2)  # a compile, then the user's error
            raise raised
        assert caught.value is raised
        assert caught.value.__context__ is None and caught.value.__cause__ is None
        assert not listeners_installed()

    def test_an_inner_scope_s_failure_passes_through_the_outer_one_unchanged(self):
        x = jnp.ones(14)
        inner_error = None
        with pytest.raises(AssertionError) as caught, no_new_compiles():
            try:
                with no_new_compiles():  # inner-scope
                    fresh()(x, 2)
            except AssertionError as error:
                inner_error = error
                raise
        assert caught.value is inner_error
        assert f"entered at {HERE}:{line_of('inner-scope')}" in str(caught.value)

    def test_a_compile_is_reported_by_every_scope_it_happened_in(self):
        x, y = jnp.ones(15), jnp.ones(16)
        with pytest.raises(AssertionError) as outer, no_new_compiles():
            fresh()(x, 2)  # before-inner
            with pytest.raises(AssertionError) as inner, no_new_compiles():
                fresh()(y, 2)  # in-inner
        inner_lines = str(inner.value).splitlines()
        outer_lines = str(outer.value).splitlines()
        assert inner_lines[0].startswith("1 JAX compile inside")
        assert inner_lines[1].endswith(f":{line_of('in-inner')}")
        assert outer_lines[0].startswith("2 JAX compiles inside")
        assert [line[-3:] for line in outer_lines[1:3]] == [
            str(line_of("before-inner")),
            str(line_of("in-inner")),
        ]

    def test_a_compile_in_another_thread_is_not_the_scope_s(self):
        x = jnp.ones(17)
        budgeted = bounded_jit(scale, max_traces=1)
        done = []

        def work():
            fresh()(x, 2)  # a compile
            budgeted(x, 2)  # a trace of a budgeted object
            done.append(True)

        with no_new_compiles():
            thread = threading.Thread(target=work)
            thread.start()
            thread.join()
        assert done == [True]
        assert budgeted.traces_used == 1

    def test_a_scope_in_another_thread_leaves_this_one_alone(self):
        opened, release = threading.Event(), threading.Event()
        failures = []

        def hold_a_scope():
            try:
                with no_new_compiles():
                    opened.set()
                    release.wait(timeout=60)
            except AssertionError as error:
                failures.append(error)

        thread = threading.Thread(target=hold_a_scope)
        thread.start()
        opened.wait(timeout=60)
        try:
            assert listeners_installed()
            budgeted = bounded_jit(scale, max_traces=1)
            budgeted(jnp.ones(18), 2)  # traces and compiles here: not refused
        finally:
            release.set()
            thread.join()
        assert failures == []
        assert budgeted.compiles_used == 1
        assert not listeners_installed()

    def test_as_a_decorator_each_call_is_a_scope(self):
        @no_new_compiles()
        def run(x):
            return scale(x, 2)

        x = jnp.ones(3)
        scale(x, 2)  # compiles the eager multiply for these types
        assert run(x).tolist() == [2.0, 2.0, 2.0]  # then the decorated call passes

        @no_new_compiles()  # decorated
        def compiles(x):
            return fresh()(x, 2)

        with pytest.raises(AssertionError) as caught:
            compiles(jnp.ones(19))
        location = f"{HERE}:{line_of('decorated')}"
        assert f"inside no_new_compiles, around {compiles.__qualname__} ({location}):" in str(
            caught.value
        )
        with pytest.raises(AssertionError):  # a new scope: it fails again, for itself
            compiles(jnp.ones(21))
        assert not listeners_installed()

    def test_one_object_can_be_entered_again_and_nested(self):
        scope = no_new_compiles()
        x = jnp.ones(22)
        with pytest.raises(AssertionError) as caught:
            with scope:
                with scope:
                    pass
                fresh()(x, 2)
        assert str(caught.value).startswith("1 JAX compile inside")
        assert not listeners_installed()

    def test_listeners_are_installed_only_while_a_scope_is_open(self):
        assert not listeners_installed()
        with no_new_compiles():
            assert listeners_installed()
            with no_new_compiles():
                assert listeners_installed()
            assert listeners_installed()
        assert not listeners_installed()

    def test_a_bare_decorator_fails_at_once(self):
        with pytest.raises(TypeError):
            no_new_compiles(scale)
