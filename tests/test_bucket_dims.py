"""Bucket dimensions: a `Dim` ties axes of several arguments into one dimension (counted
once in the combinations and the budget, a call whose tied axes differ refused before it
traces), and `Buckets(where=)` keeps only the combinations that can occur (compiled,
budgeted and allowed on a call); both checked at wrap time."""

import contextlib
import logging
import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinax.jit import (
    BatchedJit,
    Buckets,
    Dim,
    TraceBudgetError,
    TraceBudgetWarning,
    bounded_jit,
    budgets,
)
from tinax.testing import no_new_compiles

ROWS = Dim("rows", (1, 2, 4))
LENGTH = Dim("length", (8, 16, 32))
TOKEN_BUDGET = 32  # rows x length at most this: 6 of the 9 combinations


def within_budget(rows, length):
    return rows * length <= TOKEN_BUDGET


def prefill(tokens, mask, lengths):
    return (tokens * mask).sum(-1) + lengths


def tied_step(**options):
    """tokens and mask: [rows, length]; lengths: [rows]. Two dimensions, 3 x 3."""
    options.setdefault("max_traces", 9)
    axes = {"tokens": {0: ROWS, 1: LENGTH}, "mask": {0: ROWS, 1: LENGTH}, "lengths": {0: ROWS}}
    return bounded_jit(prefill, buckets=options.pop("buckets", axes), **options)


def budgeted_step(**options):
    axes = {"tokens": {0: ROWS, 1: LENGTH}, "mask": {0: ROWS, 1: LENGTH}, "lengths": {0: ROWS}}
    options.setdefault("max_traces", 6)
    return bounded_jit(prefill, buckets=Buckets(axes, where=within_budget), **options)


def call(step, rows, length, mask_length=None, lengths_rows=None):
    """Host arrays, as a server passes them (no eager JAX operation of its own)."""
    return step(
        np.ones((rows, length), np.float32),
        np.ones((rows, length if mask_length is None else mask_length), np.float32),
        np.zeros(rows if lengths_rows is None else lengths_rows, np.float32),
    )


@contextlib.contextmanager
def jax_compiles(name):
    """JAX's own count of the XLA compiles of ``jit(name)``."""
    seen = []
    lock = threading.Lock()

    def heard(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            if kwargs.get("fun_name") == f"jit({name})":
                with lock:
                    seen.append(duration)

    jax.monitoring.register_event_duration_secs_listener(heard)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(heard)


class TestDim:
    def test_is_frozen_hashable_and_normalizes_its_sizes_to_a_tuple(self):
        dim = Dim("length", [8, np.int64(16), 32])
        assert (dim.name, dim.sizes) == ("length", (8, 16, 32))
        assert type(dim.sizes[1]) is int
        assert dim == Dim("length", (8, 16, 32)) and hash(dim) == hash(Dim("length", (8, 16, 32)))
        assert dim != Dim("length", (8, 16))
        with pytest.raises(AttributeError):
            dim.name = "other"  # type: ignore[misc]

    @pytest.mark.parametrize(
        ("name", "sizes", "kind", "argument", "expected"),
        [
            (3, (1,), TypeError, "name", "a str"),
            ("", (1,), ValueError, "name", "an identifier"),
            ("two words", (1,), ValueError, "name", "an identifier"),
            ("n", (), ValueError, "sizes", "a non-empty sequence"),
            ("n", (4, 2), ValueError, "sizes", "increasing (4 is followed by 2)"),
            ("n", {1, 2}, TypeError, "sizes", "a non-empty sequence"),
            ("n", (1, True), TypeError, "sizes[1]", "an int"),
            ("n", (0,), ValueError, "sizes[0]", "positive"),
        ],
    )
    def test_refuses_a_bad_name_or_sizes_naming_the_argument_and_the_value(
        self, name, sizes, kind, argument, expected
    ):
        with pytest.raises(kind) as info:
            Dim(name, sizes)
        message = str(info.value)
        assert message.startswith(f"Dim: {argument} must be "), message
        assert expected in message, message

    @settings(max_examples=80, deadline=None)
    @given(
        name=st.one_of(st.text(max_size=4), st.integers(), st.none()),
        sizes=st.one_of(
            st.lists(st.one_of(st.integers(-2, 40), st.booleans(), st.floats()), max_size=4),
            st.integers(),
            st.text(max_size=3),
            st.frozensets(st.integers(1, 5)),
        ),
    )
    def test_anything_is_a_dim_or_a_type_or_value_error_naming_it(self, name, sizes):
        try:
            dim = Dim(name, sizes)
        except (TypeError, ValueError) as error:
            assert str(error).startswith(("Dim: name must be", "Dim: sizes")), error
        else:
            assert dim.name.isidentifier()
            assert list(dim.sizes) == sorted(set(dim.sizes)) and dim.sizes[0] >= 1


class TestTiedAxes:
    def test_a_dim_counts_once_in_the_budget_check(self):
        with pytest.raises(ValueError) as info:
            tied_step(max_traces=8)
        assert str(info.value) == (
            "BoundedJit: max_traces must be at least the number of combinations of buckets, "
            "9 (3 x 3), since each may trace; got 8."
        )  # five axes, two dimensions: 3 x 3, not 3 ** 5
        with pytest.raises(ValueError, match="buckets of Dim 'length', 3, since"):
            bounded_jit(prefill, max_traces=2, buckets={"tokens": {1: LENGTH}, "mask": {1: LENGTH}})

    def test_tied_axes_trace_once_per_combination(self):
        step = tied_step()
        for rows, length in [(1, 8), (2, 16), (1, 8), (4, 32), (2, 16)]:
            out = call(step, rows, length)
            np.testing.assert_array_equal(out, jnp.full((rows,), float(length)))
        assert step.traces_used == 3

    def test_a_call_whose_tied_axes_differ_is_refused_before_it_traces(self):
        traced = 0

        def counted(tokens, mask, lengths):
            nonlocal traced
            traced += 1
            return prefill(tokens, mask, lengths)

        axes = {"tokens": {0: ROWS, 1: LENGTH}, "mask": {0: ROWS, 1: LENGTH}, "lengths": {0: ROWS}}
        step = bounded_jit(counted, max_traces=9, buckets=axes)
        call(step, 2, 16)
        with pytest.raises(TraceBudgetError) as info:
            call(step, 2, 16, lengths_rows=4)
        assert (step.traces_used, traced) == (1, 1)
        text = str(info.value)
        assert "outside its shape buckets" in text
        assert (
            "  Dim 'rows': tokens axis 0 is 2, mask axis 0 is 2, lengths axis 0 is 4; "
            "the axes given one Dim take one size"
        ) in text
        assert (
            "  Dim 'rows': pad tokens axis 0, mask axis 0 to 4, its size that holds them all"
            in (text)
        )

    def test_tied_axes_that_differ_inside_the_buckets_are_named_by_explain(self):
        step = tied_step()
        explanation = step.explain(jnp.ones((2, 8)), jnp.ones((2, 16)), jnp.zeros(2))
        assert explanation.retraces
        assert explanation.outside_buckets == (
            "Dim 'length': tokens axis 1 is 8, mask axis 1 is 16; the axes given one Dim take "
            "one size",
        )
        assert step.traces_used == 0

    @pytest.mark.parametrize("policy", ["warn", "log"])
    def test_a_policy_that_runs_overruns_reports_it_and_runs_it(self, policy, caplog):
        def loose(tokens, mask, lengths):  # runs whatever the sizes
            return tokens.sum() + mask.sum() + lengths.sum()

        axes = {"tokens": {0: ROWS, 1: LENGTH}, "mask": {0: ROWS, 1: LENGTH}, "lengths": {0: ROWS}}
        step = bounded_jit(loose, max_traces=9, buckets=axes, on_exceed=policy)
        with (
            caplog.at_level(logging.WARNING, logger="tinax"),
            warnings.catch_warnings(record=True) as caught,
        ):
            warnings.simplefilter("always")
            call(step, 2, 16, mask_length=8)
        warned = [w for w in caught if issubclass(w.category, TraceBudgetWarning)]
        assert len(warned) == (policy == "warn")
        assert step.traces_used == 1
        logged = " ".join(record.getMessage() for record in caplog.records)
        assert "Dim 'length'" in (str(warned[0].message) if warned else logged)

    def test_two_different_dims_of_one_name_are_refused_at_wrap_time(self):
        other = Dim("length", (8, 64))
        with pytest.raises(ValueError) as info:
            bounded_jit(prefill, max_traces=9, buckets={"tokens": {1: LENGTH}, "mask": {1: other}})
        assert str(info.value) == (
            "BoundedJit: buckets['mask'][1] must be the Dim named 'length' given before, "
            "Dim(name='length', sizes=(8, 16, 32)); got Dim(name='length', sizes=(8, 64)): "
            "one name is one dimension."
        )

    def test_equal_dims_made_apart_are_one_dimension(self):
        step = bounded_jit(
            prefill,
            max_traces=3,
            buckets={"tokens": {1: Dim("length", (8, 16, 32))}, "mask": {1: LENGTH}},
        )
        assert call(step, 1, 8).shape == (1,)

    def test_precompile_compiles_each_combination_of_the_dimensions_once(self):
        step = tied_step()
        example = (jnp.ones((1, 1)), jnp.ones((1, 1)), jnp.zeros(1))
        assert step.precompile_buckets(*example) == 9
        shapes = sorted(s.leaves[0].text for s in step.traced_signatures)
        assert shapes == sorted(f"f32[{r},{n}]" for r in ROWS.sizes for n in LENGTH.sizes)
        with no_new_compiles():
            call(step, 4, 32)

    def test_a_batched_jit_ties_an_example_axis_to_an_unbatched_argument(self):
        width = Dim("width", (2, 4))
        scores = BatchedJit(
            lambda v, w: (v * w).sum(),
            in_axes=(0, None),
            max_traces=2,
            buckets={"v": {1: width}, "w": {0: width}},
        )
        assert scores.precompile_buckets(jnp.ones((3, 1)), jnp.ones(1)) == 2
        with pytest.raises(TraceBudgetError, match="Dim 'width': v axis 1 is 2, w axis 0 is 4"):
            scores(jnp.ones((3, 2)), jnp.ones(4))
        assert scores.traces_used == 2


class TestWhere:
    def test_max_traces_must_cover_only_the_combinations_where_allows(self):
        with pytest.raises(ValueError) as info:
            budgeted_step(max_traces=5)
        assert str(info.value) == (
            "BoundedJit: max_traces must be at least the number of combinations of buckets "
            "that where allows, 6 (of 9: 3 x 3), since each may trace; got 5."
        )
        assert budgeted_step().buckets.combinations == 6

    def test_precompile_compiles_exactly_the_allowed_combinations(self):
        def budgeted(tokens, mask, lengths):  # its own name: JAX's compile events name it
            return prefill(tokens, mask, lengths)

        axes = {"tokens": {0: ROWS, 1: LENGTH}, "mask": {0: ROWS, 1: LENGTH}, "lengths": {0: ROWS}}
        step = bounded_jit(budgeted, max_traces=6, buckets=Buckets(axes, where=within_budget))
        example = (
            jax.ShapeDtypeStruct((1, 1), jnp.float32),
            jax.ShapeDtypeStruct((1, 1), jnp.float32),
            jax.ShapeDtypeStruct((1,), jnp.float32),
        )
        with jax_compiles("budgeted") as compiled:
            assert step.precompile_buckets(*example) == 6
        assert (step.traces_used, step.compiles_used, len(compiled)) == (6, 6, 6)
        shapes = sorted(s.leaves[0].text for s in step.traced_signatures)
        allowed = [(r, n) for r in ROWS.sizes for n in LENGTH.sizes if r * n <= TOKEN_BUDGET]
        assert shapes == sorted(f"f32[{r},{n}]" for r, n in allowed)
        with no_new_compiles():
            for rows, length in allowed:
                call(step, rows, length)
        assert step.precompile_buckets(*example) == 0

    def test_a_combination_ruled_out_is_refused_before_it_traces(self):
        step = budgeted_step()
        with pytest.raises(TraceBudgetError) as info:
            call(step, 4, 32)  # 128 tokens: every size a bucket, the combination not allowed
        assert step.traces_used == 0
        text = str(info.value)
        assert "  rows=4, length=32: a combination that where rules out (it returned False)" in (
            text
        )
        assert "split the call into calls in combinations that where allows" in text
        call(step, 2, 16)  # allowed: runs
        assert step.traces_used == 1

    def test_explain_names_a_combination_ruled_out(self):
        step = budgeted_step()
        explanation = step.explain(jnp.ones((4, 32)), jnp.ones((4, 32)), jnp.zeros(4))
        assert explanation.outside_buckets == (
            "rows=4, length=32: a combination that where rules out (it returned False)",
        )

    def test_the_budgets_column_counts_only_the_allowed_combinations(self):
        def counted_here(tokens, mask, lengths):  # defined here: its own row in the table
            return prefill(tokens, mask, lengths)

        axes = {"tokens": {0: ROWS, 1: LENGTH}, "mask": {0: ROWS, 1: LENGTH}, "lengths": {0: ROWS}}
        step = bounded_jit(counted_here, max_traces=6, buckets=Buckets(axes, where=within_budget))
        call(step, 1, 8)
        table = str(budgets()).splitlines()  # every live object: columns may be cut
        assert "buckets" in table[0].split()
        (line,) = [line for line in table if line.split()[0].endswith(".counted_here")]
        assert " 1/6 (" in line

    def test_where_needs_every_dimension_to_be_a_dim(self):
        with pytest.raises(ValueError) as info:
            Buckets({"tokens": {0: ROWS, 1: (8, 16)}}, where=within_budget)
        assert str(info.value) == (
            "Buckets: where= is called with one keyword per Dim name, so every axis must be "
            "given a Dim; 'tokens' axis 1 has its own sizes (8, 16): give it a Dim."
        )

    def test_where_that_raises_is_a_value_error_naming_it_and_the_combination(self):
        def broken(rows, length):
            if rows == 2 and length == 16:
                raise ZeroDivisionError("no")
            return True

        with pytest.raises(ValueError) as info:
            Buckets({"tokens": {0: ROWS, 1: LENGTH}}, where=broken)
        assert str(info.value) == (
            "Buckets: where raised ZeroDivisionError for the combination (rows=2, length=16): "
            "no; it must return True or False for every combination of the Dims."
        )

    @pytest.mark.parametrize(
        ("where", "kind", "expected"),
        [
            (3, TypeError, "Buckets: where must be None or a callable; got 3 (int)."),
            (
                lambda rows: True,
                ValueError,
                "Buckets: where must be a callable taking the keywords rows, length",
            ),
            (
                lambda rows, length: 1,
                TypeError,
                "Buckets: where(rows=1, length=8) must be True or False",
            ),
            (
                lambda rows, length: False,
                ValueError,
                "Buckets: where must allow at least one combination of the Dims; it returned "
                "False for all 9.",
            ),
        ],
    )
    def test_where_is_checked_at_wrap_time(self, where, kind, expected):
        with pytest.raises(kind) as info:
            Buckets({"tokens": {0: ROWS, 1: LENGTH}}, where=where)
        assert str(info.value).startswith(expected), info.value

    def test_a_numpy_bool_is_an_answer(self):
        buckets = Buckets({"x": {0: ROWS}}, where=lambda rows: np.bool_(rows > 1))
        assert buckets.combinations == 2

    def test_the_object_shows_the_buckets_given(self):
        buckets = Buckets({"tokens": {0: ROWS}}, where=lambda rows: rows < 4)
        step = bounded_jit(prefill, max_traces=2, buckets=buckets)
        assert step.buckets is buckets
        assert buckets.axes == {"tokens": {0: ROWS}}

    def test_a_path_of_buckets_is_checked_against_the_function(self):
        buckets = Buckets({"tokenz": {0: ROWS}})
        with pytest.raises(ValueError, match="buckets key must be a path from a parameter"):
            bounded_jit(prefill, max_traces=3, buckets=buckets)


AXES = st.dictionaries(
    st.sampled_from(["tokens", "mask", "tokens['a']", "x", "", 3]),
    st.one_of(
        st.dictionaries(
            st.one_of(st.integers(-1, 2), st.booleans(), st.text(max_size=1)),
            st.one_of(
                st.sampled_from([ROWS, LENGTH, Dim("rows", (1, 8)), Dim("other", (2,))]),
                st.lists(st.integers(-1, 20), max_size=3),
                st.integers(),
                st.none(),
            ),
            max_size=3,
        ),
        st.none(),
    ),
    max_size=3,
)
WHERE = st.sampled_from(
    [None, within_budget, 3, lambda rows: rows > 1, lambda **sizes: True, lambda rows, length: 1]
)


class TestWrapTimeProperties:
    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(axes=AXES, where=WHERE, max_traces=st.integers(0, 12), wrapped=st.booleans())
    def test_anything_is_accepted_or_a_documented_error_naming_the_option(
        self, axes, where, max_traces, wrapped
    ):
        try:
            buckets = Buckets(axes, where=where) if wrapped else axes
            built = bounded_jit(prefill, max_traces=max_traces, buckets=buckets)
        except (TypeError, ValueError) as error:
            message = str(error)
            assert message.startswith(("Buckets: ", "BoundedJit: ")), message
            assert any(word in message for word in ("buckets", "axes", "where", "max_traces"))
        else:
            declared = built._plan.buckets
            assert declared is None or declared.combinations <= max_traces
