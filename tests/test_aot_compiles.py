"""Ahead-of-time compiles are compiles (issue 35, items 1 and 3).

Every XLA compile a budgeted object causes counts in ``compiles_used``, on every
path: a call, ``precompile``, ``lower(...).compile()`` and
``trace(...).lower().compile()``; each count here is checked against JAX's own
compile events for that object's function. A compile made ahead of time is a
compile of its trace: ``explain`` knows it, a later compile of the same trace for
inputs placed otherwise is a compile without a new trace (logged, and named so
inside ``no_new_compiles``).
"""

import logging

import jax
import jax.monitoring
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from tinax._src import private
from tinax._src.observe.registry import Budgets
from tinax.jit import TraceBudgetError, batched_jit, bounded_jit
from tinax.testing import no_new_compiles

NEVER_COMPILED = "No compile of trace"


@pytest.fixture
def jax_compiles():
    """``count(name)``: how many XLA compiles JAX reported for the function ``name``
    (``jit(name)``) since the test began, from JAX's own compile event."""
    names: list[object] = []

    def listener(event, duration_secs, **metadata):
        if event == private.COMPILE_EVENT:
            names.append(metadata.get("fun_name"))

    jax.monitoring.register_event_duration_secs_listener(listener)

    def count(name):
        return sum(found in (f"jit({name})", f"jit_{name}") for found in names)

    yield count
    jax.monitoring.unregister_event_duration_listener(listener)


def double(x):
    return x * 2


def through_call(step, x):
    step(x)


def through_precompile(step, x):
    step.precompile(x)
    step(x)


def through_lower(step, x):
    step.lower(x).compile()
    step(x)


def through_trace(step, x):
    step.trace(x).lower().compile()
    step(x)


def through_one_lowered_twice(step, x):
    lowered = step.lower(x)
    lowered.compile()
    lowered.compile()  # JAX keeps the executable of a Lowered: no second compile
    step(x)


def through_compiler_options(step, x):
    lowered = step.lower(x)
    lowered.compile()
    lowered.compile(compiler_options={"xla_embed_ir_in_executable": True})  # compiles again


def through_two_lowers(step, x):
    step.lower(x).compile()
    step.trace(x).lower().compile()


PATHS = [
    through_call,
    through_precompile,
    through_lower,
    through_trace,
    through_one_lowered_twice,
    through_compiler_options,
    through_two_lowers,
]


def budgets_row(step):
    """The ``traces`` and ``compiles`` cells of ``step``'s row of ``budgets()``."""
    return str(Budgets([step])).splitlines()[1].split()[2:4]


class TestEveryPathCounts:
    @pytest.mark.parametrize("path", PATHS, ids=lambda path: path.__name__)
    @pytest.mark.parametrize("wrap", [bounded_jit, batched_jit], ids=["bounded", "batched"])
    def test_compiles_used_is_what_jax_compiled(self, jax_compiles, wrap, path):
        step = wrap(double, max_traces=1)
        x = jnp.ones((4, 3))
        path(step, x)
        compiled = jax_compiles("double")
        assert compiled >= 1
        assert (step.traces_used, step.compiles_used, step.cache_loads) == (1, compiled, 0)
        assert budgets_row(step) == ["1/1", str(compiled)]
        assert step.traced_signatures[-1].compile_seconds is not None

    @pytest.mark.parametrize("path", PATHS, ids=lambda path: path.__name__)
    def test_explain_knows_the_trace_was_compiled(self, path):
        step = bounded_jit(double, max_traces=1)
        x = jnp.ones((4, 3))
        path(step, x)
        explanation = step.explain(x)
        assert explanation.reuses is not None and explanation.reuses.number == 1
        assert str(explanation).count("\n") == 0, str(explanation)  # nothing to add

    def test_explain_before_the_compile_still_says_xla_may_compile(self):
        step = bounded_jit(double, max_traces=1)
        x = jnp.ones((4, 3))
        lowered = step.lower(x)
        assert NEVER_COMPILED in str(step.explain(x))
        lowered.compile()
        assert NEVER_COMPILED not in str(step.explain(x))
        assert step.compiles_used == 1

    def test_a_compile_is_of_the_trace_it_compiles_not_the_latest(self, jax_compiles):
        step = bounded_jit(double, max_traces=2)
        first, second = jnp.ones(3), jnp.ones(4)
        step.lower(first)  # trace #1, not compiled
        step(second)  # trace #2, compiled
        step(first)  # trace #1 compiled now
        assert (step.traces_used, step.compiles_used) == (2, jax_compiles("double"))
        for x in (first, second):
            assert str(step.explain(x)).count("\n") == 0, str(step.explain(x))

    def test_a_stage_compiled_in_another_thread_counts(self, jax_compiles):
        import threading

        step = bounded_jit(double, max_traces=1)
        lowered = step.lower(jnp.ones(3))
        worker = threading.Thread(target=lowered.compile)
        worker.start()
        worker.join()
        assert step.compiles_used == jax_compiles("double") == 1

    def test_stages_are_jax_s_own(self):
        step = bounded_jit(double, max_traces=1)
        traced = step.trace(jnp.ones(3))
        lowered = traced.lower()
        assert type(traced) is jax.stages.Traced
        assert type(lowered) is jax.stages.Lowered
        assert type(lowered.compile()) is jax.stages.Compiled


class TestAPrecompiledTraceIsACompiledTrace:
    @pytest.fixture
    def placed(self):
        mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
        batch = np.ones((8, 4), np.float32)
        sharded = jax.device_put(batch, NamedSharding(mesh, P("data")))
        replicated = jax.device_put(batch, NamedSharding(mesh, P()))
        return mesh, sharded, replicated

    @pytest.mark.parametrize("wrap", [bounded_jit, batched_jit], ids=["bounded", "batched"])
    def test_explain_after_precompile_and_calls(self, wrap, placed):
        mesh, sharded, replicated = placed
        step = wrap(double, max_traces=1, mesh=mesh)
        step.precompile(sharded)
        assert str(step.explain(sharded)).count("\n") == 0
        step(sharded)
        assert str(step.explain(sharded)).count("\n") == 0
        assert str(step.explain(replicated)).splitlines()[1] == (
            "XLA would compile again without tracing (compiles_used counts it, the budget does "
            "not): input sharding changed: x: placed P('data',) -> placed P()."
        )

    @pytest.mark.parametrize("wrap", [bounded_jit, batched_jit], ids=["bounded", "batched"])
    def test_a_recompile_after_precompile_is_blamed_on_placement_and_logged(
        self, wrap, placed, caplog, jax_compiles
    ):
        mesh, sharded, replicated = placed
        step = wrap(double, max_traces=1, mesh=mesh)
        step.precompile(sharded)
        step(sharded)
        with pytest.raises(TraceBudgetError) as caught, no_new_compiles():
            step(replicated)
        lines = str(caught.value).splitlines()
        assert lines[2] == (
            "XLA would compile again without tracing (compiles_used counts it, the budget "
            "does not): input sharding changed: x: placed P('data',) -> placed P()."
        )
        assert "precompile" not in str(caught.value)
        with caplog.at_level(logging.INFO, logger="tinax"):
            step(replicated)
        found = [r.getMessage() for r in caplog.records if "without a new trace" in r.getMessage()]
        assert len(found) == 1, found
        assert found[0].endswith(
            "XLA compiled again without a new trace (reusing trace #1; compile 2 of this "
            "object, traces_used=1): input sharding changed: x: placed P('data',) -> placed P()"
        )
        assert (step.traces_used, step.compiles_used) == (1, 2) == (1, jax_compiles("double"))

    def test_a_lowered_stage_compiled_inside_the_scope_is_refused_as_never_compiled(self):
        step = bounded_jit(double, max_traces=1)
        lowered = step.lower(jnp.ones(3))
        with pytest.raises(TraceBudgetError) as caught, no_new_compiles():
            lowered.compile()
        assert str(caught.value).splitlines()[2] == (
            "Its trace was made without a compile (by lower, trace or eval_shape): compile it "
            "before the scope (precompile, or a first call)."
        )
        assert step.compiles_used == 0
        lowered.compile()
        assert step.compiles_used == 1


class TestModels:
    def test_an_nnx_stage_with_propagate_updates_counts(self, jax_compiles):
        from flax import nnx

        def apply_linear(model, x):
            return model(x)

        model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
        step = bounded_jit(apply_linear, max_traces=1, propagate_updates=True)
        x = jnp.ones((4, 3))
        compiled = step.trace(model, x).lower().compile()
        got = compiled(model, x)
        assert step.compiles_used == jax_compiles("apply_linear") == 1
        assert NEVER_COMPILED not in str(step.explain(model, x))
        np.testing.assert_allclose(got, nnx.jit(apply_linear)(model, x))

    def test_an_equinox_stage_with_static_nonarrays_counts(self, jax_compiles):
        import equinox as eqx

        def apply_mlp(model, x):
            return model(x)

        model = eqx.nn.MLP(3, 2, 4, 1, key=jax.random.key(0))
        step = bounded_jit(apply_mlp, max_traces=1, static_nonarrays=True)
        x = jnp.ones(3)
        step.precompile(model, x)
        step(model, x)
        assert step.compiles_used == jax_compiles("apply_mlp") == 1
        assert str(step.explain(model, x)).count("\n") == 0
