"""A batcher's helpers: `bucket_for` (the smallest size that holds a count) and
`pad_ragged` (rows of different lengths in one host array, with their true lengths,
never cut), with every bad input a TypeError or ValueError naming it."""

import bisect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tinax.jit import Dim, bucket_for, pad_ragged

SIZES = (4, 8, 16)


class TestBucketFor:
    @pytest.mark.parametrize(
        ("n", "sizes", "expected"),
        [(0, SIZES, 4), (1, SIZES, 4), (4, SIZES, 4), (5, SIZES, 8), (16, SIZES, 16)],
    )
    def test_the_smallest_size_that_holds_n(self, n, sizes, expected):
        assert bucket_for(n, sizes) == expected
        assert bucket_for(np.int32(n), Dim("length", sizes)) == expected

    def test_a_count_larger_than_every_size_names_it_and_the_largest(self):
        with pytest.raises(ValueError) as info:
            bucket_for(17, SIZES)
        assert str(info.value) == (
            "bucket_for: n is 17, larger than the largest size, 16: nothing is cut; split the "
            "input, or add a larger size."
        )

    @pytest.mark.parametrize(
        ("n", "sizes", "kind", "text"),
        [
            (True, SIZES, TypeError, "bucket_for: n must be an int (a count); got True (bool)."),
            (2.0, SIZES, TypeError, "bucket_for: n must be an int (a count); got 2.0 (float)."),
            (-1, SIZES, ValueError, "bucket_for: n must be a non-negative count; got -1 (int)."),
            (1, (), ValueError, "bucket_for: sizes must be a non-empty sequence"),
            (1, (8, 4), ValueError, "bucket_for: sizes must be increasing (8 is followed by 4)"),
            (1, "48", TypeError, "bucket_for: sizes must be a non-empty sequence"),
            (1, None, TypeError, "bucket_for: sizes must be a non-empty sequence"),
        ],
    )
    def test_bad_input_is_refused_naming_the_argument_and_the_value(self, n, sizes, kind, text):
        with pytest.raises(kind) as info:
            bucket_for(n, sizes)
        assert str(info.value).startswith(text), info.value

    @settings(max_examples=200, deadline=None)
    @given(
        n=st.integers(0, 70),
        sizes=st.lists(st.integers(1, 64), min_size=1, max_size=6, unique=True).map(sorted),
    )
    def test_holds_n_and_no_smaller_size_does(self, n, sizes):
        try:
            size = bucket_for(n, tuple(sizes))
        except ValueError:
            assert n > sizes[-1]
        else:
            assert size in sizes and size >= n
            assert all(smaller < n for smaller in sizes if smaller < size)


def _rows(draw, dtype, trailing, count):
    lengths = draw(st.lists(st.integers(0, 12), min_size=count, max_size=count))
    return [
        draw(hnp.arrays(dtype, (length, *trailing), elements=hnp.from_dtype(np.dtype(dtype))))
        for length in lengths
    ]


@st.composite
def ragged(draw):
    """Rows of one trailing shape and dtype, of lengths 0 to 12."""
    dtype = draw(st.sampled_from([np.int32, np.float32, np.bool_, np.uint8]))
    trailing = draw(st.sampled_from([(), (2,), (1, 3)]))
    return _rows(draw, dtype, trailing, draw(st.integers(1, 6)))


class TestPadRagged:
    def test_rows_are_padded_to_one_bucket_and_their_lengths_returned(self):
        padded, lengths = pad_ragged([np.array([5, 6, 7]), np.array([8])], SIZES)
        np.testing.assert_array_equal(padded, [[5, 6, 7, 0], [8, 0, 0, 0]])
        np.testing.assert_array_equal(lengths, [3, 1])
        assert lengths.dtype == np.int32 and padded.dtype == np.array([5]).dtype

    def test_batch_sizes_add_whole_rows_of_fill_with_length_zero(self):
        padded, lengths = pad_ragged(
            [[1, 2], [3]], Dim("length", (2, 4)), batch_sizes=(1, 4), fill=9
        )
        np.testing.assert_array_equal(padded, [[1, 2], [3, 9], [9, 9], [9, 9]])
        np.testing.assert_array_equal(lengths, [2, 1, 0, 0])

    def test_jax_arrays_are_fetched_to_the_host(self):
        rows = [jnp.arange(3, dtype=jnp.int32), jnp.arange(5, dtype=jnp.int32)]
        padded, lengths = pad_ragged(rows, SIZES)
        assert type(padded) is np.ndarray
        np.testing.assert_array_equal(padded, [[0, 1, 2, 0, 0, 0, 0, 0], [0, 1, 2, 3, 4, 0, 0, 0]])
        np.testing.assert_array_equal(lengths, [3, 5])
        whole, _ = pad_ragged(jnp.ones((2, 3), jnp.float32), SIZES)  # one array of rows
        assert whole.dtype == np.float32 and whole.shape == (2, 4)

    def test_dtypes_combine_as_numpy_stack_combines_them(self):
        padded, _ = pad_ragged([np.ones(2, np.int8), np.ones(1, np.float32)], SIZES)
        assert padded.dtype == np.stack([np.ones(1, np.int8), np.ones(1, np.float32)]).dtype

    def test_trailing_axes_are_kept(self):
        padded, lengths = pad_ragged([np.ones((3, 2, 2)), np.ones((5, 2, 2))], SIZES, fill=-1.0)
        assert padded.shape == (2, 8, 2, 2)
        assert (padded[0, 3:] == -1).all() and (padded[1, :5] == 1).all()
        np.testing.assert_array_equal(lengths, [3, 5])

    def test_a_traced_row_is_refused(self):
        def inside(x):
            pad_ragged([x], SIZES)
            return x

        with pytest.raises(TypeError, match=r"pad_ragged: rows\[0\] must be a concrete array"):
            jax.jit(inside)(jnp.ones(3))

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        rows=ragged(),
        sizes=st.lists(st.integers(1, 16), min_size=1, max_size=4, unique=True).map(sorted),
        batch_sizes=st.one_of(
            st.none(), st.lists(st.integers(1, 8), min_size=1, max_size=3, unique=True).map(sorted)
        ),
        fill=st.sampled_from([0, 1]),
    )
    def test_every_row_kept_whole_with_fill_after_it_and_its_true_length(
        self, rows, sizes, batch_sizes, fill
    ):
        longest = max(len(row) for row in rows)
        try:
            padded, lengths = pad_ragged(rows, sizes, batch_sizes=batch_sizes, fill=fill)
        except ValueError as error:  # never cut: too long, or too many rows
            message = str(error)
            assert longest > sizes[-1] or (batch_sizes and len(rows) > batch_sizes[-1]), message
            assert "nothing is cut" in message
            return
        height = len(rows) if batch_sizes is None else bucket_for(len(rows), batch_sizes)
        width = sizes[bisect.bisect_left(sizes, longest)]
        assert padded.shape == (height, width, *rows[0].shape[1:])
        assert padded.dtype == rows[0].dtype
        assert lengths.dtype == np.int32 and lengths.shape == (height,)
        for index, row in enumerate(rows):
            assert lengths[index] == len(row)
            np.testing.assert_array_equal(padded[index, : len(row)], row)
            assert (padded[index, len(row) :] == fill).all()
        assert (lengths[len(rows) :] == 0).all()
        assert (padded[len(rows) :] == fill).all()

    @pytest.mark.parametrize(
        ("rows", "options", "kind", "text"),
        [
            ([], {}, ValueError, "pad_ragged: rows must be a non-empty sequence"),
            ("abc", {}, TypeError, "pad_ragged: rows must be a non-empty sequence"),
            ({"a": [1]}, {}, TypeError, "pad_ragged: rows must be a non-empty sequence"),
            ((r for r in [[1]]), {}, TypeError, "pad_ragged: rows must be a non-empty sequence"),
            ([[1], ["a"]], {}, TypeError, "pad_ragged: rows[1] must be an array of numbers"),
            ([[1], [[1], [2, 3]]], {}, TypeError, "pad_ragged: rows[1] must be an array of"),
            ([3], {}, ValueError, "pad_ragged: rows[0] must be an array of rank 1 or more"),
            (
                [np.ones((2, 3)), np.ones((2, 4))],
                {},
                ValueError,
                "pad_ragged: rows[1] must be of shape (length, 3), as rows[0] is; got an array "
                "of shape (2, 4).",
            ),
            ([[1] * 17], {}, ValueError, "pad_ragged: rows[0] has length 17, larger than"),
            ([[1]] * 3, {"batch_sizes": (1, 2)}, ValueError, "pad_ragged: rows has 3 rows"),
            ([[1]], {"batch_sizes": "ab"}, TypeError, "pad_ragged: batch_sizes must be"),
            ([[1]], {"fill": 0.5}, ValueError, "pad_ragged: fill must be a value that the rows'"),
            ([[1]], {"fill": "x"}, TypeError, "pad_ragged: fill must be a number"),
        ],
        ids=[
            "empty",
            "str",
            "mapping",
            "generator",
            "strings",
            "ragged-row",
            "scalar-row",
            "trailing-shape",
            "too-long",
            "too-many-rows",
            "bad-batch-sizes",
            "fill-not-held",
            "fill-not-a-number",
        ],
    )
    def test_bad_input_is_refused_naming_the_argument(self, rows, options, kind, text):
        with pytest.raises(kind) as info:
            pad_ragged(rows, SIZES, **options)
        assert str(info.value).startswith(text), info.value

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        rows=st.one_of(
            st.lists(
                st.one_of(
                    st.lists(st.one_of(st.integers(-3, 3), st.floats(), st.text(max_size=1))),
                    st.integers(),
                    st.none(),
                    hnp.arrays(
                        st.sampled_from([np.int32, np.float64, np.bool_, np.complex64]),
                        hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
                    ),
                ),
                max_size=4,
            ),
            st.integers(),
            st.none(),
            st.text(max_size=3),
        ),
        sizes=st.one_of(
            st.lists(st.integers(-1, 6), max_size=3), st.integers(), st.just(Dim("n", (2, 4)))
        ),
        batch_sizes=st.one_of(st.none(), st.lists(st.integers(-1, 4), max_size=2), st.floats()),
        fill=st.one_of(st.integers(-300, 300), st.floats(), st.text(max_size=1), st.none()),
    )
    def test_anything_is_padded_or_refused_with_a_documented_error(
        self, rows, sizes, batch_sizes, fill
    ):
        try:
            padded, lengths = pad_ragged(rows, sizes, batch_sizes=batch_sizes, fill=fill)
        except (TypeError, ValueError) as error:
            message = str(error)
            assert message.startswith("pad_ragged: "), message
            assert any(word in message for word in ("rows", "sizes", "batch_sizes", "fill")), (
                message
            )
        else:
            assert type(padded) is np.ndarray and lengths.dtype == np.int32
            assert (lengths <= padded.shape[1]).all()
