"""Observability for long runs: logging, the overrun policy, per-trace facts, the registry,
the rebuilt-wrapper warning.

pytest runs with warnings as errors, so every expected `TraceBudgetWarning` is caught
with ``pytest.warns``; an unexpected one fails the test.
"""

import functools
import gc
import inspect
import json
import logging
import os
import re
import threading
import warnings
import weakref

import chex
import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from flax import nnx
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.pages import untimed
from helpers.processes import run_example, run_program
from tinax._src.observe import log, policy, rebuilt, registry, trace_reports
from tinax.jit import (
    BatchedJit,
    BoundedJit,
    TraceBudgetError,
    TraceBudgetWarning,
    batched_jit,
    bounded_jit,
    budgets,
    exceed_policy,
)

HERE = os.path.relpath(__file__)


def here():
    """The caller's ``file:line``, as call sites are shown."""
    return f"{HERE}:{inspect.currentframe().f_back.f_lineno}"


def counting(function):
    """``function`` and a list that gets one entry per run of its body (per trace)."""
    runs = []

    @functools.wraps(function)
    def counted(*args, **kwargs):
        runs.append(1)
        return function(*args, **kwargs)

    return counted, runs


def double(x):
    return x * 2.0


@pytest.fixture(autouse=True)
def _forget_places():
    """Rebuilt wrappers are warned about once per place and process, and the tests of one
    parametrized line build one wrapper each: each test starts from unseen places."""
    rebuilt._sites.clear()


@pytest.fixture
def tinax_log(caplog):
    """Records of the ``tinax`` logger, at every level."""
    caplog.set_level(logging.DEBUG, logger="tinax")
    return lambda: [record for record in caplog.records if record.name == "tinax"]


# --- logging -------------------------------------------------------------------------------


class TestLogging:
    def test_first_trace_is_one_debug_record_when_logging_is_on(self, make_bounded, tinax_log):
        step = make_bounded(double, max_traces=2)
        _, site = step(jnp.ones(3)), here()
        (record,) = tinax_log()
        assert record.levelno == logging.DEBUG
        message = record.getMessage()
        assert message.startswith("double (")
        assert "trace 1 of max_traces=2" in message
        assert f"called from {site}" in message
        assert message.endswith("x: f32[3]")

    def test_retrace_is_one_info_record_with_its_differences(self, make_bounded, tinax_log):
        step = make_bounded(double, max_traces=2)
        step(jnp.ones(3))
        _, site = step(jnp.ones(4)), here()
        first, second = tinax_log()
        assert (first.levelno, second.levelno) == (logging.DEBUG, logging.INFO)
        message = second.getMessage()
        assert "retrace, trace 2 of max_traces=2" in message
        assert f"called from {site}" in message
        assert "Closest earlier trace: #1" in message
        assert "x: f32[3] -> f32[4] (shape)" in message

    def test_a_retrace_after_two_traces_lists_what_each_held(self, make_bounded, tinax_log):
        step = make_bounded(double, max_traces=3)
        for size in (3, 4, 5):
            step(jnp.ones(size))
        message = tinax_log()[-1].getMessage().splitlines()
        assert message[-5:-2] == [
            "  x: f32[4] -> f32[5] (shape)",
            "Traced so far, where this call differs:",
            "  x: #1 f32[3], #2 f32[4]",
        ]

    def test_retrace_is_recorded_when_the_level_is_info(self, make_bounded, caplog):
        caplog.set_level(logging.INFO, logger="tinax")
        step = make_bounded(double, max_traces=2)
        step(jnp.ones(3))  # DEBUG: not recorded
        step(jnp.ones(4))
        (record,) = caplog.records
        assert record.levelno == logging.INFO
        assert "retrace, trace 2" in record.getMessage()

    def test_refused_trace_is_a_one_line_warning_pointing_at_the_error(
        self, make_bounded, tinax_log
    ):
        # With logging on, the diagnosis is printed once, by the error the caller gets;
        # the record is one line that says which trace was refused and where to look.
        step = make_bounded(double, max_traces=1)
        step(jnp.ones(3))
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones(4))
        records = tinax_log()
        assert [record.levelno for record in records] == [logging.DEBUG, logging.WARNING]
        line = records[1].getMessage()
        assert line == (
            f"double ({info.value.location}): trace 2 is over max_traces=1 and is refused "
            "(on_exceed='raise'); x: f32[3] -> f32[4] (shape); the TraceBudgetError raised "
            "now has the diagnosis."
        )
        assert "How to fix" in str(info.value)  # the diagnosis is the error's
        assert "How to fix" not in line and "Closest earlier trace" not in line

    def test_a_refusal_outside_the_buckets_is_one_line_too(self, make_bounded, tinax_log):
        step = make_bounded(double, max_traces=2, buckets={"x": {0: (4, 8)}}, on_exceed="raise")
        step(jnp.ones(4))
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones(5))
        (line,) = [r.getMessage() for r in tinax_log() if r.levelno == logging.WARNING]
        assert line.startswith(
            f"double ({info.value.location}): trace 2 is outside its shape buckets and is "
            "refused (on_exceed='raise'); x, axis 0: 5 is no bucket of (4, 8)"
        )
        assert line.endswith("; the TraceBudgetError raised now has the diagnosis.")
        assert "\n" not in line and "How to fix" in str(info.value)

    def test_cached_call_makes_no_record(self, make_bounded, tinax_log):
        step = make_bounded(double, max_traces=1)
        step(jnp.ones(3))
        step(jnp.ones(3))
        assert len(tinax_log()) == 1

    def test_batched_traces_are_logged_too(self, make_batched, tinax_log):
        step = make_batched(double, max_traces=2)
        step(jnp.ones((2, 3)))
        step(jnp.ones((5, 3)))
        assert [record.levelno for record in tinax_log()] == [logging.DEBUG, logging.INFO]

    def test_only_warnings_are_recorded_when_the_level_is_warning(self, make_bounded, caplog):
        caplog.set_level(logging.WARNING, logger="tinax")
        step = make_bounded(double, max_traces=1)
        step(jnp.ones(3))
        with pytest.raises(TraceBudgetError):
            step(jnp.ones(4))
        assert [record.levelno for record in caplog.records] == [logging.WARNING]

    def test_nothing_is_formatted_when_the_level_is_off(self, make_bounded, caplog, monkeypatch):
        caplog.set_level(logging.WARNING, logger="tinax")

        def must_not_run(*args, **kwargs):
            raise AssertionError("formatted a record nobody logs")

        monkeypatch.setattr(trace_reports.compare, "closest", must_not_run)
        monkeypatch.setattr(trace_reports.report, "explanation_lines", must_not_run)
        monkeypatch.setattr(trace_reports.report, "function_location", must_not_run)
        step = make_bounded(double, max_traces=2)
        step(jnp.ones(3))
        step(jnp.ones(4))  # a retrace: INFO, off
        assert step.traces_used == 2

    def test_library_logger_is_silent_when_logging_is_not_configured(self):
        # A NullHandler keeps logging's last-resort handler from printing WARNING records.
        script = (
            "import jax.numpy as jnp\n"
            "from tinax.jit import TraceBudgetError, bounded_jit\n"
            "step = bounded_jit(lambda x: x, max_traces=1)\n"
            "step(jnp.ones(3))\n"
            "try:\n"
            "    step(jnp.ones(4))\n"
            "except TraceBudgetError:\n"
            "    print('refused')\n"
        )
        result = run_program(script)
        assert result.stdout == "refused\n"
        assert result.stderr == ""
        assert logging.NullHandler in {type(handler) for handler in log.logger.handlers}


# --- the overrun policy --------------------------------------------------------------------


class TestPolicy:
    def test_raises_by_default(self, make_bounded):
        step = make_bounded(double, max_traces=1)
        step(jnp.ones(3))
        with pytest.raises(TraceBudgetError):
            step(jnp.ones(4))
        assert step.traces_used == 1

    def test_warns_then_runs_and_counts_when_the_object_says_warn(self, make_bounded):
        function, runs = counting(double)
        step = make_bounded(function, max_traces=1, on_exceed="warn")
        step(jnp.ones(3))
        with pytest.warns(TraceBudgetWarning) as caught:
            out, site = step(jnp.ones(4)), here()
        assert out.tolist() == [2.0] * 4
        assert step.traces_used == 2 and len(runs) == 2
        assert len(step.traced_signatures) == 2
        (warning,) = caught
        assert f"{warning.filename}:{warning.lineno}".endswith(site)  # the user's line
        message = str(warning.message)
        assert "exceeded its trace budget: max_traces=1, traces_used=1" in message
        assert "on_exceed='warn': this trace runs and is counted." in message
        assert "refused" not in message
        assert "x: f32[3] -> f32[4] (shape)" in message

    def test_warning_carries_the_same_diagnosis_as_the_error(self, make_bounded):
        refusing = make_bounded(double, max_traces=1)
        warning_one = make_bounded(double, max_traces=1, on_exceed="warn")
        for step in (refusing, warning_one):
            step(jnp.ones(3))
        with pytest.raises(TraceBudgetError) as error:
            refusing(jnp.ones(4))
        with pytest.warns(TraceBudgetWarning) as caught:
            warning_one(jnp.ones(4))
        warning = caught[0].message
        for name in ("function_name", "location", "max_traces", "traces_used"):
            assert getattr(warning, name) == getattr(error.value, name)
        assert warning.differences == error.value.differences
        assert warning.closest.number == error.value.closest.number == 1
        assert isinstance(warning, UserWarning)

    def test_every_trace_over_budget_warns_and_counts(self, make_bounded):
        step = make_bounded(double, max_traces=0, on_exceed="warn")
        with pytest.warns(TraceBudgetWarning) as caught:
            for size in (1, 2, 3):
                step(jnp.ones(size))
        assert len(caught) == 3
        assert step.traces_used == 3

    def test_logs_then_runs_and_counts_when_the_object_says_log(self, make_bounded, tinax_log):
        function, runs = counting(double)
        step = make_bounded(function, max_traces=1, on_exceed="log")
        step(jnp.ones(3))
        out = step(jnp.ones(4))  # no warning: pytest would fail on one
        assert out.tolist() == [2.0] * 4
        assert step.traces_used == 2 and len(runs) == 2
        first, second = tinax_log()  # one record per trace: the overrun is the WARNING
        assert (first.levelno, second.levelno) == (logging.DEBUG, logging.WARNING)
        assert "on_exceed='log': this trace runs and is counted." in second.getMessage()
        assert "x: f32[3] -> f32[4] (shape)" in second.getMessage()

    def test_batched_object_warns_when_it_says_warn(self, make_batched):
        step = make_batched(double, max_traces=1, on_exceed="warn")
        step(jnp.ones((2, 3)))
        with pytest.warns(TraceBudgetWarning, match="exceeded its trace budget"):
            out = step(jnp.ones((4, 3)))
        assert out.shape == (4, 3)
        assert step.traces_used == 2

    def test_context_sets_the_policy_for_objects_without_their_own(self, make_bounded):
        step = make_bounded(double, max_traces=0)
        with exceed_policy("warn"), pytest.warns(TraceBudgetWarning):
            step(jnp.ones(3))
        assert step.traces_used == 1
        with pytest.raises(TraceBudgetError):  # the context has ended
            step(jnp.ones(4))

    def test_object_policy_wins_over_the_context(self, make_bounded):
        step = make_bounded(double, max_traces=0, on_exceed="raise")
        with exceed_policy("warn"), pytest.raises(TraceBudgetError):
            step(jnp.ones(3))

    def test_innermost_context_wins(self, make_bounded, tinax_log):
        step = make_bounded(double, max_traces=0)
        with exceed_policy("warn"):
            with exceed_policy("log"):
                step(jnp.ones(3))  # logged, not warned
            with pytest.warns(TraceBudgetWarning):
                step(jnp.ones(4))
        assert [record.levelno for record in tinax_log()] == [logging.WARNING] * 2

    def test_context_can_be_entered_again_and_nested_in_itself(self, make_bounded):
        step = make_bounded(double, max_traces=0)
        scope = exceed_policy("log")
        with scope, scope:
            step(jnp.ones(3))
        with scope:
            step(jnp.ones(4))
        with pytest.raises(TraceBudgetError):
            step(jnp.ones(5))

    def test_context_belongs_to_the_thread_that_entered_it(self, make_bounded):
        step = make_bounded(double, max_traces=0)
        outcome = []

        def call():
            try:
                step(jnp.ones(3))
            except TraceBudgetError:
                outcome.append("raised")

        with exceed_policy("log"):
            thread = threading.Thread(target=call)
            thread.start()
            thread.join(timeout=120)
        assert outcome == ["raised"]

    @pytest.mark.parametrize(
        ("value", "kind"),
        [
            pytest.param("error", ValueError, id="unknown"),
            pytest.param("WARN", ValueError, id="upper-case"),
            pytest.param(None, TypeError, id="None"),
            pytest.param(1, TypeError, id="int"),
        ],
    )
    def test_context_rejects_a_bad_policy_when_called(self, value, kind):
        with pytest.raises(kind, match=r"^exceed_policy: policy must be"):
            exceed_policy(value)

    def test_chex_disable_asserts_counts_without_raising_or_warning(self, make_bounded, tinax_log):
        step = make_bounded(double, max_traces=1, on_exceed="warn")
        step(jnp.ones(3))
        chex.disable_asserts()
        try:
            step(jnp.ones(4))  # no warning either: pytest would fail on one
        finally:
            chex.enable_asserts()
        assert step.traces_used == 2
        records = tinax_log()
        assert records[-1].levelno == logging.WARNING
        assert "chex assertions are disabled" in records[-1].getMessage()

    def test_trace_is_not_counted_when_a_filter_turns_the_warning_into_an_error(self, make_bounded):
        function, runs = counting(double)
        step = make_bounded(function, max_traces=1, on_exceed="warn")
        step(jnp.ones(3))
        with warnings.catch_warnings():
            warnings.simplefilter("error", TraceBudgetWarning)
            with pytest.raises(TraceBudgetWarning):
                step(jnp.ones(4))
        assert step.traces_used == 1 and len(runs) == 1  # nothing ran, the slot is free
        with pytest.warns(TraceBudgetWarning, match="this call would be trace 2"):
            step(jnp.ones(4))
        assert step.traces_used == 2


class TestPolicyFromEnvironment:
    SCRIPT = (
        "import json, warnings\n"
        "import jax.numpy as jnp\n"
        "from tinax.jit import TraceBudgetError, bounded_jit, exceed_policy\n"
        "def outcome(step, context=None):\n"
        "    step(jnp.ones(1))\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        warnings.simplefilter('always')\n"
        "        try:\n"
        "            if context:\n"
        "                with exceed_policy(context):\n"
        "                    step(jnp.ones(2))\n"
        "            else:\n"
        "                step(jnp.ones(2))\n"
        "        except TraceBudgetError:\n"
        "            return 'raise'\n"
        "    return 'warn' if caught else 'log'\n"
        "print(json.dumps([\n"
        "    outcome(bounded_jit(lambda x: x, max_traces=1)),\n"
        "    outcome(bounded_jit(lambda x: x, max_traces=1, on_exceed='raise')),\n"
        "    outcome(bounded_jit(lambda x: x, max_traces=1), context='log'),\n"
        "]))\n"
    )

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            pytest.param("warn", ["warn", "raise", "log"], id="warn"),
            pytest.param(" LOG ", ["log", "raise", "log"], id="log-any-case"),
            pytest.param("", ["raise", "raise", "log"], id="empty"),
        ],
    )
    def test_environment_sets_the_default_below_object_and_context(self, value, expected):
        result = run_program(self.SCRIPT, env={"TINAX_ON_EXCEED": value})
        assert json.loads(result.stdout) == expected

    def test_import_fails_when_the_environment_names_no_policy(self):
        result = run_program("import tinax.jit", env={"TINAX_ON_EXCEED": "warning"}, returncode=1)
        assert "ValueError: tinax: the environment variable TINAX_ON_EXCEED" in result.stderr
        assert "'warning'" in result.stderr

    @settings(max_examples=200, deadline=None)
    @given(value=st.one_of(st.text(max_size=10), st.sampled_from(["warn", " Raise", "LOG\n"])))
    def test_environment_value_is_a_policy_or_a_value_error(self, value):
        try:
            found = policy.policy_from_environment(value)
        except ValueError as error:
            assert "TINAX_ON_EXCEED" in str(error)
            assert value.strip().lower() not in ("raise", "warn", "log")
        else:
            assert found == (value.strip().lower() or None)

    def test_unset_environment_is_no_policy(self):
        assert policy.policy_from_environment(None) is None


# --- per-trace facts -----------------------------------------------------------------------


class TestCallSite:
    def test_is_the_callers_line_when_called_directly(self, make_bounded):
        step = make_bounded(double, max_traces=1)
        _, site = step(jnp.ones(3)), here()
        assert step.traced_signatures[0].call_site == site

    @pytest.mark.parametrize("method", ["lower", "trace", "eval_shape"])
    def test_is_the_callers_line_when_traced_by_a_method(self, make_bounded, method):
        step = make_bounded(double, max_traces=1)
        _, site = getattr(step, method)(jnp.ones(3)), here()
        assert step.traced_signatures[0].call_site == site

    def test_is_the_users_line_when_called_through_vmap(self, make_bounded):
        step = make_bounded(double, max_traces=1)
        _, site = jax.vmap(step)(jnp.ones((2, 3))), here()
        assert step.traced_signatures[0].call_site == site

    @pytest.mark.parametrize("vmap", ["jax", "equinox", "flax"])
    def test_is_the_users_line_through_every_libraries_vmap(self, make_bounded, vmap, tinax_log):
        vmapped = {"jax": jax.vmap, "equinox": eqx.filter_vmap, "flax": nnx.vmap}[vmap]
        step = make_bounded(double, max_traces=1)
        _, site = vmapped(step)(jnp.ones((2, 3))), here()
        assert step.traced_signatures[0].call_site == site
        assert f"#1  {site}" in str(step.traced_signatures)
        assert f"called from {site}" in tinax_log()[0].getMessage()
        line = inspect.currentframe().f_lineno
        with pytest.raises(TraceBudgetError) as info:
            vmapped(step)(jnp.ones((2, 4)))  # line + 2
        closest = f"the closest earlier trace, #1, was called from {site}"
        assert str(info.value).splitlines()[-1] == f"Called from {HERE}:{line + 2}; {closest}."

    def test_is_the_users_line_when_called_through_grad(self, make_bounded):
        step = make_bounded(double, max_traces=1)
        sites = []

        def loss(x):
            out, site = step(x).sum(), here()
            sites.append(site)
            return out

        jax.grad(loss)(jnp.ones(3))
        assert step.traced_signatures[0].call_site == sites[0]

    def test_is_the_users_line_when_called_inside_an_outer_jit(self, make_bounded):
        step = make_bounded(double, max_traces=1)
        sites = []

        def outer(x):
            out, site = step(x) + 1.0, here()
            sites.append(site)
            return out

        jax.jit(outer)(jnp.ones(3))
        assert step.traced_signatures[0].call_site == sites[0]

    def test_is_the_callers_line_when_a_mesh_is_bound(self, make_bounded, mesh8):
        step = make_bounded(double, max_traces=1, mesh=mesh8)
        _, site = step(jnp.ones(8)), here()
        assert step.traced_signatures[0].call_site == site

    def test_is_the_callers_line_for_a_batched_object(self, make_batched):
        step = make_batched(double, max_traces=1)
        _, site = step(jnp.ones((2, 3))), here()
        assert step.traced_signatures[0].call_site == site

    def test_refused_call_keeps_its_call_site_in_the_error(self, make_bounded):
        step = make_bounded(double, max_traces=0)
        line = inspect.currentframe().f_lineno
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones(3))  # line + 2
        assert info.value.signature.call_site == f"{HERE}:{line + 2}"


class TestTimes:
    def test_trace_seconds_is_positive_for_every_trace(self, make_bounded):
        step = make_bounded(double, max_traces=2)
        step(jnp.ones(3))
        step.lower(jnp.ones(4))
        assert all(entry.trace_seconds > 0 for entry in step.traced_signatures)

    def test_compile_seconds_is_positive_when_a_call_compiled(self, make_bounded):
        step = make_bounded(double, max_traces=1)
        step(jnp.ones(3))
        assert step.traced_signatures[0].compile_seconds > 0

    @pytest.mark.parametrize("method", ["lower", "trace", "eval_shape"])
    def test_compile_seconds_is_none_when_nothing_compiled(self, make_bounded, method):
        step = make_bounded(double, max_traces=1)
        getattr(step, method)(jnp.ones(3))
        assert step.traced_signatures[0].compile_seconds is None

    def test_compile_seconds_is_positive_when_a_lowered_trace_is_compiled(self, make_bounded):
        step = make_bounded(double, max_traces=1)
        step.lower(jnp.ones(3)).compile()
        assert step.traced_signatures[0].compile_seconds > 0

    def test_compile_seconds_comes_to_the_trace_when_the_call_after_lower_compiles(
        self, make_bounded
    ):
        step = make_bounded(double, max_traces=1)
        step.lower(jnp.ones(3))
        step(jnp.ones(3))  # JAX reuses the trace and compiles it
        assert step.traces_used == 1
        assert step.traced_signatures[0].compile_seconds > 0

    def test_compile_seconds_is_none_when_the_trace_is_inlined_in_an_outer_jit(self, make_bounded):
        step = make_bounded(lambda x: x * 2.0, max_traces=1)
        jax.jit(lambda x: step(x) + 1.0)(jnp.ones(3))  # both named <lambda>
        assert step.traced_signatures[0].compile_seconds is None

    def test_compile_seconds_is_positive_when_called_through_grad(self, make_bounded):
        step = make_bounded(double, max_traces=1)
        jax.grad(lambda x: step(x).sum())(jnp.ones(3))
        assert step.traced_signatures[0].compile_seconds > 0

    def test_compile_of_another_function_is_not_added(self, make_bounded):
        step = make_bounded(lambda x: x * 2.0, max_traces=1)
        step.lower(jnp.ones(3))
        jax.jit(lambda x: x - 1.0)(jnp.ones(3))  # same name, another function
        assert step.traced_signatures[0].compile_seconds is None

    def test_compile_of_another_lowered_function_is_not_added(self, make_bounded):
        def minus_one(x):
            return x - 1.0

        other = jax.jit(minus_one).lower(jnp.ones(3))  # traced before
        step = make_bounded(double, max_traces=1)
        step.lower(jnp.ones(3))
        other.compile()  # a compile, and no trace event to end the attribution
        assert step.traced_signatures[0].compile_seconds is None

    @pytest.mark.parametrize(
        "function",
        [
            pytest.param(functools.partial(lambda x, k: x * k, k=2.0), id="partial"),
            pytest.param(type("Doubler", (), {"__call__": lambda self, x: x * 2.0})(), id="obj"),
        ],
    )
    def test_compile_seconds_is_positive_for_any_callable(self, make_bounded, function):
        step = make_bounded(function, max_traces=1)
        step(jnp.ones(3))
        assert step.traced_signatures[0].compile_seconds > 0

    def test_compile_seconds_is_positive_for_a_batched_call(self, make_batched):
        step = make_batched(double, max_traces=1)
        step(jnp.ones((2, 3)))
        assert step.traced_signatures[0].compile_seconds > 0

    def test_each_thread_gets_its_own_compile_time(self, make_bounded):
        steps = [make_bounded(lambda x, k=k: x * k, max_traces=1) for k in range(4)]
        barrier = threading.Barrier(len(steps))

        def call(step):
            barrier.wait(timeout=60)
            step(jnp.ones(7))

        threads = [threading.Thread(target=call, args=(step,)) for step in steps]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert all(step.traced_signatures[0].compile_seconds > 0 for step in steps)


# --- the report: the error, the history, the shared-self hint -------------------------------


class TestReport:
    def test_error_names_the_call_sites_of_the_call_and_of_the_closest_trace(self, make_bounded):
        step = make_bounded(double, max_traces=1)
        _, first = step(jnp.ones(3)), here()
        line = inspect.currentframe().f_lineno
        with pytest.raises(TraceBudgetError) as info:
            step(jnp.ones(4))  # line + 2
        closest = f"the closest earlier trace, #1, was called from {first}"
        assert str(info.value).splitlines()[-1] == f"Called from {HERE}:{line + 2}; {closest}."

    def test_warning_names_the_call_sites_too(self, make_bounded):
        step = make_bounded(double, max_traces=1, on_exceed="warn")
        _, first = step(jnp.ones(3)), here()
        with pytest.warns(TraceBudgetWarning) as caught:
            _, second = step(jnp.ones(4)), here()
        last = str(caught[0].message).splitlines()[-1]
        closest = f"the closest earlier trace, #1, was called from {first}"
        assert last == f"Called from {second}; {closest}."

    def test_history_shows_call_site_and_times_of_each_trace(self, make_bounded):
        step = make_bounded(double, max_traces=2)
        _, first = step(jnp.ones(3)), here()
        _, second = step.lower(jnp.ones(4)), here()
        lines = str(step.traced_signatures).splitlines()
        at = lines.index(next(line for line in lines if "called from" in line))
        assert lines[at].split() == ["called", "from", "trace", "time", "compile", "time"]
        one, two = (line.split() for line in lines[at + 1 :])
        assert one[:2] == ["#1", first] and two[:2] == ["#2", second]
        assert two[-1] == "-"  # lowered, never compiled
        assert one[-1] in ("ms", "us", "s") and two[-2] in ("ms", "us", "s")

    def test_history_has_no_facts_when_there_are_no_traces(self, make_bounded):
        assert str(make_bounded(double, max_traces=1).traced_signatures) == "no traces yet"

    def test_hint_says_the_budget_is_shared_when_only_a_static_self_differs(self):
        class Model:
            @functools.partial(bounded_jit, max_traces=1, static_argnames="self")
            def step(self, x):
                return x + 1.0

        Model().step(jnp.ones(3))
        with pytest.raises(TraceBudgetError) as info:
            Model().step(jnp.ones(3))
        assert "  self: a method wrapped at class level has one budget for all instances" in str(
            info.value
        )
        assert "self.step = bounded_jit(self._step, ...)" in str(info.value)

    def test_hint_says_the_budget_is_shared_when_only_a_pytree_self_differs(self):
        import equinox as eqx

        class Model(eqx.Module):
            w: jax.Array

            @functools.partial(bounded_jit, max_traces=1)
            def __call__(self, x):
                return self.w * x

        Model(jnp.ones(3))(jnp.ones(3))
        with pytest.raises(TraceBudgetError) as info:
            Model(jnp.ones(4))(jnp.ones(3))
        assert "self.w: f32[3] -> f32[4] (shape)" in str(info.value)
        assert "  self: a method wrapped at class level" in str(info.value)

    def test_no_shared_self_hint_when_another_argument_differs(self):
        class Model:
            @functools.partial(bounded_jit, max_traces=1, static_argnames="self")
            def step(self, x):
                return x + 1.0

        Model().step(jnp.ones(3))
        with pytest.raises(TraceBudgetError) as info:
            Model().step(jnp.ones(4))
        assert "class level" not in str(info.value)

    def test_no_shared_self_hint_for_a_plain_argument_named_like_self(self, make_bounded):
        step = make_bounded(lambda selfish, x: x, max_traces=1, static_argnames="selfish")
        step(1, jnp.ones(3))
        with pytest.raises(TraceBudgetError) as info:
            step(2, jnp.ones(3))
        assert "class level" not in str(info.value)


# --- the registry --------------------------------------------------------------------------


class TestRegistry:
    def test_lists_a_live_object_of_either_class(self):
        bounded = bounded_jit(double, max_traces=1)
        batched = batched_jit(double, max_traces=1)
        listed = budgets()
        assert any(owner is bounded for owner in listed)
        assert any(owner is batched for owner in listed)

    def test_forgets_an_object_when_it_is_dropped(self, make_bounded):
        step = make_bounded(double, max_traces=2)
        step(jnp.ones(3))
        step.lower(jnp.ones(4))
        alive = weakref.ref(step)
        del step
        gc.collect()
        assert alive() is None  # nothing in tinax kept it
        assert all(isinstance(owner, BoundedJit | BatchedJit) for owner in budgets())

    def test_keeps_few_dead_references_when_many_objects_come_and_go(self):
        for _ in range(1000):
            bounded_jit(double, max_traces=1)
        gc.collect()
        assert len(registry._registry) <= 2 * len(budgets()) + 64

    def test_dropped_object_is_freed_at_once_without_the_garbage_collector(
        self, make_bounded, outside_session_budgets
    ):
        def scale(x):
            return x * 3.0

        step = make_bounded(scale, max_traces=1)
        step(jnp.ones(3))
        parts = (scale, step, step._ledger, step._handle)
        alive = tuple(weakref.ref(part) for part in parts)
        gc.disable()  # no cycle may hold them: refcounting alone must free them
        try:
            del scale, step, parts
            # The compile its last trace awaits holds the ledger weakly: freed at once too.
            assert [ref() is None for ref in alive] == [True, True, True, True]
        finally:
            gc.enable()

    def test_is_sorted_by_total_compile_time(self):
        idle = bounded_jit(double, max_traces=1)
        busy = bounded_jit(lambda x: jnp.sin(x) * 3.0, max_traces=2)
        busy(jnp.ones(3))
        busy(jnp.ones(4))
        listed = list(budgets())
        assert listed.index(busy) < listed.index(idle)
        totals = [sum(e.compile_seconds or 0.0 for e in o.traced_signatures) for o in listed]
        assert totals == sorted(totals, reverse=True)

    def test_prints_one_row_per_object_with_budget_times_and_last_cause(self):
        step = bounded_jit(double, max_traces=1, on_exceed="log")
        step(jnp.ones(3))
        step(jnp.ones(4))
        table = str(registry.Budgets([step]))
        header, row = table.splitlines()
        assert (
            header.split()
            == (
                "function location traces compiles cache loads trace time compile time last retrace"
            ).split()
        )
        assert row.startswith("double  ")
        assert f"{HERE}:" in row
        assert "2/1 over  2         0 " in row  # compiles, then cache loads
        assert len(re.findall(r"\d+(\.\d+)? (us|ms|s)\b", row)) == 2  # trace and compile time
        assert row.endswith("#2: x: f32[3] -> f32[4] (shape)")

    def test_prints_dashes_for_an_object_that_never_traced(self):
        row = str(registry.Budgets([bounded_jit(double, max_traces=3)])).splitlines()[1]
        assert "0/3" in row and row.split()[-3:] == ["-", "-", "-"]

    def test_prints_a_line_when_there_are_no_objects(self):
        assert str(registry.Budgets([])) == "no live budgeted objects"

    def test_stays_consistent_when_eight_threads_build_call_and_drop_objects(self):
        kept = {}
        errors = []
        barrier = threading.Barrier(8)

        def work(worker):
            try:
                barrier.wait(timeout=60)
                mine = []
                for index in range(12):
                    step = bounded_jit(lambda x, k=worker * 100 + index: x + k, max_traces=2)
                    step(jnp.ones(3))
                    step.lower(jnp.ones(2))
                    if index % 3 == 0:
                        mine.append(step)  # others are dropped at once
                    str(budgets())  # read while the others write
                kept[worker] = mine
            except Exception as error:  # pragma: no cover - reported below
                errors.append(error)

        threads = [threading.Thread(target=work, args=(worker,)) for worker in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert not errors
        gc.collect()
        listed = budgets()
        survivors = [step for mine in kept.values() for step in mine]
        assert len(survivors) == 32
        assert all(sum(owner is step for owner in listed) == 1 for step in survivors)
        assert all(step.traces_used == 2 for step in survivors)
        ours = [owner for owner in listed if owner.__qualname__.endswith("<lambda>")]
        assert len({id(owner) for owner in ours}) == len(ours)  # no duplicates


# --- rebuilt wrappers ----------------------------------------------------------------------


class Trainer:
    def step(self, x):
        return x + 1.0


class TestRebuiltWrapper:
    def test_warns_once_when_a_wrapper_is_rebuilt_in_a_loop(self, make_bounded):
        with pytest.warns(TraceBudgetWarning) as caught:
            for _ in range(6):
                step, built = make_bounded(double, max_traces=1), here()
                step(jnp.ones(3))
        (warning,) = caught
        message = str(warning.message)
        assert f"objects for double were built 3 times at {built}" in message
        assert "Build the wrapper once" in message
        assert f"{warning.filename}:{warning.lineno}".endswith(built)

    def test_warns_for_a_wrapper_built_in_a_function_called_per_step(self):
        def make_step():
            return bounded_jit(double, max_traces=1), here()

        with pytest.warns(TraceBudgetWarning, match="built 3 times") as caught:
            for _ in range(4):
                step, built = make_step()
                step(jnp.ones(3))
        assert built in str(caught[0].message)

    def test_warns_for_a_batched_wrapper_rebuilt_in_a_loop(self, make_batched):
        with pytest.warns(TraceBudgetWarning, match="BatchedJit objects for double"):
            for _ in range(3):
                make_batched(double, max_traces=1)(jnp.ones((2, 3)))

    def test_warns_for_a_bound_method_rebuilt_in_a_loop(self):
        trainer = Trainer()
        with pytest.warns(TraceBudgetWarning, match="Trainer.step were built 3 times"):
            for _ in range(3):
                bounded_jit(trainer.step, max_traces=1)(jnp.ones(3))

    def test_is_silent_for_a_fresh_wrapper_per_hypothesis_example(self):
        @settings(max_examples=20, database=None, deadline=None)
        @given(st.floats(-1, 1))
        def fresh_per_example(value):
            bounded_jit(double, max_traces=1).trace(jnp.full(3, value))  # one signature

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fresh_per_example()

    def test_warns_for_a_loop_within_one_hypothesis_example_naming_its_test(self, request):
        warned, examples = [], []

        @settings(max_examples=3, database=None, deadline=None)
        @given(st.integers(2, 9))
        def loop_per_example(size):
            examples.append(size)
            with pytest.warns(TraceBudgetWarning) as caught:
                for _ in range(4):
                    bounded_jit(double, max_traces=1).trace(jnp.ones(size))
            warned.extend(str(warning.message) for warning in caught)

        loop_per_example()
        assert len(examples) >= 2
        assert len(warned) == len(examples)  # once per place and example: each example warns
        assert f"within one hypothesis example of {request.node.nodeid}, with" in warned[0]

    def test_test_run_is_none_outside_tests_and_names_the_test_inside(self, monkeypatch):
        monkeypatch.delenv("PYTEST_CURRENT_TEST")
        assert rebuilt.current_test_run() == (None, None)
        monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/test_x.py::test_a (call)")
        assert rebuilt.current_test_run() == ("tests/test_x.py::test_a (call)", None)

    def test_a_process_started_by_a_test_reads_the_inherited_test(self):
        # Such a process has the variable from its parent, and has not imported pytest.
        code = (
            "import sys; from tinax._src.observe import rebuilt; "
            "assert '_pytest' not in sys.modules; print(rebuilt.current_test_run()[0])"
        )
        result = run_program(code, env={"PYTEST_CURRENT_TEST": "tests/test_x.py::test_a (call)"})
        assert result.stdout.strip() == "tests/test_x.py::test_a (call)"

    def test_a_trace_after_the_object_is_dropped_is_counted_without_the_check(self):
        # The rebuilt-wrapper check reads the object's options at its first trace; a
        # held jax.jit object (its __call__) outlives it, and must still trace.
        step = bounded_jit(lambda x: x + 1.0, max_traces=1)
        ledger, call = step._ledger, step.__call__
        del step
        gc.collect()
        assert call(jnp.ones(2)).tolist() == [2.0, 2.0]
        assert ledger.used == 1

    def test_is_silent_for_distinct_functions_built_at_one_place(self):
        functions = [lambda x, k=k: x * k for k in range(6)]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for function in functions:
                bounded_jit(function, max_traces=1)(jnp.ones(3))

    def test_is_silent_for_a_fresh_closure_per_call(self):
        def make_step(scale):
            def step(x):
                return x * scale

            return bounded_jit(step, max_traces=1)

        for scale in range(5):
            make_step(float(scale))(jnp.ones(3))

    def test_is_silent_when_each_object_traces_another_signature(self):
        for size in range(1, 6):
            bounded_jit(double, max_traces=1)(jnp.ones(size))

    def test_is_silent_when_the_options_differ(self):
        for budget in range(1, 6):
            bounded_jit(double, max_traces=budget)(jnp.ones(3))

    def test_is_silent_for_one_object_called_many_times(self):
        step = bounded_jit(double, max_traces=5)
        for size in (3, 3, 4, 4, 5):
            step(jnp.ones(size))

    def test_is_silent_for_two_methods_of_two_instances(self):
        for trainer in (Trainer(), Trainer(), Trainer()):
            bounded_jit(trainer.step, max_traces=1)(jnp.ones(3))

    def test_counts_an_object_once_however_often_it_is_refused(self):
        def call_refused_three_times():
            step = bounded_jit(double, max_traces=0)
            for _ in range(3):
                with pytest.raises(TraceBudgetError):
                    step(jnp.ones(3))

        call_refused_three_times()
        call_refused_three_times()  # the second object at that place: no warning yet


# --- long runs: the overrun line and the budgets table on real names -----------------------


class TestLongRuns:
    def test_under_warn_with_logging_on_an_overrun_is_printed_once_in_full(self, caplog):
        step = bounded_jit(lambda x: x, max_traces=1, on_exceed="warn")
        step(jnp.ones(3))
        with caplog.at_level(logging.WARNING, logger="tinax"), pytest.warns(Warning) as caught:
            step(jnp.ones(4))
        [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
        message = record.getMessage()
        assert "\n" not in message
        assert message.endswith(
            "trace 2 is over max_traces=1 and runs (on_exceed='warn'); x: f32[3] -> f32[4] "
            "(shape); the TraceBudgetWarning emitted now has the diagnosis."
        )
        [warning] = caught
        assert "How to fix:" in str(warning.message)

    def test_budgets_merges_objects_for_one_function_built_at_one_place(self):
        def train_step(x):
            return x

        steps = [bounded_jit(train_step, max_traces=1) for _ in range(2)]
        for step in steps:
            step(jnp.ones(3))
        header, *rows = str(registry.Budgets(steps)).splitlines()
        assert header.split()[:4] == ["function", "location", "traces", "compiles"]
        [row] = rows
        assert row.startswith("...<locals>.train_step (x2)  ")
        assert row.split()[3:5] == ["2/2", "2"]

    def test_budgets_shows_where_objects_were_built_when_rows_would_read_alike(self):
        def train_step(x):
            return x

        first = bounded_jit(train_step, max_traces=1)
        second = bounded_jit(train_step, max_traces=1)
        header, one, two = str(registry.Budgets([first, second])).splitlines()
        assert header.split()[:4] == ["function", "location", "built", "at"]
        assert one.split()[2] != two.split()[2]

    def test_every_line_fits_beside_built_at_and_buckets_columns(self):
        def a_serving_step_with_a_long_descriptive_name_that_widens_its_column_a_lot(tokens):
            return tokens.sum()

        function = a_serving_step_with_a_long_descriptive_name_that_widens_its_column_a_lot
        sizes = {"tokens": {0: (2, 4)}}
        first = bounded_jit(function, max_traces=2, buckets=sizes, on_exceed="log")
        second = bounded_jit(function, max_traces=2, buckets=sizes, on_exceed="log")
        for step in (first, second):
            step(jnp.ones(2))
            step(jnp.ones(3))  # outside the buckets, logged and run: the last retrace
        header, *rows = str(registry.Budgets([first, second])).splitlines()
        assert header.split()[-3:] == ["buckets", "last", "retrace"]
        assert "built at" in header
        assert all(len(line) <= 200 for line in (header, *rows))
        assert all(row.rstrip().endswith("tokens: f32[2] -> f32[3] (shape)") for row in rows)

    def test_a_trace_of_a_declared_bucket_is_no_retrace_cause(self):
        def bucketed_step(tokens):
            return tokens.sum()

        step = bounded_jit(bucketed_step, max_traces=3, buckets={"tokens": {0: (2, 4, 8)}})
        for size in (2, 4, 8):
            step(jnp.ones(size))
        [row] = str(registry.Budgets([step])).splitlines()[1:]
        assert row.rstrip().endswith(")  -"), row  # the buckets column, then no cause
        assert " 3/3 (" in row

    def test_a_long_nested_name_keeps_its_tail(self):
        def a_step_function_with_a_rather_long_name(x):
            return x

        step = bounded_jit(a_step_function_with_a_rather_long_name, max_traces=1)
        name = str(registry.Budgets([step])).splitlines()[1].split()[0]
        assert name == "...<locals>.a_step_function_with_a_rather_long_name"

    def test_the_last_retrace_column_cuts_a_value_too_long_for_it_in_the_middle(self):
        step = bounded_jit(lambda x, tag: x, max_traces=2, static_argnames="tag")
        step(jnp.ones(3), tag="a" * 30)
        step(jnp.ones(3), tag="a b c d e f g h " * 20)
        row = str(registry.Budgets([step])).splitlines()[1]
        assert len(row) <= 200
        cause = row[row.index("#2: ") :]
        assert cause.startswith("#2: tag: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' -> 'a b c d e f g h")
        assert "..." in cause
        assert cause.endswith("d e f g h '")  # the new value's start and end both show

    def test_the_last_retrace_column_cuts_the_path_and_keeps_both_values_beside_wide_rows(
        self,
    ):
        def a_training_step_function_with_a_long_descriptive_name_that_widens_its_column(x, params):
            return x

        def params(rows):
            weights = jnp.ones((rows, 64), jnp.bfloat16)
            return {"model": {"encoder_block_0": {"attention": {"query_proj": weights}}}}

        step = bounded_jit(
            a_training_step_function_with_a_long_descriptive_name_that_widens_its_column,
            max_traces=2,
        )
        step(jnp.ones(3), params(1024))
        step(jnp.ones(3), params(2048))
        row = str(registry.Budgets([step])).splitlines()[1]
        assert len(row) <= 200
        cause = row[row.index("#2: ") :]
        assert cause.endswith(": bf16[1024,64] -> bf16[2048,64]"), cause  # both values whole
        assert "..." in cause  # the path (and the description) gave way
        # the path keeps its last segment (short, so that a few characters more or less of
        # location, this file's name and line, leave it whole)
        assert "['query_proj']" in cause


# --- the guide -----------------------------------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE_SECTION = "Compile once: JAX's persistent cache"


class TestGuide:
    def test_long_runs_page_shows_the_real_output_of_its_example(self):
        out = run_example("long_runs.py")
        with open(os.path.join(ROOT, "docs", "long-runs.md")) as page_file:
            page = page_file.read()
        # The persistent cache's section shows another example (tests/test_compiles.py).
        start = page.index(f"\n## {CACHE_SECTION}\n")
        page = page[:start] + page[page.index("\n## ", start + 1) :]
        blocks = [untimed(block) for block in re.findall(r"```text\n(.*?)\n```", page, re.S)]
        sections = out.split("\n=== ")[1:]
        assert len(sections) == len(blocks) == 5
        for section in sections:
            title, _, body = section.partition("\n")
            shown = untimed(body.rstrip())
            if title.startswith("the registry"):  # rows sorted by compile time: any order
                header, *rows = shown.splitlines()
                assert any(
                    block.splitlines()[0] == header
                    and sorted(block.splitlines()[1:]) == sorted(rows)
                    for block in blocks
                ), f"section {title!r} is out of date"
            else:
                assert shown in blocks, f"section {title!r} is out of date"
