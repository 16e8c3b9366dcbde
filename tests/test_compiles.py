"""Compiles: what ``compiles_used`` and ``cache_loads`` count.

Every XLA compile a budgeted object causes counts in ``compiles_used``, on every
path: a call, ``precompile``, ``lower(...).compile()`` and
``trace(...).lower().compile()``; each count here is checked against JAX's own
compile events for that object's function. A compile made ahead of time is a
compile of its trace: ``explain`` knows it, a later compile of the same trace for
inputs placed otherwise is a compile without a new trace (logged, and named so
inside ``no_new_compiles``). An executable JAX loads from its persistent cache is
not a compile: it counts in ``cache_loads``.
"""

import json
import logging
import textwrap

import jax
import jax.monitoring
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from helpers.pages import assert_page_shows, untimed
from helpers.processes import ROOT, run_example, run_program
from tinax._src import private
from tinax._src.observe import compile_events
from tinax._src.observe.registry import Budgets
from tinax.jit import TraceBudgetError, batched_jit, bounded_jit, budgets
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


# --- a compile without a new trace ---------------------------------------------------------


class TestCompilesUsed:
    def test_a_sharding_only_change_counts_a_compile_not_a_trace_and_is_logged(self, caplog):
        mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
        step = bounded_jit(lambda x: x * 2, max_traces=1, mesh=mesh)
        batch = np.ones((8, 4), np.float32)
        sharded = jax.device_put(batch, NamedSharding(mesh, P("data")))
        replicated = jax.device_put(batch, NamedSharding(mesh, P()))
        step(sharded)
        assert (step.traces_used, step.compiles_used) == (1, 1)
        explanation = step.explain(replicated)
        assert explanation.reuses is not None and explanation.reuses.number == 1
        assert str(explanation).splitlines()[1] == (
            "XLA would compile again without tracing (compiles_used counts it, the budget does "
            "not): input sharding changed: x: placed P('data',) -> placed P()."
        )
        with caplog.at_level(logging.INFO, logger="tinax"):
            step(replicated)
            step(replicated)
        assert (step.traces_used, step.compiles_used) == (1, 2)
        found = [r for r in caplog.records if "without a new trace" in r.getMessage()]
        assert len(found) == 1, [r.getMessage() for r in found]
        [record] = found
        assert record.getMessage().endswith(
            "XLA compiled again without a new trace (reusing trace #1; compile 2 of this "
            "object, traces_used=1): input sharding changed: x: placed P('data',) -> placed P()"
        )
        assert str(step.explain(replicated)).count("\n") == 0  # compiled now: nothing to add
        assert step in budgets()
        row = str(Budgets([step])).splitlines()[1]
        assert row.split()[2:4] == ["1/1", "2"]

    def test_a_precompile_counts_its_compile(self):
        step = bounded_jit(lambda x: x + 1, max_traces=1)
        step.precompile(jnp.ones(3))
        step(jnp.ones(3))
        assert (step.traces_used, step.compiles_used) == (1, 1)

    def test_the_placement_fix_never_names_a_spec_that_was_not_recorded(self):
        mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
        step = bounded_jit(lambda x: x * 2, max_traces=1, mesh=mesh)
        step(jax.device_put(np.ones((8, 4), np.float32), NamedSharding(mesh, P("data"))))
        lines = str(step.explain(np.ones((8, 4), np.float32))).splitlines()
        assert lines[-1] == (
            "  sharding: give inputs one sharding on every call: jax.device_put(x, "
            "NamedSharding(mesh, spec)), with the spec x had when traced first (a trace on "
            "Auto axes does not record it)"
        )


def test_compiles_are_counted_for_an_object_that_propagates_nnx_updates():
    nnx = pytest.importorskip("flax.nnx")

    class Counter(nnx.Module):
        def __init__(self):
            self.count = nnx.Variable(jnp.zeros(()))

    def step(model, x):
        model.count[...] = model.count[...] + 1
        return x * 2

    counted = bounded_jit(step, max_traces=1, propagate_updates=True)
    model = Counter()
    counted(model, jnp.ones(3))
    counted(model, jnp.ones(3))
    assert (counted.traces_used, counted.compiles_used) == (1, 1)


# --- cache loads are not compiles ----------------------------------------------------------
# An executable JAX loads from its persistent compilation cache counts in cache_loads, not in
# compiles_used nor in compile_seconds. JAX reads its cache directory once per process, at the
# first compile, so every real load here runs in fresh processes (a worker script run twice
# with one cache directory): the tests' own process never writes to a cache.


SECTION = "Compile once: JAX's persistent cache"

WORKER = textwrap.dedent(
    """
    import json, sys
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)

    from tinax.jit import batched_jit, bounded_jit, budgets
    from tinax.testing import no_new_compiles

    def facts(step):
        return {
            "traces": step.traces_used,
            "compiles": step.compiles_used,
            "loads": step.cache_loads,
            "seconds": [entry.compile_seconds for entry in step.traced_signatures],
        }

    def affine(x):
        return jnp.sin(x) * 2 + 1

    def squared(x):
        return (x ** 2).sum()

    x, batch = jnp.ones(5), jnp.ones((4, 3))
    step = bounded_jit(affine, max_traces=2)
    per_example = batched_jit(squared, max_traces=1)
    step(x)
    per_example(batch)
    out = {"bounded": facts(step), "batched": facts(per_example)}

    jax.clear_caches()  # JAX's caches in memory, not the directory: traced again, loaded
    step(x)
    out["bounded after clear_caches"] = facts(step)
    out["table"] = str(budgets()).splitlines()

    try:  # a plain jax.jit loaded inside the scope: reported, marked as a load
        with no_new_compiles():
            jax.jit(affine)(x)
    except AssertionError as error:
        out["scope"] = str(error).splitlines()

    # After loads, a function no run compiled before (its constant is the run's number)
    # is compiled, and counted so: no mark of a load outlives its compile.
    fresh = bounded_jit(lambda v: v - int(sys.argv[2]), max_traces=1)
    fresh(x)
    out["new in this run"] = facts(fresh)
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The worker run twice, each in a new process, with one cache directory."""
    folder = tmp_path_factory.mktemp("cache_loads")
    script = folder / "worker.py"
    script.write_text(WORKER)
    cache = folder / "cache"
    found = []
    for run in range(2):
        result = run_program(script, cache, run, cwd=folder, devices=None)
        found.append(json.loads(result.stdout.strip().splitlines()[-1]))
    return found


class TestInANewProcess:
    @pytest.mark.parametrize("kind", ["bounded", "batched"])
    def test_a_cold_cache_compiles(self, runs, kind):
        facts = runs[0][kind]
        assert (facts["traces"], facts["compiles"], facts["loads"]) == (1, 1, 0)
        assert facts["seconds"][0] is not None

    @pytest.mark.parametrize("kind", ["bounded", "batched"])
    def test_a_warm_cache_loads_and_compiles_nothing(self, runs, kind):
        facts = runs[1][kind]
        assert (facts["traces"], facts["compiles"], facts["loads"]) == (1, 0, 1)
        assert facts["seconds"] == [None]  # loading is not compile time

    def test_after_clear_caches_the_trace_is_loaded_not_compiled(self, runs):
        facts = runs[0]["bounded after clear_caches"]
        assert (facts["traces"], facts["compiles"], facts["loads"]) == (2, 1, 1)
        assert facts["seconds"][0] is not None and facts["seconds"][1] is None

    def test_budgets_has_a_cache_loads_column(self, runs):
        header, *rows = runs[1]["table"]
        assert header.split()[:7] == [
            "function",
            "location",
            "traces",
            "compiles",
            "cache",
            "loads",
            "trace",
        ]
        affine = next(row for row in rows if row.startswith("affine"))
        assert affine.split()[2:5] == ["2/2", "0", "2"]

    def test_a_load_inside_no_new_compiles_is_reported_as_one(self, runs):
        lines = runs[1]["scope"]
        assert lines[0].startswith("1 JAX compile inside no_new_compiles, entered at ")
        assert lines[1].startswith("  jit(affine)(x: f32[5]), called from ")
        assert lines[1].endswith(
            "; loaded from JAX's persistent cache (traced and lowered again, not compiled)"
        )

    def test_a_new_function_after_loads_is_compiled(self, runs):
        facts = runs[1]["new in this run"]
        assert (facts["compiles"], facts["loads"]) == (1, 0)
        assert facts["seconds"][0] is not None


class TestTheMark:
    """The per-thread mark that tells a load from a compile, driven by JAX's events."""

    def test_a_cache_hit_marks_the_compile_in_progress_as_a_load(self):
        jax.monitoring.record_scalar(private.COMPILE_EVENT, 0.0)  # a compile starts
        assert not compile_events.loaded()
        jax.monitoring.record_event(private.CACHE_HIT_EVENT)
        assert compile_events.loaded()
        jax.monitoring.record_scalar(private.COMPILE_EVENT, 0.0)  # the next one starts
        assert not compile_events.loaded()

    def test_a_request_to_the_cache_clears_the_mark(self):
        jax.monitoring.record_event(private.CACHE_HIT_EVENT)
        jax.monitoring.record_event(private.CACHE_REQUEST_EVENT)
        assert not compile_events.loaded()


def test_long_runs_page_shows_the_real_output_of_two_runs():
    """The page's section shows the example's two runs, timings aside (rows of equal
    compile time may come in either order)."""
    out = run_example("persistent_cache.py")
    assert_page_shows(out, "long-runs.md", 2, section=SECTION, normalize=sorted_untimed)
    page = (ROOT / "docs" / "long-runs.md").read_text()
    section = page[page.index(f"## {SECTION}") :]
    [code] = [block for block in section.split("```python\n")[1:2]]
    example = (ROOT / "examples" / "persistent_cache.py").read_text()
    settings = [line for line in code.split("```")[0].splitlines() if "jax.config" in line]
    assert len(settings) == 3
    assert all(line in example for line in settings)  # the example sets what the page shows
    first, second = out.split("\n=== ")[1:]
    assert "update: traces_used=1, compiles_used=1, cache_loads=0" in first
    assert "update: traces_used=1, compiles_used=0, cache_loads=1" in second


def sorted_untimed(text):
    return sorted(untimed(text).splitlines())
