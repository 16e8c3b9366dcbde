"""Cache loads are not compiles (issue 27): an executable JAX loads from its persistent
compilation cache counts in ``cache_loads``, not in ``compiles_used`` nor in
``compile_seconds``.

JAX reads its cache directory once per process, at the first compile, so every real
load here runs in fresh processes (a worker script run twice with one cache directory):
the tests' own process never writes to a cache.
"""

import json
import pathlib
import textwrap

import jax.monitoring
import pytest

from helpers.pages import assert_page_shows, untimed
from helpers.processes import run_example, run_program
from tinax._src import private
from tinax._src.observe import cache_loads

ROOT = pathlib.Path(__file__).resolve().parents[1]
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
        assert not cache_loads.loaded()
        jax.monitoring.record_event(private.CACHE_HIT_EVENT)
        assert cache_loads.loaded()
        jax.monitoring.record_scalar(private.COMPILE_EVENT, 0.0)  # the next one starts
        assert not cache_loads.loaded()

    def test_a_request_to_the_cache_clears_the_mark(self):
        jax.monitoring.record_event(private.CACHE_HIT_EVENT)
        jax.monitoring.record_event(private.CACHE_REQUEST_EVENT)
        assert not cache_loads.loaded()


def test_long_runs_page_shows_the_real_output_of_two_runs():
    """The page's section shows the example's two runs, timings aside (rows of equal
    compile time may come in either order)."""
    out = run_example("persistent_cache.py")
    assert_page_shows(out, "long-runs.md", 2, section=SECTION, normalize=sorted_untimed)
    page = (ROOT / "docs" / "long-runs.md").read_text()
    section = page[page.index(f"## {SECTION}") :]
    [code] = [block for block in section.split("```python\n")[1:2]]
    assert code.split("```")[0] in (ROOT / "examples" / "persistent_cache.py").read_text()
    first, second = out.split("\n=== ")[1:]
    assert "update: traces_used=1, compiles_used=1, cache_loads=0" in first
    assert "update: traces_used=1, compiles_used=0, cache_loads=1" in second


def sorted_untimed(text):
    return sorted(untimed(text).splitlines())
