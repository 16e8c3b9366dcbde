"""Test suites as JAX projects run them: ``filterwarnings = error``, fresh wrappers per test,
parametrized case and hypothesis example, with tinax's pytest plugin loaded or not; and the
plugin's ``--tinax-budgets`` report.

Each test runs a small pytest project (pytester, in this process: JAX is imported once).
Entry-point plugins are off in every inner run (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``), so
that the plugin is loaded exactly when a test says ``-p _tinax_pytestplugin``, whether or
not this environment installed tinax's entry point.
"""

import os
import re
import textwrap
import tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import _tinax_pytestplugin
from helpers.processes import run_program
from tinax._src.diagnosis import elide, report

pytest_plugins = ["pytester"]

PLUGIN = "_tinax_pytestplugin"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIG = """
[tool.pytest.ini_options]
filterwarnings = ["error"]
"""

# Builds a fresh wrapper per test, per parametrized case and per hypothesis example.
FRESH = """
import jax.numpy as jnp
import pytest
from hypothesis import given, settings, strategies as st

from tinax.jit import bounded_jit


def step(x):
    return x * 2.0 + 1.0


@pytest.mark.parametrize("seed", range(6))
def test_fresh_wrapper_per_case(seed):
    fresh = bounded_jit(step, max_traces=1)
    assert fresh(jnp.full(3, float(seed))).tolist() == [2.0 * seed + 1.0] * 3
    assert fresh.traces_used == 1


@settings(max_examples=100, deadline=None, database=None)
@given(st.floats(-1, 1, width=32))
def test_fresh_wrapper_per_example(value):
    fresh = bounded_jit(step, max_traces=1)
    fresh.trace(jnp.full(3, value))  # a trace, as a call makes: no compile per example
    assert fresh.traces_used == 1
"""

# Runs the collected tests in reverse order when TINAX_REVERSE is set.
REVERSE = """
import os


def pytest_collection_modifyitems(items):
    if os.environ.get("TINAX_REVERSE"):
        items.reverse()
"""

# A training loop that rebuilds its step, in a helper that a test calls.
LOOP = """
import jax.numpy as jnp

from tinax.jit import bounded_jit


def update(x):
    return x * 0.5


def train(steps):
    x = jnp.ones(3)
    for _ in range(steps):
        step = bounded_jit(update, max_traces=1)  # rebuilt per step
        x = step(x)
    return x


def make_step():
    return bounded_jit(update, max_traces=1)


def test_training_loop_in_a_helper():
    train(4)


def test_helper_called_per_step():
    x = jnp.ones(3)
    for _ in range(4):
        x = make_step()(x)
"""


@pytest.fixture
def project(pytester, monkeypatch):
    """A project configured as jax, equinox and flax configure theirs, with no plugin
    loaded from entry points."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("TINAX_REVERSE", raising=False)
    pytester.makepyprojecttoml(CONFIG)
    return pytester


PLUGIN_STATES = {
    "plugin off": ("-p", "no:tinax"),
    "plugin on, collecting": ("-p", PLUGIN, "--tinax-budgets"),
}


def run(pytester, *args):
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly", *args)


def order_of(result):
    return [
        line.split(" ")[0].rpartition("[")[2].rstrip("]")
        for line in result.outlines
        if "::test_fresh_wrapper_per_case[" in line
    ]


class TestFreshWrappers:
    @pytest.mark.parametrize("plugin", PLUGIN_STATES.values(), ids=PLUGIN_STATES.keys())
    @pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
    def test_never_warn_per_case_or_example_in_any_order(
        self, project, monkeypatch, plugin, reverse
    ):
        project.makepyfile(test_fresh=FRESH)
        project.makeconftest(REVERSE)
        if reverse:
            monkeypatch.setenv("TINAX_REVERSE", "1")
        result = run(project, "-v", *plugin)
        result.assert_outcomes(passed=7)
        expected = [str(seed) for seed in range(6)]
        assert order_of(result) == (expected[::-1] if reverse else expected)

    @pytest.mark.parametrize("plugin", PLUGIN_STATES.values(), ids=PLUGIN_STATES.keys())
    def test_warn_for_a_wrapper_rebuilt_per_step_in_a_test(self, project, plugin):
        project.makepyfile(test_loop=LOOP)
        result = run(project, *plugin)
        result.assert_outcomes(failed=2)
        text = result.stdout.str()
        for test in ("test_training_loop_in_a_helper", "test_helper_called_per_step"):
            assert (
                f"within one test (test_loop.py::{test}), with the same options, "
                "and each traced the same signature"
            ) in text
        assert "built 3 times at test_loop.py:13 within one test" in text
        assert "built 3 times at test_loop.py:19 within one test" in text
        assert "a fresh wrapper per test, parametrized case or hypothesis example is fine" in text

    def test_warn_per_test_whatever_ran_before(self, project):
        """Warned once per place and test: the second test with the same loop fails too."""
        project.makepyfile(
            test_loop=LOOP
            + textwrap.dedent(
                """

                def test_training_loop_again():
                    train(4)
                """
            )
        )
        result = run(project, "-p", "no:tinax")
        result.assert_outcomes(failed=3)


class TestEntryPoint:
    def test_is_declared_as_tinax_in_pytest11(self):
        with open(os.path.join(ROOT, "pyproject.toml"), "rb") as file:
            project = tomllib.load(file)
        assert project["project"]["entry-points"]["pytest11"] == {"tinax": PLUGIN}
        wheel = project["tool"]["hatch"]["build"]["targets"]["wheel"]
        assert f"src/{PLUGIN}.py" in wheel["only-include"]

    def test_loading_it_imports_neither_jax_nor_tinax(self):
        code = (
            f"import sys, {PLUGIN}; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'tinax')))"
        )
        out = run_program(code).stdout
        assert out.strip() == "[]"

    def test_loading_it_after_an_import_is_silent_under_warnings_as_errors(self, tmp_path):
        """pytest warns when ``-p`` loads an imported module it would rewrite; the plugin
        opts out of rewriting (it asserts nothing)."""
        code = (
            f"import sys, pytest, {PLUGIN}; "
            f"sys.exit(pytest.main(['-W', 'error', '-p', '{PLUGIN}', '--co', '-q']))"
        )
        env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        run_program(code, cwd=tmp_path, env=env, returncode=pytest.ExitCode.NO_TESTS_COLLECTED)


# --- the report ----------------------------------------------------------------------------

# Two functions with known traces and compiles: `double`, built once and traced at three
# shapes; `inc`, built fresh in each of four cases (one dropped per test) and traced once
# each; `idle`, built and never called; `lowered`, traced and never compiled.
BUDGETS = """
import jax
import jax.numpy as jnp
import pytest

from tinax.jit import bounded_jit


def double(x):
    return x * 2.0


def inc(x):
    return x + 1.0


def idle(x):
    return x


def lowered(x):
    return x - 1.0


shared = bounded_jit(double, max_traces=3)
never_called = bounded_jit(idle, max_traces=1)


def test_lowered_only():
    bounded_jit(lowered, max_traces=1).lower(jnp.ones(2))  # a trace, no compile


def test_shapes():
    for size in (1, 2, 3):
        shared(jnp.ones(size))


@pytest.mark.parametrize("seed", range(4))
def test_fresh(seed):
    bounded_jit(inc, max_traces=1)(jnp.full(2, float(seed)))
"""

# `heavy` compiles several times longer than `light`.
TOP = """
import jax.numpy as jnp

from tinax.jit import bounded_jit


def light(x):
    return x + 1.0


def heavy(x):
    for _ in range(300):
        x = jnp.sin(x) * 1.0001 + jnp.cos(x)
    return x


def test_light():
    bounded_jit(light, max_traces=1)(jnp.ones(4))


def test_heavy():
    bounded_jit(heavy, max_traces=1)(jnp.ones(4))
"""


# One object with buckets: each bucket traced once, then a new dtype in one of them.
BUCKETED = """
import jax.numpy as jnp

from tinax.jit import bounded_jit


def total(x):
    return x.sum()


def test_buckets():
    step = bounded_jit(total, max_traces=4, buckets={"x": {0: (2, 4, 8)}})
    for size in (2, 4, 8, 4):
        step(jnp.ones(size))
    step(jnp.ones(2, jnp.int32))
    assert step.traces_used == 4
"""


def line_of(source, text):
    """The line number of the first line of ``source`` that contains ``text``."""
    lines = source.strip("\n").splitlines()  # as pytester writes it
    return next(number for number, line in enumerate(lines, 1) if text in line)


LINES = (
    *("def double", "def inc", "def idle", "def lowered"),
    *("shared =", "never_called =", "bounded_jit(inc", "bounded_jit(lowered"),
)
TIME = r"(-|\d+(\.\d+)? (us|ms|s))"


def rows(result):
    """The report's title and its table rows, with runs of spaces made one."""
    lines = result.outlines
    (start,) = [index for index, line in enumerate(lines) if "tinax budgets" in line]
    end = next(
        (index for index in range(start + 1, len(lines)) if lines[index].startswith("=")),
        len(lines),
    )
    return lines[start], [re.sub(r" +", " ", line.strip()) for line in lines[start + 1 : end]]


class TestBudgetsReport:
    def test_rows_count_objects_traces_compiles_and_retraces(self, project):
        project.makepyfile(test_budgets=BUDGETS)
        result = run(project, "-p", PLUGIN, "--tinax-budgets")
        result.assert_outcomes(passed=6)
        title, table = rows(result)
        assert "tinax budgets: 4 budgeted functions, by compile time" in title
        header, *body = table
        assert header == (
            "compile time trace time objects traces compiles cache loads retraces buckets "
            "function (defined at) built at most common retrace cause"
        )
        at = {text: f"test_budgets.py:{line_of(BUDGETS, text)}" for text in LINES}
        expected = {
            f"{TIME} {TIME} 1 3 3 0 2 - double \\({at['def double']}\\) {at['shared =']} x: shape",
            f"{TIME} {TIME} 4 4 4 0 0 - inc \\({at['def inc']}\\) {at['bounded_jit(inc']} -",
            f"- - 1 0 0 0 0 - idle \\({at['def idle']}\\) {at['never_called =']} -",
            f"- {TIME} 1 1 0 0 0 - lowered \\({at['def lowered']}\\) {at['bounded_jit(lowered']} -",
        }
        assert len(body) == 4
        for pattern in expected:
            assert sum(bool(re.fullmatch(pattern, row)) for row in body) == 1, (pattern, body)
        assert body[-1].startswith("- - 1 0 0 0 0 - idle")  # no compile nor trace time: last

    def test_a_declared_buckets_first_trace_is_a_bucket_not_a_retrace(self, project):
        project.makepyfile(test_bucketed=BUCKETED)
        result = run(project, "-p", PLUGIN, "--tinax-budgets")
        result.assert_outcomes(passed=1)
        _, (_, row) = rows(result)
        defined, built = line_of(BUCKETED, "def total"), line_of(BUCKETED, "step =")
        total = f"total \\(test_bucketed.py:{defined}\\) test_bucketed.py:{built}"
        # 3 buckets of 3 traced, then one real retrace (a new dtype in bucket 2)
        assert re.fullmatch(f"{TIME} {TIME} 1 4 4 0 1 3 of 3 {total} x: (shape, )?dtype", row), row

    def test_top_n_shows_the_most_compile_time(self, project):
        project.makepyfile(test_top=TOP)
        result = run(project, "-p", PLUGIN, "--tinax-budgets=1")
        result.assert_outcomes(passed=2)
        title, table = rows(result)
        assert "tinax budgets: top 1 of 2 budgeted functions, by compile time" in title
        _, row, more = table
        defined, built = line_of(TOP, "def heavy"), line_of(TOP, "bounded_jit(heavy")
        heavy = f"heavy \\(test_top.py:{defined}\\) test_top.py:{built} -"
        assert re.fullmatch(f"{TIME} {TIME} 1 1 1 0 0 - {heavy}", row), row
        assert more == "(1 more: --tinax-budgets shows every one)"

    @pytest.mark.parametrize("plugin", [("-p", PLUGIN), ("-p", "no:tinax")], ids=["on", "off"])
    def test_no_report_without_the_option(self, project, plugin):
        project.makepyfile(test_budgets=BUDGETS)
        result = run(project, *plugin)
        result.assert_outcomes(passed=6)
        assert "tinax budgets" not in result.stdout.str()

    def test_bad_n_is_a_usage_error_naming_the_option(self, project):
        project.makepyfile(test_budgets=BUDGETS)
        result = run(project, "-p", PLUGIN, "--tinax-budgets=many")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert "--tinax-budgets: expected N, a whole number of rows (0 for all); got 'many'" in (
            result.stderr.str()
        )

    def test_collection_stops_with_the_session(self, project):
        from tinax._src.observe import watchers

        before = (watchers.built_hook, watchers.traced_hook)  # an outer --tinax-budgets's
        project.makepyfile(test_budgets=BUDGETS)
        run(project, "-p", PLUGIN, "--tinax-budgets")
        assert (watchers.built_hook, watchers.traced_hook) == before

    def test_an_object_dropped_before_the_end_keeps_its_traces_and_cache_loads(self, monkeypatch):
        """The collector keeps each object's ledger and compile book, never the object nor
        its handle (which holds the function): what it counted outlives them."""
        import gc
        import weakref

        import jax.numpy as jnp

        from tinax._src.observe import compile_events, session_budgets
        from tinax.jit import bounded_jit

        collector = session_budgets.start()
        try:
            monkeypatch.setattr(compile_events, "loaded", lambda: True)  # each compile, a load
            step = bounded_jit(lambda x: x + 1.0, max_traces=1)
            step(jnp.ones(3))
            handle = weakref.ref(step._handle)
            del step
            gc.collect()
            assert handle() is None
        finally:
            session_budgets.stop(collector)
        [record] = [
            found for found in collector.records() if "test_pytest_plugin.py" in found["built_at"]
        ]
        assert (record["traces"], record["cache_loads"]) == (1, 1)


# Says, in the process that ran the session (xdist's controller: the one that prints), whether
# it imported JAX.
JAX_PROBE = """
import sys


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        print("imported jax:", "jax" in sys.modules)
"""


def run_subprocess(pytester, *args):
    """A session in a process of its own (xdist starts its workers from one)."""
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "-p", PLUGIN, *args
    )


def figures(result):
    """The report's title, header, and each row by function: whether it shows a compile
    time and a trace time (timings differ from run to run), then the other columns."""
    title, (header, *body) = rows(result)
    by_function = {}
    for row in body:
        compile_time, trace_time, rest = re.fullmatch(f"{TIME} {TIME} (.*)", row).group(1, 4, 7)
        function = rest.split(" ")[6]
        assert function not in by_function, body
        by_function[function] = (compile_time != "-", trace_time != "-", rest)
    return title, header, by_function


class TestBudgetsReportUnderXdist:
    def test_the_controller_prints_the_rows_a_serial_run_prints(self, project):
        """Each worker sends its objects' records; the controller groups them as a serial
        run does, without importing JAX. An object at module level is built at import,
        once in each worker: it counts once per worker (two objects, the traces of both)."""
        project.makepyfile(test_budgets=BUDGETS)
        project.makeconftest(JAX_PROBE)
        serial = run_subprocess(project, "--tinax-budgets")
        workers = run_subprocess(project, "-p", "xdist", "-n", "2", "--tinax-budgets")
        serial.assert_outcomes(passed=6)
        workers.assert_outcomes(passed=6)
        assert "imported jax: True" in serial.outlines  # the probe sees an import
        assert "imported jax: False" in workers.outlines
        title, header, expected = figures(serial)
        assert set(expected) == {"double", "inc", "idle", "lowered"}
        for module_level in ("double", "idle"):  # built at import: one per worker
            compiled, traced, rest = expected[module_level]
            assert rest.startswith("1 ")
            expected[module_level] = (compiled, traced, "2 " + rest[2:])
        assert figures(workers) == (title, header, expected)

    def test_a_worker_that_went_down_is_named(self, project):
        project.makepyfile(
            test_crash="""
            import os


            def test_crash():
                os._exit(1)
            """
        )
        result = run_subprocess(project, "-p", "xdist", "-n", "2", "--tinax-budgets")
        result.assert_outcomes(failed=1)
        assert re.search(
            r"^\(not counted: the objects of gw\d, which went down before the end of the "
            r"session\)$",
            result.stdout.str(),
            re.MULTILINE,
        ), result.stdout.str()


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab .:,<>_", max_size=90), st.integers(4, 80))
def test_the_tables_text_helpers_are_tinaxs(text, limit):
    """The plugin keeps its own copies (tinax's would import JAX on xdist's controller)."""
    assert _tinax_pytestplugin.tail(text, limit) == elide.tail(text, limit)
    assert _tinax_pytestplugin.words(text, limit) == elide.words(text, limit)


@given(st.none() | st.floats(0, 1e5))
def test_the_tables_durations_are_tinaxs(seconds):
    assert _tinax_pytestplugin.duration(seconds) == report.duration(seconds)


def test_top_parses_whole_numbers_only():
    assert _tinax_pytestplugin._top("0") == 0
    assert _tinax_pytestplugin._top("7") == 7
    for bad in ("-1", "x", "1.5", ""):
        with pytest.raises(Exception, match="expected N"):
            _tinax_pytestplugin._top(bad)
