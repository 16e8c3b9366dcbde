"""The budget error and warning travel as Python's own exceptions do: through
``pickle``, ``copy``, ``copy.deepcopy`` and a process pool, with their text and
every public attribute."""

import concurrent.futures
import copy
import functools
import multiprocessing
import pickle
import warnings

import hypothesis.strategies as st
import jax.numpy as jnp
import pytest
from hypothesis import given, settings

from tinax.jit import Difference, TraceBudgetError, TraceBudgetWarning, bounded_jit

_PUBLIC = (
    "function_name",
    "location",
    "max_traces",
    "traces_used",
    "differences",
)
_SIGNATURE_TEXT = ("number", "arguments", "keywords", "structures", "leaves", "mesh", "config")

ROUND_TRIPS = {
    "pickle": lambda error: pickle.loads(pickle.dumps(error)),
    "pickle-protocol-0": lambda error: pickle.loads(pickle.dumps(error, protocol=0)),
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
}


def scale(x, n, activation):
    return x * n


def _overrun(n_before, n_after, *, fresh_lambda=False, warn=False):
    """The error (or warning) of a second trace with max_traces=1; with
    ``fresh_lambda``, each call passes a new lambda as a static argument."""

    def activation():
        return (lambda v: v) if fresh_lambda else abs

    obj = bounded_jit(
        scale,
        max_traces=1,
        static_argnames=("n", "activation"),
        on_exceed="warn" if warn else "raise",
    )
    obj(jnp.ones(3), n_before, activation())
    if warn:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            obj(jnp.ones(3), n_after, activation())
        [record] = [w for w in caught if issubclass(w.category, TraceBudgetWarning)]
        return record.message
    with pytest.raises(TraceBudgetError) as info:
        obj(jnp.ones(3), n_after, activation())
    return info.value


def assert_same(copied, error):
    assert type(copied) is type(error)
    assert str(copied) == str(error)
    assert copied.args == error.args
    for name in _PUBLIC:
        assert getattr(copied, name) == getattr(error, name), name
    for name in ("signature", "closest"):
        mine, theirs = getattr(copied, name), getattr(error, name)
        assert (mine is None) == (theirs is None)
        if theirs is not None:
            assert str(mine) == str(theirs)
            for field in _SIGNATURE_TEXT:
                assert getattr(mine, field) == getattr(theirs, field), (name, field)


class TestRoundTrips:
    @pytest.mark.parametrize("how", ROUND_TRIPS, ids=list(ROUND_TRIPS))
    @pytest.mark.parametrize("warn", [False, True], ids=["error", "warning"])
    def test_keeps_text_and_attributes(self, how, warn):
        error = _overrun(2, 3, warn=warn)
        assert error.differences  # something to compare
        assert_same(ROUND_TRIPS[how](error), error)

    @pytest.mark.parametrize("how", ROUND_TRIPS, ids=list(ROUND_TRIPS))
    def test_keeps_text_when_a_static_value_does_not_pickle(self, how):
        error = _overrun(2, 2, fresh_lambda=True)
        with pytest.raises(Exception, match="lambda"):
            pickle.dumps(error.signature)  # what a plain pickle of the attributes meets
        assert_same(ROUND_TRIPS[how](error), error)

    def test_keeps_notes_and_user_attributes(self):
        error = _overrun(2, 3)
        error.add_note("while training")
        error.step = 7
        copied = pickle.loads(pickle.dumps(error))
        assert copied.__notes__ == error.__notes__
        assert copied.__notes__[-1] == "while training"
        assert copied.step == 7

    def test_can_be_raised_and_caught_as_an_assertion_error_after_pickling(self):
        copied = pickle.loads(pickle.dumps(_overrun(2, 3)))
        with pytest.raises(AssertionError, match="exceeded its trace budget"):
            raise copied


@functools.cache
def _a_signature():
    return _overrun(2, 3).signature


_text = st.text(max_size=30)
_differences = st.lists(
    st.builds(
        Difference,
        _text,
        _text,
        _text,
        st.lists(st.sampled_from(["shape", "dtype", "static value"]), min_size=1).map(tuple),
        _text,
        fix=st.none() | _text,
    ),
    max_size=3,
).map(tuple)


@settings(max_examples=40, deadline=None)
@given(
    cls=st.sampled_from([TraceBudgetError, TraceBudgetWarning]),
    message=st.text(),
    function_name=_text,
    location=st.none() | _text,
    max_traces=st.integers(0, 2**40),
    traces_used=st.integers(0, 2**40),
    differences=_differences,
    with_closest=st.booleans(),
    how=st.sampled_from(sorted(ROUND_TRIPS)),
)
def test_constructed_diagnoses_round_trip(
    cls,
    message,
    function_name,
    location,
    max_traces,
    traces_used,
    differences,
    with_closest,
    how,
):
    signature = _a_signature()
    error = cls(
        message,
        function_name=function_name,
        location=location,
        max_traces=max_traces,
        traces_used=traces_used,
        signature=signature,
        closest=signature if with_closest else None,
        differences=differences,
    )
    assert_same(ROUND_TRIPS[how](error), error)


# --- a process pool -------------------------------------------------------------------------


def _worker_overrun(static_lambda):
    return _overrun(2, 2 if static_lambda else 3, fresh_lambda=static_lambda)


def overrun_text_in_worker(static_lambda):
    """Runs in the pool's worker: the text of a second trace over a budget of one."""
    return _texts(_worker_overrun(static_lambda))


def _texts(error):
    return (
        str(error),
        *(str(getattr(error, name)) for name in _PUBLIC),
        *(str(getattr(error, name).leaves) for name in ("signature", "closest")),
    )


def raise_overrun_in_worker(static_lambda):
    """Runs in the pool's worker: raises the same error (same lines, same call sites)."""
    raise _worker_overrun(static_lambda)


@pytest.fixture(scope="module")
def pool():
    context = multiprocessing.get_context("spawn")  # fork is unsafe with JAX's threads
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as executor:
        yield executor


class TestProcessPool:
    @pytest.mark.parametrize("static_lambda", [False, True], ids=["shape", "static-lambda"])
    def test_parent_gets_the_workers_diagnosis(self, pool, static_lambda):
        expected = pool.submit(overrun_text_in_worker, static_lambda).result(timeout=120)
        with pytest.raises(TraceBudgetError) as info:
            pool.submit(raise_overrun_in_worker, static_lambda).result(timeout=120)
        assert _texts(info.value) == expected
        assert info.value.differences
        assert pool.submit(abs, -1).result(timeout=60) == 1  # the pool still works
