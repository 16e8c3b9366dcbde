"""The feature matrix: every mode with every step of an object's life.

The modes (`matrix_cases.MODES`): plain, static argnums/argnames, donation, ``mesh=``,
in/out shardings, ``static_nonarrays=True`` with an equinox module (alone, and with
``donate_argnums``, against ``eqx.filter_jit(donate="all")``),
``propagate_updates=True`` with a flax.nnx module, and ``batched_jit``. The steps: the
first call, a cached call, a retrace, an overrun under each policy, ``explain`` before
and after, ``precompile``, ``lower``/``trace``/``compile``, ``no_new_compiles``,
``budgets()``, the budget error pickled, a warm restart in a fresh process, and eager
transforms around the object (`jax.grad`, `jax.vmap`, `jax.checkpoint`...).

With shape buckets (`matrix_cases.BUCKETED`: plain, ``mesh=``, ``static_nonarrays``
with equinox, ``batched_jit``, each with ``buckets=``), the same steps and a call
outside the buckets under each policy, ``explain``'s ``outside_buckets``,
``precompile_buckets`` (after which ``no_new_compiles`` passes every call inside the
buckets), the ``buckets`` column of ``budgets()``, a bucket refusal pickled, and a warm
restart whose compiles of every bucket are answered by executables compiled ahead (loads
from JAX's persistent cache).

In each cell, the result equals the reference jit's (``jax.jit``, ``eqx.filter_jit``,
``nnx.jit``) bit for bit; ``traces_used``, ``compiles_used`` and ``cache_loads`` equal
what JAX's own events count (`matrix_cases.jax_counts`, by the function's name); and no
message contradicts the counts or names tinax's internals. Hypothesis draws sequences of
steps, which the full product would make too slow. Pairs of options that cannot combine
are wrap-time errors (docs/decisions/jit-options.md).
"""

import contextlib
import copy
import json
import logging
import pathlib
import pickle
import re
import threading

import jax
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import matrix_cases as cases
from helpers.matrix_cases import (
    BUCKET_SIZES,
    BUCKETED,
    BUCKETED_NAMES,
    GIANT,
    HUGE,
    LARGE,
    MODES,
    NAMES,
    SMALL,
    assert_same,
    assert_true_to,
    counts_of,
    facts,
    jax_counts,
)
from helpers.processes import PROGRAMS, run_program
from tinax.jit import (
    Budgets,
    TraceBudgetError,
    TraceBudgetWarning,
    batched_jit,
    bounded_jit,
    budgets,
    exceed_policy,
)
from tinax.testing import no_new_compiles

HERE = pathlib.Path(__file__).resolve().parent


def modes(names=NAMES, table=MODES, **marks):
    """Parametrizes a test by every mode (of ``names``, from ``table``); ``marks`` maps a
    mode's name (spaces and punctuation as ``_``) to a mark for that cell alone."""
    keys = {re.sub(r"\W+", "_", name).strip("_"): name for name in names}
    unknown = set(marks) - set(keys)
    assert not unknown, unknown
    by_name = {keys[key]: mark for key, mark in marks.items()}
    cells = [
        pytest.param(table[name], id=name, marks=[by_name[name]] if name in by_name else [])
        for name in names
    ]
    return pytest.mark.parametrize("mode", cells)


def bucketed(**marks):
    """Parametrizes a test by every mode with shape buckets, as `modes`."""
    return modes(BUCKETED_NAMES, BUCKETED, **marks)


@pytest.fixture
def tinax_log(caplog):
    """Records of the ``tinax`` logger, at every level."""
    caplog.set_level(logging.DEBUG, logger="tinax")
    return lambda: [record for record in caplog.records if record.name == "tinax"]


def counted(mode, obj, size):
    """``obj`` called with ``size``; JAX's count of what the call made."""
    call = mode.arguments(size)
    with jax_counts(mode.jax_name) as jax_count:
        output = mode.call(obj, call)
    return output, jax_count


# --- first call, cached call, retrace, budgets() -------------------------------------------


class TestCalls:
    @modes()
    def test_first_cached_and_retraced_calls_count_as_jax_does(self, mode, tinax_log):
        """One object through its first call, a cached call and a retrace (one object per
        cell keeps the matrix fast: each step is checked as it happens)."""
        obj = mode.build(2)
        before = counts_of(obj)
        output, jax_count = counted(mode, obj, SMALL)
        assert_same(output, mode.expected(SMALL))
        assert facts(obj) == jax_count.facts() == (1, 1, 0)
        [first] = tinax_log()
        assert "trace 1 of max_traces=2" in first.getMessage()
        assert_true_to(before, first.getMessage())

        output, jax_count = counted(mode, obj, SMALL)  # cached: nothing made, nothing said
        assert_same(output, mode.expected(SMALL))
        assert (jax_count.facts(), jax_count.aborted, facts(obj)) == ((0, 0, 0), 0, (1, 1, 0))
        assert len(tinax_log()) == 1

        output, jax_count = counted(mode, obj, LARGE)  # a retrace
        assert_same(output, mode.expected(LARGE))
        assert jax_count.facts() == (1, 1, 0) and facts(obj) == (2, 2, 0)
        _, retrace = tinax_log()
        assert retrace.levelno == logging.INFO
        assert "retrace, trace 2 of max_traces=2" in retrace.getMessage()
        assert_true_to(obj, retrace.getMessage())
        assert_true_to(obj, str(obj.traced_signatures))

        assert obj in budgets()  # budgets(): the row says what JAX counted
        table = str(Budgets((obj,)))
        _, row = table.splitlines()
        assert row.split()[2:5] == ["2/2", "2", "0"]
        cause = r"#2: \S+: f32\[[\d,]*8\] -> f32\[[\d,]*16\] \(shape\)( \(\+\d+ more\))?$"
        assert re.search(cause, row), row
        assert_true_to(obj, table)


# --- overrun, under each policy ------------------------------------------------------------


def refusal_record(record, error, trace, what):
    """The refusal's ``WARNING`` record: one line pointing at the error, which alone
    carries the diagnosis (printed once with logging on)."""
    line = record.getMessage()
    assert record.levelno == logging.WARNING
    head = f"{error.function_name} ({error.location}): trace {trace} {what} and is refused"
    assert line.startswith(head), line
    assert line.endswith("; the TraceBudgetError raised now has the diagnosis."), line
    assert "\n" not in line and "How to fix" in str(error)


def overrun_message(text, used):
    assert f"max_traces=1, traces_used={used}; this call would be trace {used + 1}." in text, text


class TestOverrun:
    @modes()
    def test_raise_refuses_then_warn_and_log_run_and_count(self, mode, tinax_log):
        """One object (``on_exceed=None``) over its budget under each policy in turn,
        set by `exceed_policy`: the object's own ``on_exceed`` is tested by
        tests/test_observe.py."""
        obj = mode.build(1)
        mode.run(obj, SMALL)
        call = mode.arguments(LARGE)
        with jax_counts(mode.jax_name) as jax_count, pytest.raises(TraceBudgetError) as caught:
            with exceed_policy("raise"):
                mode.call(obj, call)
        # JAX began the trace and tinax refused it before the body: nothing finished
        assert (jax_count.facts(), jax_count.aborted, facts(obj)) == ((0, 0, 0), 1, (1, 1, 0))
        overrun_message(str(caught.value), 1)
        assert_true_to(obj, str(caught.value))
        refusal_record(tinax_log()[-1], caught.value, 2, "is over max_traces=1")
        assert_same(mode.run(obj, SMALL), mode.expected(SMALL))  # the earlier trace still runs

        before = counts_of(obj)
        with pytest.warns(TraceBudgetWarning) as caught, exceed_policy("warn"):
            output, jax_count = counted(mode, obj, LARGE)
        assert_same(output, mode.expected(LARGE))
        assert jax_count.facts() == (1, 1, 0) and facts(obj) == (2, 2, 0)
        [warning] = caught
        overrun_message(str(warning.message), 1)
        assert_true_to(before, str(warning.message))

        before = counts_of(obj)
        with exceed_policy("log"):
            output, jax_count = counted(mode, obj, HUGE)
        assert_same(output, mode.expected(HUGE))
        assert jax_count.facts() == (1, 1, 0) and facts(obj) == (3, 3, 0)
        record = tinax_log()[-1]
        assert record.levelno == logging.WARNING
        overrun_message(record.getMessage(), 2)
        assert_true_to(before, record.getMessage())


# --- explain -------------------------------------------------------------------------------


class TestExplain:
    @modes()
    def test_explain_before_and_after_the_first_call(self, mode):
        obj = mode.build(2)
        first, other = mode.arguments(SMALL), mode.arguments(LARGE)
        with jax_counts(mode.jax_name) as jax_count:
            before = obj.explain(*first[0], **first[1])
        assert before.retraces and before.reuses is None
        assert_true_to(obj, str(before))
        assert (jax_count.lowerings, jax_count.compiles, facts(obj)) == (0, 0, (0, 0, 0))
        mode.call(obj, first)
        again = mode.arguments(SMALL)
        with jax_counts(mode.jax_name) as jax_count:
            same = obj.explain(*again[0], **again[1])
            new = obj.explain(*other[0], **other[1])
        assert not same.retraces and same.reuses.number == 1, str(same)
        assert new.retraces and new.differences, str(new)
        for explanation in (same, new):
            assert_true_to(obj, str(explanation))
        assert (jax_count.lowerings, jax_count.compiles, facts(obj)) == (0, 0, (1, 1, 0))
        with jax_counts(mode.jax_name) as jax_count:  # explain was right: JAX agrees
            mode.call(obj, again)
            mode.call(obj, other)
        assert jax_count.facts() == (1, 1, 0) and facts(obj) == (2, 2, 0)

    def test_explain_compiles_nothing_and_counts_nothing(self):
        """explain runs JAX's own checks on a stand-in named as the function (so that JAX's
        errors name it: docs/decisions/rejected-calls.md), never the body: a listener of
        JAX's events sees that stand-in's trace, and no compile, load or count follows."""
        mode = MODES["plain"]
        obj = mode.build(2)
        mode.run(obj, SMALL)
        args, kwargs = mode.arguments(LARGE)
        with jax_counts(mode.jax_name) as jax_count:
            obj.explain(*args, **kwargs)
        assert jax_count.facts()[1:] == (0, 0) and facts(obj) == (1, 1, 0)


# --- precompile, lower, trace, compile -----------------------------------------------------


class TestAheadOfTime:
    @modes()
    def test_precompile_counts_what_jax_made_and_the_call_makes_nothing(self, mode):
        obj = mode.build(2)
        args, kwargs = mode.arguments(SMALL)
        with jax_counts(mode.jax_name) as jax_count:
            obj.precompile(*args, **kwargs)
        assert facts(obj) == jax_count.facts() == (1, 1, 0)
        output, jax_count = counted(mode, obj, SMALL)
        assert_same(output, mode.expected(SMALL))
        assert jax_count.facts() == (0, 0, 0) and facts(obj) == (1, 1, 0)

    @modes()
    def test_explain_after_precompile_knows_the_compile(self, mode):
        obj = mode.build(2)
        args, kwargs = mode.arguments(SMALL)
        obj.precompile(*args, **kwargs)
        mode.run(obj, SMALL)
        args, kwargs = mode.arguments(SMALL)
        text = str(obj.explain(*args, **kwargs))
        assert "No compile of trace #1 has been seen" not in text, text
        assert_true_to(obj, text)

    @modes()
    def test_lower_and_trace_count_a_trace_each(self, mode):
        obj = mode.build(3)
        small, large = mode.arguments(SMALL), mode.arguments(LARGE)
        with jax_counts(mode.jax_name) as jax_count:
            obj.lower(*small[0], **small[1])
            obj.trace(*large[0], **large[1])
        assert (obj.traces_used, obj.compiles_used) == (jax_count.traces, jax_count.compiles)
        assert (obj.traces_used, obj.compiles_used) == (2, 0)

    @modes()
    def test_an_ahead_of_time_compile_is_counted(self, mode):
        """``lower(...).compile()`` and ``trace(...).lower().compile()``, one each."""
        obj = mode.build(2)
        small, large = mode.arguments(SMALL), mode.arguments(LARGE)
        with jax_counts(mode.jax_name) as jax_count:
            obj.lower(*small[0], **small[1]).compile()
            obj.trace(*large[0], **large[1]).lower().compile()
        assert facts(obj) == jax_count.facts() == (2, 2, 0)
        assert_true_to(obj, str(Budgets((obj,))))


# --- no_new_compiles -----------------------------------------------------------------------


class TestNoNewCompiles:
    @modes()
    def test_cached_calls_pass_and_a_new_trace_is_refused_before_jax_traces(self, mode):
        obj = mode.build(4)
        mode.run(obj, SMALL)
        cached, new = mode.arguments(SMALL), mode.arguments(LARGE)
        with jax_counts(mode.jax_name) as jax_count:
            with no_new_compiles():
                output = mode.call(obj, cached)
            with pytest.raises(TraceBudgetError) as caught, no_new_compiles():
                mode.call(obj, new)
        assert_same(output, mode.expected(SMALL))
        assert jax_count.facts() == (0, 0, 0) and facts(obj) == (1, 1, 0)
        text = str(caught.value)
        assert "would trace inside no_new_compiles" in text
        assert "this call would be trace 2" in text
        assert_true_to(obj, text)


# --- eager transforms around an object ------------------------------------------------------


def _scalar(mode, obj, call):
    """``obj`` as a function of its first array argument to a scalar, with the call's other
    arguments fixed (the sum of its output is eager: another function to JAX), and that
    argument."""
    args, kwargs = call
    at = next(i for i, arg in enumerate(args) if isinstance(arg, jax.Array))

    def scalar(value):
        given = (*args[:at], value, *args[at + 1 :])
        return jax.tree.leaves(mode.result(obj(*given, **kwargs), given))[0].sum()

    return scalar, args[at]


def _linearized(f, x):
    _, linear = jax.linearize(f, x)
    return linear(x)


def _pulled_back(f, x):
    y, back = jax.vjp(f, x)
    return back(jax.numpy.ones_like(y))


TRANSFORMS = {  # outside any jax.jit: each compiles jaxprs JAX makes from the trace
    "grad": lambda f, x: jax.grad(f)(x),
    "hessian": lambda f, x: jax.hessian(f)(x),
    "grad of checkpoint": lambda f, x: jax.grad(jax.checkpoint(f))(x),
    "vmap": lambda f, x: jax.vmap(f)(jax.numpy.stack([x, x])),
    "jvp": lambda f, x: jax.jvp(f, (x,), (x,)),
    "linearize": _linearized,
    "vjp": _pulled_back,
}
# what a call of the traced signature hears from explain and no_new_compiles afterwards
COMPILED_ONLY_INSIDE = "trace #1 was compiled only inside a transform (jax.grad, jax.vmap...)"
MADE_INSIDE = (
    "trace #1 was made inside another trace (jax.checkpoint, an outer jax.jit...) and never"
)
# Every mode but those that donate or update in place: donation deletes the arrays a
# transform is taken at (which the test passes again), and under jax.grad an nnx object
# updated in place would keep a tracer (nnx.grad is the way to differentiate one).
UNTRANSFORMED = ("donation", "static_nonarrays with donation", "propagate_updates (nnx)")
TRANSFORMED_MODES = tuple(n for n in NAMES if n not in UNTRANSFORMED)


def transformed_modes():
    return pytest.mark.parametrize(
        "mode", [pytest.param(MODES[n], id=n) for n in TRANSFORMED_MODES]
    )


class TestEagerTransforms:
    """`jax.grad`, `jax.hessian`, `jax.grad` of `jax.checkpoint`, `jax.vmap`, `jax.jvp`,
    `jax.linearize` and `jax.vjp` around an object, outside any jit: JAX traces the
    function once, and compiles what it makes from that trace (each named as the
    function: its JVP, known and linear parts, transpose, batched form), in the call or
    in a later backward pass. ``compiles_used`` counts each; none of them is an executable
    of the trace, so a later call of its signature reuses the trace and compiles, which
    ``explain`` and ``no_new_compiles`` say, and why."""

    @transformed_modes()
    @pytest.mark.parametrize("transform", TRANSFORMS)
    def test_every_compile_is_counted_and_a_later_call_is_said_to_compile(self, mode, transform):
        obj = mode.build(2)
        call = mode.arguments(SMALL)
        f, x = _scalar(mode, obj, call)
        with jax_counts(mode.jax_name) as jax_count:
            TRANSFORMS[transform](f, x)
        assert jax_count.compiles >= 1
        assert facts(obj) == (1, jax_count.compiles, 0)  # traced once, every compile counted
        explanation = obj.explain(*call[0], **call[1])
        assert not explanation.retraces and explanation.reuses.number == 1, str(explanation)
        text = str(explanation)
        assert "this call would reuse trace #1 and compile it;" in text.splitlines()[0], text
        cause = MADE_INSIDE if transform == "grad of checkpoint" else COMPILED_ONLY_INSIDE
        assert cause in text, text
        assert_true_to(obj, text)
        before = obj.compiles_used
        with pytest.raises(TraceBudgetError) as caught, no_new_compiles():
            mode.call(obj, call)
        assert cause in str(caught.value) and "not visible" not in str(caught.value)
        assert_true_to(obj, str(caught.value))
        with jax_counts(mode.jax_name) as jax_count:  # explain was right: JAX compiles
            output = mode.call(obj, call)
        assert_same(output, mode.expected(SMALL))
        assert jax_count.facts() == (0, 1, 0)
        assert facts(obj) == (1, before + 1, 0)
        assert str(obj.explain(*call[0], **call[1])).count("\n") == 0  # compiled now
        with jax_counts(mode.jax_name) as jax_count:  # JAX's caches hold every transform
            TRANSFORMS[transform](f, x)
        assert jax_count.compiles == 0 and obj.compiles_used == before + 1

    @transformed_modes()
    @pytest.mark.parametrize("transform", ["grad", "grad of checkpoint", "vmap"])
    def test_after_a_call_a_transform_compiles_and_is_refused_with_its_cause(self, mode, transform):
        obj = mode.build(2)
        call = mode.arguments(SMALL)
        mode.call(obj, call)
        f, x = _scalar(mode, obj, call)
        with pytest.raises(TraceBudgetError) as caught, no_new_compiles():
            TRANSFORMS[transform](f, x)
        text = str(caught.value)
        assert "would compile inside no_new_compiles, reusing trace #1" in text, text
        assert "XLA would compile what a transform" in text and "from trace #1" in text, text
        assert_true_to(obj, text)
        with jax_counts(mode.jax_name) as jax_count:
            TRANSFORMS[transform](f, x)
        assert jax_count.facts()[0] == 0 and jax_count.compiles >= 1
        assert facts(obj) == (1, 1 + jax_count.compiles, 0)


# --- the budget error travels --------------------------------------------------------------


@modes()
def test_the_budget_error_and_warning_travel(mode):
    """Made by ``trace`` (a counted trace, no compile): the same error a call raises."""
    obj = mode.build(1)
    small, large = mode.arguments(SMALL), mode.arguments(LARGE)
    obj.trace(*small[0], **small[1])
    with pytest.raises(TraceBudgetError) as caught:
        obj.trace(*large[0], **large[1])
    with pytest.warns(TraceBudgetWarning) as warned, exceed_policy("warn"):
        obj.trace(*large[0], **large[1])
    error, warning = caught.value, warned[0].message
    for travel in (lambda value: pickle.loads(pickle.dumps(value)), copy.copy, copy.deepcopy):
        moved = travel(error)
        assert type(moved) is TraceBudgetError and str(moved) == str(error)
        assert moved.closest.number == error.closest.number == 1
        moved = travel(warning)
        assert type(moved) is TraceBudgetWarning and str(moved) == str(warning)


# --- pairs that cannot combine -------------------------------------------------------------


@pytest.mark.parametrize("factory", [bounded_jit, batched_jit], ids=["bounded", "batched"])
@pytest.mark.parametrize(
    ("options", "named", "error"),
    [
        ({"static_nonarrays": True, "static_argnums": 0}, "static_argnums", ValueError),
        ({"static_nonarrays": True, "static_argnames": "x"}, "static_argnames", ValueError),
        ({"static_nonarrays": True, "in_shardings": None}, "in_shardings", ValueError),
        ({"static_nonarrays": True, "propagate_updates": True}, "propagate_updates", ValueError),
        ({"mesh": "mesh8", "device": "cpu0"}, "device", ValueError),
        ({"mesh": "mesh8", "backend": "cpu"}, "backend", ValueError),
    ],
    ids=lambda value: "-".join(value) if isinstance(value, dict) else None,
)
def test_a_pair_that_cannot_combine_is_a_wrap_time_error(factory, options, named, error):
    given = {
        name: cases.mesh8() if value == "mesh8" else jax.devices()[0] if value == "cpu0" else value
        for name, value in options.items()
    }
    with pytest.raises(error, match=rf"\b{named}\b") as caught:
        factory(cases.m_plain, max_traces=1, **given)
    assert_true_to(counts_of(bounded_jit(cases.m_plain, max_traces=1)), str(caught.value))
    decisions = (HERE.parent / "docs" / "decisions" / "jit-options.md").read_text()
    assert named in decisions


# --- sequences of steps, drawn -------------------------------------------------------------

STEPS = ("call", "explain", "precompile", "lower", "trace", "eval_shape", "guarded call")
TRANSFORM_STEPS = ("grad", "vmap")  # eager, around the object (`TestEagerTransforms`)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    name=st.sampled_from(NAMES),
    steps=st.lists(
        st.tuples(st.sampled_from(STEPS + TRANSFORM_STEPS), st.sampled_from([SMALL, LARGE])),
        max_size=5,
    ),
)
def test_every_sequence_of_steps_keeps_the_counts_true(name, steps):
    """After each step, tinax's counts are JAX's, results are the reference's, and
    ``explain`` and ``no_new_compiles`` agree with a model of JAX's caches: a size is
    traced once (by any step but explain), compiled once (by a call or precompile); an
    eager transform compiles what it makes from the trace, once per transform and size,
    which no call runs. (In a mode no transform applies to, a transform step is a call.)"""
    mode = MODES[name]
    obj = mode.build(len(steps) + 1)
    traced, compiled, transformed = set(), set(), set()
    total = cases.JaxCount()
    for step, size in steps:
        if step in TRANSFORM_STEPS and name not in TRANSFORMED_MODES:
            step = "call"
        args, kwargs = call = mode.arguments(size)
        predicted = obj.explain(*args, **kwargs)
        assert predicted.retraces == (size not in traced), str(predicted)
        if size in traced:  # a compile is said to follow exactly when no call compiled it
            assert bool(predicted.compiles) == (size not in compiled), str(predicted)
        assert_true_to(obj, str(predicted))
        refused = step == "guarded call" and size not in compiled
        with jax_counts(mode.jax_name) as jax_count:
            if step == "explain":
                assert_true_to(obj, str(obj.explain(*args, **kwargs)))
            elif refused:
                with pytest.raises(TraceBudgetError) as caught, no_new_compiles():
                    mode.call(obj, call)
                assert_true_to(obj, str(caught.value))
                assert "not visible" not in str(caught.value)
            elif step in ("call", "guarded call"):
                with no_new_compiles() if step == "guarded call" else contextlib.nullcontext():
                    output = mode.call(obj, call)
                assert_same(output, mode.expected(size))
            elif step in TRANSFORM_STEPS:
                TRANSFORMS[step](*_scalar(mode, obj, call))
            else:
                getattr(obj, step)(*args, **kwargs)
        if step in TRANSFORM_STEPS:  # JAX (0.10 and later) records no trace event for a
            # trace made under one; 0.9.2 does: either way, one trace of a size not traced
            assert (jax_count.compiles > 0) == ((step, size) not in transformed), step
            assert jax_count.traces in (0, size not in traced), step
            total.traces += (size not in traced) - jax_count.traces  # counted once, below
            traced.add(size)
            transformed.add((step, size))
        elif step != "explain" and not refused:
            assert jax_count.traces == (size not in traced), (step, str(predicted))
            traced.add(size)
            if step in ("call", "guarded call", "precompile"):
                assert jax_count.compiles == (size not in compiled), step
                compiled.add(size)
        total.traces += jax_count.traces
        total.compiles += jax_count.compiles
        assert facts(obj) == total.facts(), (steps, step)


# --- shape buckets, with plain, mesh=, static_nonarrays and batched_jit ----------------------


OUTSIDE = "was called outside its shape buckets"


def outside_message(mode, text, used, size):
    """``text`` says the call is outside the buckets, at the moment it describes, and
    names the declared axis, the size and the largest bucket."""
    assert OUTSIDE in text and f"traces_used={used}; this call would be trace {used + 1}." in text
    largest = f"{mode.bucket}: {size} is larger than the largest bucket, {BUCKET_SIZES[-1]}"
    assert largest in text, text


def _shapes(call):
    """A call's arrays as `jax.ShapeDtypeStruct`s (their named sharding kept)."""

    def shape(leaf):
        if not isinstance(leaf, jax.Array):
            return leaf
        named = leaf.sharding if isinstance(leaf.sharding, jax.sharding.NamedSharding) else None
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=named)

    return jax.tree.map(shape, call)


class TestBuckets:
    @bucketed()
    def test_inside_the_buckets_calls_count_and_outside_each_policy_says_so(self, mode, tinax_log):
        """One object (``max_traces=4``: its 2 buckets and 2 calls outside them) through a
        first call, a cached call, another bucket, and a call outside the buckets under
        each policy: refused before JAX's trace finishes, warned about, logged."""
        obj = mode.build(4)
        output, jax_count = counted(mode, obj, SMALL)
        assert_same(output, mode.expected(SMALL))
        assert facts(obj) == jax_count.facts() == (1, 1, 0)
        output, jax_count = counted(mode, obj, SMALL)
        assert_same(output, mode.expected(SMALL))
        assert jax_count.facts() == (0, 0, 0) and facts(obj) == (1, 1, 0)
        output, jax_count = counted(mode, obj, LARGE)  # another bucket: expected, DEBUG
        assert_same(output, mode.expected(LARGE))
        assert jax_count.facts() == (1, 1, 0) and facts(obj) == (2, 2, 0)
        first, second = tinax_log()
        assert {first.levelno, second.levelno} == {logging.DEBUG}
        assert "bucket" in first.getMessage() and f": {LARGE}, " in second.getMessage()
        assert_true_to(obj, second.getMessage())

        call = mode.arguments(HUGE)
        with jax_counts(mode.jax_name) as jax_count, pytest.raises(TraceBudgetError) as caught:
            mode.call(obj, call)
        assert (jax_count.facts(), jax_count.aborted, facts(obj)) == ((0, 0, 0), 1, (2, 2, 0))
        outside_message(mode, str(caught.value), 2, HUGE)
        assert "this call was refused before tracing" in str(caught.value)
        assert_true_to(obj, str(caught.value))
        refusal_record(tinax_log()[-1], caught.value, 3, "is outside its shape buckets")

        before = counts_of(obj)
        with pytest.warns(TraceBudgetWarning) as warned, exceed_policy("warn"):
            output, jax_count = counted(mode, obj, HUGE)
        assert_same(output, mode.expected(HUGE))
        assert facts(obj) == (3, 3, 0) and jax_count.facts() == (1, 1, 0)
        [warning] = warned
        outside_message(mode, str(warning.message), 2, HUGE)
        assert "on_exceed='warn': this trace runs and is counted." in str(warning.message)
        assert_true_to(before, str(warning.message))

        before = counts_of(obj)
        with exceed_policy("log"):
            output, jax_count = counted(mode, obj, GIANT)
        assert_same(output, mode.expected(GIANT))
        assert facts(obj) == (4, 4, 0) and jax_count.facts() == (1, 1, 0)
        record = tinax_log()[-1]
        assert record.levelno == logging.WARNING
        outside_message(mode, record.getMessage(), 3, GIANT)
        assert "on_exceed='log': this trace runs and is counted." in record.getMessage()
        assert_true_to(before, record.getMessage())

        table = str(Budgets((obj,)))  # the buckets column: both buckets compiled
        header, row = table.splitlines()
        assert "buckets" in header.split() and re.search(r"\s2/2 \(\d", row), table
        assert row.split()[2:5] == ["4/4", "4", "0"], table
        assert_true_to(obj, table)

    @bucketed()
    def test_explain_names_each_size_outside_the_buckets_before_and_after(self, mode):
        obj = mode.build(3)
        small, huge = mode.arguments(SMALL), mode.arguments(HUGE)
        with jax_counts(mode.jax_name) as jax_count:
            inside, outside = obj.explain(*small[0], **small[1]), obj.explain(*huge[0], **huge[1])
        assert inside.retraces and inside.outside_buckets == (), str(inside)
        [line] = outside.outside_buckets
        assert line.startswith(f"{mode.bucket}: {HUGE} is larger than the largest bucket, {LARGE}")
        assert "this call is outside its shape buckets" in str(outside)
        assert line in str(outside)
        assert (jax_count.lowerings, jax_count.compiles, facts(obj)) == (0, 0, (0, 0, 0))
        assert_true_to(obj, str(inside))
        assert_true_to(obj, str(outside))
        mode.call(obj, small)
        large = mode.arguments(LARGE)
        same, other = obj.explain(*small[0], **small[1]), obj.explain(*large[0], **large[1])
        after = obj.explain(*huge[0], **huge[1])
        assert not same.retraces and same.outside_buckets == (), str(same)
        assert other.retraces and other.outside_buckets == (), str(other)
        assert after.outside_buckets == (line,), str(after)
        for explanation in (same, other, after):
            assert_true_to(obj, str(explanation))
        with pytest.raises(TraceBudgetError) as caught:  # explain was right: refused
            mode.call(obj, huge)
        assert line in str(caught.value)

    @bucketed()
    @pytest.mark.parametrize("example", ["arrays", "shapes"])
    def test_precompile_buckets_leaves_nothing_to_trace_or_compile_inside(self, mode, example):
        """Every combination compiled in threads, counted as JAX counts; afterwards no
        call inside the buckets traces or compiles (under ``mesh=``, the executables are
        those a call with sharded arrays looks up), and one outside is still refused."""
        obj = mode.build(2)
        call = mode.arguments(SMALL)
        args, kwargs = call if example == "arrays" else _shapes(call)
        with jax_counts(mode.jax_name) as jax_count:
            assert obj.precompile_buckets(*args, **kwargs) == len(BUCKET_SIZES)
        assert facts(obj) == jax_count.facts() == (2, 2, 0)
        assert jax_count.aborted == 0
        calls = {size: mode.arguments(size) for size in (*BUCKET_SIZES, HUGE)}
        with jax_counts(mode.jax_name) as jax_count:
            with no_new_compiles():
                outputs = {size: mode.call(obj, calls[size]) for size in BUCKET_SIZES}
            assert obj.precompile_buckets(*args, **kwargs) == 0  # nothing new
            with pytest.raises(TraceBudgetError) as caught:
                mode.call(obj, calls[HUGE])
        for size, output in outputs.items():
            assert_same(output, mode.expected(size))
        assert jax_count.facts() == (0, 0, 0) and facts(obj) == (2, 2, 0)
        outside_message(mode, str(caught.value), 2, HUGE)
        assert "2/2 (" in str(Budgets((obj,)))

    @bucketed()
    def test_precompile_lower_trace_and_compile_are_counted_and_checked(self, mode):
        obj = mode.build(3)
        small, large, huge = (mode.arguments(size) for size in (SMALL, LARGE, HUGE))
        with jax_counts(mode.jax_name) as jax_count:
            obj.precompile(*small[0], **small[1])
            obj.lower(*large[0], **large[1]).compile()
            with pytest.raises(TraceBudgetError) as lowered:
                obj.lower(*huge[0], **huge[1])
            with pytest.raises(TraceBudgetError) as traced:
                obj.trace(*huge[0], **huge[1])
        assert facts(obj) == jax_count.facts() == (2, 2, 0)
        for caught in (lowered, traced):
            outside_message(mode, str(caught.value), 2, HUGE)
            assert_true_to(obj, str(caught.value))
        with jax_counts(mode.jax_name) as jax_count, no_new_compiles():
            output = mode.call(obj, mode.arguments(SMALL))
        assert_same(output, mode.expected(SMALL))
        assert jax_count.facts() == (0, 0, 0)

    @bucketed()
    def test_a_bucket_refusal_travels(self, mode):
        obj = mode.build(2)
        huge = mode.arguments(HUGE)
        with pytest.raises(TraceBudgetError) as caught:
            obj.trace(*huge[0], **huge[1])
        with pytest.warns(TraceBudgetWarning) as warned, exceed_policy("warn"):
            obj.trace(*huge[0], **huge[1])
        error, warning = caught.value, warned[0].message
        outside_message(mode, str(error), 0, HUGE)
        for travel in (lambda value: pickle.loads(pickle.dumps(value)), copy.copy, copy.deepcopy):
            for value in (error, warning):
                moved = travel(value)
                assert type(moved) is type(value) and str(moved) == str(value)
                assert (moved.max_traces, moved.traces_used) == (2, 0)
                assert moved.function_name == mode.jax_name
                assert str(moved.signature) == str(value.signature)
                assert str(HUGE) in str(moved.signature)


BUCKET_STEPS = ("call", "explain", "precompile", "precompile_buckets", "lower", "guarded call")


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    name=st.sampled_from(BUCKETED_NAMES),
    steps=st.lists(
        st.tuples(st.sampled_from(BUCKET_STEPS), st.sampled_from([SMALL, LARGE, HUGE])),
        max_size=5,
    ),
)
def test_every_sequence_of_bucketed_steps_keeps_the_counts_true(name, steps):
    """After each step, tinax's counts are JAX's, and explain agrees with a model: a size
    inside the buckets is traced once (by any step but explain; all of them by
    precompile_buckets) and compiled once (by a call, precompile or precompile_buckets);
    a size outside them is refused before its trace finishes, by every step that traces."""
    mode = BUCKETED[name]
    obj = mode.build(len(BUCKET_SIZES))
    traced, compiled = set(), set()
    total = cases.JaxCount()
    for step, size in steps:
        args, kwargs = call = mode.arguments(size)
        inside = size in BUCKET_SIZES
        predicted = obj.explain(*args, **kwargs)
        assert predicted.retraces == (size not in traced), str(predicted)
        assert bool(predicted.outside_buckets) == (not inside), str(predicted)
        assert_true_to(obj, str(predicted))
        if step == "guarded call":  # no_new_compiles refuses what no call compiled
            refused = size not in compiled
        else:  # the buckets refuse a size outside them; precompile_buckets takes SMALL
            refused = not inside and step not in ("explain", "precompile_buckets")
        made = set()
        with jax_counts(mode.jax_name) as jax_count:
            if step == "explain":
                assert_true_to(obj, str(obj.explain(*args, **kwargs)))
            elif refused:
                scope = no_new_compiles() if step == "guarded call" else contextlib.nullcontext()
                with pytest.raises(TraceBudgetError) as caught, scope:
                    if step.endswith("call"):
                        mode.call(obj, call)
                    else:
                        getattr(obj, step)(*args, **kwargs)
                assert_true_to(obj, str(caught.value))
                assert (OUTSIDE in str(caught.value)) == (step != "guarded call")
            elif step in ("call", "guarded call"):
                with no_new_compiles() if step == "guarded call" else contextlib.nullcontext():
                    assert_same(mode.call(obj, call), mode.expected(size))
                made = {size}
            elif step == "precompile_buckets":
                small = mode.arguments(SMALL)
                assert obj.precompile_buckets(*small[0], **small[1]) == len(
                    set(BUCKET_SIZES) - traced
                )
                made = set(BUCKET_SIZES)
            else:
                getattr(obj, step)(*args, **kwargs)
                made = {size}
        assert jax_count.traces == len(made - traced), (step, size)
        if step != "lower":
            assert jax_count.compiles == len(made - compiled), (step, size)
            compiled |= made
        traced |= made
        total.traces += jax_count.traces
        total.compiles += jax_count.compiles
        assert facts(obj) == total.facts(), (steps, step)


# --- a warm restart, every mode in one pair of fresh processes -----------------------------


def _run_twice(folder, found):
    """`matrix_warm_program.py` run twice with one manifest and one persistent cache."""
    for _ in range(2):
        result = run_program(
            PROGRAMS / "matrix_warm_program.py",
            folder,
            cwd=folder,
            returncode=None,
        )
        if result.returncode != 0:
            found.append(result.stderr)
            return
        found.append(json.loads(result.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module", autouse=True)
def _warm_pair(tmp_path_factory):
    """The pair of fresh processes runs in a thread while this module's other cells run
    (it waits on its subprocesses: the second core works, this one tests)."""
    found = []
    worker = threading.Thread(
        target=_run_twice, args=(tmp_path_factory.mktemp("matrix_warm"), found), daemon=True
    )
    worker.start()
    yield worker, found
    worker.join()


@pytest.fixture
def warm_runs(_warm_pair):
    worker, found = _warm_pair
    worker.join(timeout=600)
    for run in found:
        assert isinstance(run, dict), run  # else the program's stderr
    assert len(found) == 2
    return found


class TestWarmRestart:
    """The second run compiles ahead what the first run's calls compiled (loads from JAX's
    persistent cache, in warm start's threads), and each call's compile is answered by
    it: the call traces and lowers as cold, and compiles nothing."""

    @modes()
    def test_a_cold_run_counts_as_jax_does(self, warm_runs, mode):
        cell = warm_runs[0][mode.name]
        assert cell["same result"], cell
        assert cell["tinax"] == cell["jax"] == [1, 1, 0], cell
        assert cell["answered ahead"] == 0, cell
        assert cell["clean"], cell

    @modes()
    def test_a_warm_run_compiles_nothing_and_counts_as_jax_does(self, warm_runs, mode):
        cell = warm_runs[1][mode.name]
        assert cell["same result"], cell
        assert cell["body runs in the call"] == 1, cell  # traced as cold
        assert cell["tinax"] == cell["jax"] == [1, 0, 0], cell
        # JAX's own compile never ran in the call; in another thread its cache loaded it
        assert cell["answered ahead"] == 1, cell
        assert cell["cache elsewhere"] == [1, 0], cell
        assert cell["clean"], cell

    @bucketed()
    def test_a_cold_run_precompiles_its_buckets_and_the_calls_make_nothing(self, warm_runs, mode):
        cell = warm_runs[0][mode.name]
        assert cell["same result"], cell
        assert cell["precompile_buckets"] == len(BUCKET_SIZES), cell
        assert cell["made by precompile_buckets"] == [2, 2], cell
        assert cell["made in the calls"] == [0, 0, 0], cell
        assert cell["tinax"] == cell["jax"] == [2, 2, 0], cell
        assert cell["answered ahead"] == 0, cell
        assert cell["clean"], cell

    @bucketed()
    def test_a_warm_run_compiles_no_bucket(self, warm_runs, mode):
        """``precompile_buckets`` traces every bucket (nothing is traced ahead), and each
        bucket's compile is answered by the executable warm start loaded ahead."""
        cell = warm_runs[1][mode.name]
        assert cell["same result"], cell
        assert cell["precompile_buckets"] == len(BUCKET_SIZES), cell
        assert cell["made by precompile_buckets"] == [2, 0], cell
        assert cell["made in the calls"] == [0, 0, 0], cell
        assert cell["tinax"] == cell["jax"] == [2, 0, 0], cell
        assert cell["answered ahead"] == len(BUCKET_SIZES), cell
        assert cell["cache elsewhere"] == [len(BUCKET_SIZES), 0], cell
        assert cell["clean"], cell
