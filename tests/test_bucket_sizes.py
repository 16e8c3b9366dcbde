"""Bucket sizes: `check_sizes` (the one check of a list of sizes), `bucket_sizes` (the usual
lists) and `pad_to_bucket` (an array padded to the smallest size that holds it).

Exact examples, hypothesis properties of what comes back, and fuzzing: any value of any
argument is accepted or refused with exactly a TypeError or ValueError whose message names
the function, the argument and the value, as the wrap-time options are
(tests/test_validation.py).
"""

import itertools

import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from helpers.strategies import HOSTILE_VALUES, RaisingRepr, wide_values
from tinax._src.buckets.sizes import check_sizes
from tinax._src.core.validation import describe
from tinax.jit import bucket_sizes, pad_to_bucket

PROPERTY = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def raised_by(function, *args, **kwargs) -> Exception:
    """The exception ``function(*args, **kwargs)`` raises; fails the test if it returns."""
    try:
        function(*args, **kwargs)
    except Exception as error:
        return error
    pytest.fail(f"accepted {args!r} {kwargs!r}; expected a refusal")


def assert_refused(error, kind, api, argument, value):
    """Exactly ``kind``, a message that starts with the function's name and names the argument
    and the value (as `describe` shows it)."""
    message = str(error)
    assert type(error) is kind, f"{type(error).__name__} escaped: {message}"
    assert message.startswith(f"{api}: {argument}"), message
    assert describe(value) in message, message


def assert_refused_or_accepted(call, api, argument, value):
    """``call()`` returns, or raises exactly TypeError/ValueError naming ``argument`` and
    ``value``; nothing else escapes."""
    try:
        return call()
    except Exception as error:
        assert type(error) in (TypeError, ValueError), f"{type(error).__name__}: {error}"
        message = str(error)
        assert message.startswith(f"{api}: {argument}"), message
        assert describe(value) in message, message
        return None


# --- check_sizes ---------------------------------------------------------------------------


class TestCheckSizes:
    @pytest.mark.parametrize(
        "value",
        [
            pytest.param([4, 8, 16], id="list"),
            pytest.param((4, 8, 16), id="tuple"),
            pytest.param(range(4, 17, 4), id="range"),
            pytest.param(np.array([4, 8, 16]), id="ndarray"),
            pytest.param([np.int8(4), np.uint64(8), 16], id="numpy-integers"),
        ],
    )
    def test_ordered_sequences_of_increasing_ints_become_a_tuple_of_ints(self, value):
        sizes = check_sizes("pad_to_bucket", "sizes", value)
        assert sizes == tuple(int(size) for size in value)
        assert all(type(size) is int for size in sizes)

    @pytest.mark.parametrize(
        ("value", "kind", "text"),
        [
            pytest.param(
                [],
                ValueError,
                "sizes must be a non-empty sequence of positive ints, increasing; got [] (list).",
                id="empty",
            ),
            pytest.param([0, 4], ValueError, "sizes[0] must be positive; got 0 (int).", id="zero"),
            pytest.param(
                [4, -8], ValueError, "sizes[1] must be positive; got -8 (int).", id="negative"
            ),
            pytest.param(
                [4, 16, 8],
                ValueError,
                "sizes must be increasing (16 is followed by 8); got [4, 16, 8] (list).",
                id="not-increasing",
            ),
            pytest.param(
                (4, 4),
                ValueError,
                "sizes must be increasing (4 is followed by 4); got (4, 4) (tuple).",
                id="repeated",
            ),
            pytest.param(
                "48",
                TypeError,
                "sizes must be a non-empty sequence of positive ints, increasing; got '48' (str).",
                id="str",
            ),
            pytest.param(
                {4, 8},
                TypeError,
                "sizes must be a non-empty sequence of positive ints, increasing; "
                "got {8, 4} (set).",
                id="set",
            ),
            pytest.param(
                [4, 8.0], TypeError, "sizes[1] must be an int; got 8.0 (float).", id="float"
            ),
            pytest.param([True], TypeError, "sizes[0] must be an int; got True (bool).", id="bool"),
            pytest.param(
                [np.True_], TypeError, "sizes[0] must be an int; got np.True_ (bool).", id="np.bool"
            ),
            pytest.param(
                4,
                TypeError,
                "sizes must be a non-empty sequence of positive ints, increasing; got 4 (int).",
                id="int",
            ),
        ],
    )
    def test_each_refusal_names_the_argument_the_value_and_what_was_expected(
        self, value, kind, text
    ):
        if isinstance(value, set):  # a set's order is its own: spell the message from it
            text = text.replace("{8, 4}", repr(value))
        error = raised_by(check_sizes, "pad_to_bucket", "sizes", value)
        assert type(error) is kind
        assert str(error) == f"pad_to_bucket: {text}"

    @pytest.mark.parametrize("name", list(HOSTILE_VALUES))
    @pytest.mark.parametrize("inside", [False, True], ids=["value", "entry"])
    def test_hostile_value_or_entry_is_a_type_or_value_error_naming_it(self, name, inside):
        hostile = HOSTILE_VALUES[name]()
        value = [4, hostile] if inside else hostile
        error = raised_by(check_sizes, "buckets", "buckets['x'][0]", value)
        assert type(error) in (TypeError, ValueError), f"{type(error).__name__}: {error}"
        assert str(error).startswith("buckets: buckets['x'][0]"), str(error)  # or an entry

    @FUZZ
    @given(value=wide_values())
    def test_anything_is_a_tuple_of_increasing_ints_or_a_type_or_value_error(self, value):
        try:
            sizes = check_sizes("buckets", "buckets['x'][0]", value)
        except Exception as error:
            assert type(error) in (TypeError, ValueError), f"{type(error).__name__}: {error}"
            assert str(error).startswith("buckets: buckets['x'][0]"), str(error)
            return
        assert type(sizes) is tuple and sizes
        assert all(type(size) is int and size >= 1 for size in sizes)
        assert list(sizes) == sorted(set(sizes))


# --- bucket_sizes --------------------------------------------------------------------------


class TestBucketSizes:
    @pytest.mark.parametrize(
        ("arguments", "expected"),
        [
            pytest.param(
                (16, 2048, 512),
                (16, 32, 64, 128, 256, 512, 1024, 1536, 2048),
                id="token-paddings",
            ),
            pytest.param((8, 8, None), (8,), id="one-size"),
            pytest.param((1, 1, None), (1,), id="one"),
            pytest.param((1, 16, None), (1, 2, 4, 8, 16), id="powers-of-two"),
            pytest.param((1, 100, None), (1, 2, 4, 8, 16, 32, 64, 100), id="ceiling-last"),
            pytest.param((3, 50, 10), (3, 6, 12, 22, 32, 42, 50), id="gap-after-reaching-it"),
            pytest.param((16, 40, 4), (16, 20, 24, 28, 32, 36, 40), id="gap-below-floor"),
            pytest.param(
                (1, 1000, 300),
                (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 812, 1000),
                id="gap-not-a-power-of-two",
            ),
            pytest.param((4, 64, 10**6), (4, 8, 16, 32, 64), id="gap-never-reached"),
        ],
    )
    def test_examples(self, arguments, expected):
        floor, ceiling, gap = arguments
        assert bucket_sizes(floor, ceiling, gap=gap) == expected

    def test_numpy_integers_give_plain_ints(self):
        sizes = bucket_sizes(np.int8(4), np.uint64(20), gap=np.int32(8))
        assert sizes == (4, 8, 16, 20)
        assert all(type(size) is int for size in sizes)

    @PROPERTY
    @given(
        floor=st.integers(1, 2**20),
        span=st.integers(0, 2**20),
        gap=st.none() | st.integers(1, 2**21),
    )
    def test_sizes_double_below_gap_step_by_gap_after_and_end_at_the_ceiling(
        self, floor, span, gap
    ):
        ceiling = floor + span
        if gap is not None:  # at most a few thousand sizes
            gap = max(gap, span // 4096 + 1)
        sizes = bucket_sizes(floor, ceiling, gap=gap)
        assert sizes[0] == floor and sizes[-1] == ceiling
        assert all(type(size) is int for size in sizes)
        assert all(a < b for a, b in itertools.pairwise(sizes))

        def after(size):
            return size + gap if gap is not None and size >= gap else 2 * size

        # Every size of the sequence below the ceiling is there, then the ceiling.
        assert all(after(a) == b for a, b in itertools.pairwise(sizes[:-1]))
        if len(sizes) > 1:
            assert sizes[-2] < ceiling <= after(sizes[-2])

    @pytest.mark.parametrize(
        ("arguments", "kind", "text"),
        [
            pytest.param(
                (0, 8, None), ValueError, "floor must be at least 1; got 0 (int).", id="floor-zero"
            ),
            pytest.param(
                (8, 4, None),
                ValueError,
                "ceiling must be at least floor (8); got 4 (int).",
                id="ceiling-below-floor",
            ),
            pytest.param(
                (1, 8, 0), ValueError, "gap must be None or at least 1; got 0 (int).", id="gap-zero"
            ),
            pytest.param(
                (True, 8, None),
                TypeError,
                "floor must be an int; got True (bool).",
                id="floor-bool",
            ),
            pytest.param(
                (1, 8.0, None),
                TypeError,
                "ceiling must be an int; got 8.0 (float).",
                id="ceiling-float",
            ),
            pytest.param(
                (1, 8, "4"), TypeError, "gap must be None or an int; got '4' (str).", id="gap-str"
            ),
            pytest.param(
                (1, 8, np.False_),
                TypeError,
                "gap must be None or an int; got np.False_ (bool).",
                id="gap-np.bool",
            ),
        ],
    )
    def test_each_refusal_names_the_argument_the_value_and_what_was_expected(
        self, arguments, kind, text
    ):
        floor, ceiling, gap = arguments
        error = raised_by(bucket_sizes, floor, ceiling, gap=gap)
        assert type(error) is kind
        assert str(error) == f"bucket_sizes: {text}"

    @pytest.mark.parametrize(
        "argument",
        ["floor", "ceiling", "gap"],
    )
    @FUZZ
    @given(value=wide_values())
    def test_anything_is_accepted_or_refused_naming_the_argument_and_the_value(
        self, argument, value
    ):
        # The other arguments are valid and leave room: floor 1, ceiling 10**300, no gap.
        arguments = {"floor": 1, "ceiling": 10**300, "gap": None, argument: value}
        if argument == "gap":
            arguments["ceiling"] = 64
        gap = arguments.pop("gap")
        sizes = assert_refused_or_accepted(
            lambda: bucket_sizes(**arguments, gap=gap), "bucket_sizes", argument, value
        )
        if sizes is not None:
            assert all(type(size) is int for size in sizes)

    @pytest.mark.parametrize("name", list(HOSTILE_VALUES))
    @pytest.mark.parametrize("argument", ["floor", "ceiling", "gap"])
    def test_hostile_values_are_refused_with_a_type_error(self, argument, name):
        value = HOSTILE_VALUES[name]()
        arguments = {"floor": 1, "ceiling": 64, "gap": None, argument: value}
        gap = arguments.pop("gap")
        try:
            bucket_sizes(**arguments, gap=gap)
        except Exception as error:
            assert type(error) in (TypeError, ValueError), f"{type(error).__name__}: {error}"
            assert str(error).startswith(f"bucket_sizes: {argument} must be"), str(error)


# --- pad_to_bucket: examples ---------------------------------------------------------------


class TestPadToBucket:
    def test_numpy_array_is_padded_with_numpy_to_the_smallest_bucket_that_holds_it(self):
        padded, length = pad_to_bucket(np.array([5, 6, 7]), (2, 4, 8, 16))
        assert type(padded) is np.ndarray
        assert padded.tolist() == [5, 6, 7, 0]
        assert (length, type(length)) == (3, int)

    def test_jax_array_is_padded_with_jax(self):
        padded, length = pad_to_bucket(jnp.arange(1, 4, dtype=jnp.float32), (4, 8), fill=-1)
        assert isinstance(padded, jax.Array)
        assert padded.dtype == jnp.float32
        assert padded.tolist() == [1.0, 2.0, 3.0, -1.0]
        assert length == 3

    def test_jax_array_of_a_new_length_compiles_nothing(self):
        # 20 lengths into one bucket: jnp.pad compiled twice per length (40 compiles)
        arrays = [jax.device_put(np.arange(n, dtype=np.int32)) for n in range(40, 60)]
        jax.block_until_ready(arrays)
        seen = []

        def heard(event, duration, **kwargs):
            if event == "/jax/core/compile/backend_compile_duration":
                seen.append(kwargs.get("fun_name"))

        jax.monitoring.register_event_duration_secs_listener(heard)
        try:
            padded = [pad_to_bucket(array, (16, 64), fill=-1)[0] for array in arrays]
            jax.block_until_ready(padded)
        finally:
            jax.monitoring.unregister_event_duration_listener(heard)
        assert seen == []
        assert [p.tolist()[n - 1 : n + 1] for p, n in zip(padded, range(40, 60), strict=True)] == [
            [n - 1, -1] for n in range(40, 60)
        ]

    @pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.uint8, jnp.bool_, jnp.complex64])
    def test_jax_array_keeps_its_dtype_and_the_fill(self, dtype):
        fill = True if dtype == jnp.bool_ else 7
        padded, _ = pad_to_bucket(jnp.zeros((2, 3), dtype), (5,), axis=1, fill=fill)
        assert padded.dtype == dtype
        assert np.asarray(padded[:, 3:]).tolist() == [[fill, fill]] * 2
        assert not np.asarray(padded[:, :3]).any()

    def test_jax_array_keeps_its_device_and_stays_uncommitted_where_it_was(self):
        device = jax.devices()[3]
        committed = jax.device_put(jnp.ones(3), device)
        padded, _ = pad_to_bucket(committed, (4,))
        assert padded.devices() == {device}
        assert padded.committed
        loose, _ = pad_to_bucket(jnp.ones(3), (4,))
        assert not loose.committed  # usable beside arrays on any device, as jnp.pad's was
        assert loose.devices() == jnp.ones(3).devices()

    @pytest.mark.parametrize("spec", [P("x"), P(None, "x")], ids=["padded-axis", "other-axis"])
    def test_jax_array_keeps_its_sharding(self, mesh8, spec):
        sharding = NamedSharding(mesh8, spec)
        array = jax.device_put(np.ones((8, 8), np.float32), sharding)
        padded, length = pad_to_bucket(array, (16,), fill=2.0)  # 16 rows, 8 devices
        assert padded.sharding == sharding
        assert length == 8
        assert np.asarray(padded).tolist() == [[1.0] * 8] * 8 + [[2.0] * 8] * 8

    def test_traced_array_is_padded_inside_the_traced_function(self):
        @jax.jit
        def padded(x):
            return pad_to_bucket(x, (4, 8), fill=9)[0]

        assert padded(jnp.arange(3)).tolist() == [0, 1, 2, 9]

    def test_nested_list_becomes_a_numpy_array(self):
        padded, length = pad_to_bucket([[1, 2], [3, 4], [5, 6]], (4,))
        assert type(padded) is np.ndarray
        assert padded.tolist() == [[1, 2], [3, 4], [5, 6], [0, 0]]
        assert length == 3

    @pytest.mark.parametrize("array", [np.ones((2, 4)), jnp.ones((2, 4))], ids=["numpy", "jax"])
    def test_array_already_at_a_bucket_size_is_returned_as_is(self, array):
        padded, length = pad_to_bucket(array, (2, 4, 8), axis=-1)
        assert padded is array
        assert length == 4

    @pytest.mark.parametrize(("axis", "shape"), [(0, (4, 3)), (1, (2, 4)), (-1, (2, 4))])
    def test_axis_is_the_one_padded_and_counts_from_the_end_when_negative(self, axis, shape):
        padded, length = pad_to_bucket(np.ones((2, 3), np.int32), (4,), axis=axis)
        assert padded.shape == shape
        assert length == (2 if axis == 0 else 3)
        assert padded.sum() == 6

    @pytest.mark.parametrize(
        ("dtype", "fill", "padding"),
        [
            (np.bool_, True, True),
            (np.int8, -128, -128),
            (np.uint8, 255, 255),
            (np.float16, float("-inf"), float("-inf")),
            (np.float32, 0.1, np.float32(0.1)),
            (np.complex64, 1 + 2j, 1 + 2j),
            (jnp.bfloat16, -1.5, -1.5),
            (np.int32, 2.0, 2),
        ],
        ids=lambda value: getattr(value, "__name__", repr(value)),
    )
    def test_dtype_is_kept_and_padding_is_the_fill_when_the_dtype_holds_it(
        self, dtype, fill, padding
    ):
        padded, _ = pad_to_bucket(np.zeros(3, dtype), (4,), fill=fill)
        assert padded.dtype == np.dtype(dtype)
        assert padded[-1] == padding
        assert (padded[:3] == 0).all()

    def test_nan_fills_a_float_array(self):
        padded, _ = pad_to_bucket(np.zeros(1, np.float32), (3,), fill=np.nan)
        assert np.isnan(padded[1:]).all()

    def test_empty_axis_is_padded_to_the_first_bucket(self):
        padded, length = pad_to_bucket(np.zeros((0, 2)), (4, 8), fill=1)
        assert padded.tolist() == [[1.0, 1.0]] * 4
        assert length == 0

    def test_mask_of_the_real_entries_is_built_from_the_length(self):
        padded, length = pad_to_bucket(jnp.array([3.0, 4.0]), (4,))
        mask = jnp.arange(padded.shape[0]) < length
        assert mask.tolist() == [True, True, False, False]
        assert float(jnp.sum(padded, where=mask)) == 7.0

    def test_pads_inside_a_traced_function(self):
        @jax.jit
        def padded_sum(x):
            padded, length = pad_to_bucket(x, (8,), fill=1.0)
            return padded.sum(), padded.shape[0], length

        total, size, length = padded_sum(jnp.zeros(5))
        assert (float(total), size, length) == (3.0, 8, 5)

    def test_numpy_padding_is_no_device_operation(self):
        """Host-side padding: no JAX computation runs, so nothing traces or compiles."""
        from tinax.testing import no_new_compiles

        array = np.arange(5)
        with no_new_compiles():
            padded, _ = pad_to_bucket(array, (8,))
        assert type(padded) is np.ndarray


# --- pad_to_bucket: refusals ---------------------------------------------------------------


class TestPadToBucketChecksOnce:
    """A serving loop pads with one tuple of sizes and one fill on every request: checked
    once, and told apart from what merely compares equal to them."""

    def test_a_fill_is_told_apart_by_its_bits_and_its_type(self):
        x = np.ones(1, np.float32)
        assert not np.signbit(pad_to_bucket(x, (2,), fill=0.0)[0][1])
        assert np.signbit(pad_to_bucket(x, (2,), fill=-0.0)[0][1])  # -0.0 == 0.0
        flags = np.zeros(1, np.int8)
        assert pad_to_bucket(flags, (2,), fill=True)[0].tolist() == [0, 1]
        assert pad_to_bucket(flags, (2,), fill=1)[0].tolist() == [0, 1]
        error = raised_by(pad_to_bucket, flags, (2,), fill=1.5)  # checked for its dtype
        assert type(error) is ValueError and "fill" in str(error)

    def test_sizes_refused_once_are_refused_again_and_a_list_is_checked_each_time(self):
        for _ in range(2):
            error = raised_by(pad_to_bucket, np.ones(3), (4, 2))
            assert type(error) is ValueError and "increasing" in str(error)
        sizes = [2, 4]
        assert pad_to_bucket(np.ones(3), sizes)[0].shape == (4,)
        sizes.reverse()  # a list may change between calls: not remembered
        assert type(raised_by(pad_to_bucket, np.ones(3), sizes)) is ValueError

    def test_a_tuple_padded_with_again_pads_as_the_first_time(self):
        """The second call with one tuple takes the serving path: the same answers."""
        sizes = (2, 4, 8, 16)
        cases = [  # the last axis of a matrix and of a vector, the first, a middle one
            ((2, 3), 1),
            ((2, 5), 1),
            ((2, 4), 1),
            ((7, 2), 0),
            ((2, 1), -1),
            ((3,), 0),
            ((3, 5, 2), -2),
        ]
        for shape, axis in cases * 2:
            length = shape[axis]
            x = np.arange(1, np.prod(shape) + 1, dtype=np.int16).reshape(shape)
            padded, true = pad_to_bucket(x, sizes, axis=axis)
            bucket = next(size for size in sizes if size >= length)
            assert true == length
            assert padded.shape[axis] == bucket and padded.dtype == np.int16
            assert np.array_equal(np.take(padded, range(length), axis=axis), x)
            assert not np.take(padded, range(length, bucket), axis=axis).any()

    def test_an_array_of_no_numbers_is_refused_on_the_serving_path_too(self):
        """After a NumPy array of numbers took the serving path with a tuple, an array of
        strings or objects padded with that tuple is still refused, naming ``x``."""
        sizes = (2, 4)
        assert pad_to_bucket(np.ones((1, 3), np.int32), sizes, axis=1)[0].shape == (1, 4)
        for x in (np.array([["a", "b", "c"]]), np.array([[1, None, 2]], dtype=object)):
            error = raised_by(pad_to_bucket, x, sizes, axis=1)
            assert type(error) is TypeError and "pad_to_bucket: x must be" in str(error)

    def test_a_host_array_is_padded_with_zeros_after_its_values(self):
        x = np.arange(6, dtype=np.int32).reshape(2, 3)
        padded, length = pad_to_bucket(x, (2, 4), axis=1)
        assert length == 3
        assert padded.tolist() == [[0, 1, 2, 0], [3, 4, 5, 0]]
        assert padded.dtype == np.int32 and type(padded) is np.ndarray


class TestPadToBucketRefusals:
    def test_array_larger_than_the_largest_bucket_is_a_value_error_never_cut(self):
        error = raised_by(pad_to_bucket, np.zeros((2, 600)), bucket_sizes(16, 512), axis=-1)
        assert type(error) is ValueError
        assert str(error) == (
            "pad_to_bucket: x has size 600 on axis -1 (shape (2, 600)), and no bucket in sizes "
            "holds it: the largest is 512; split the input, or add a larger bucket."
        )

    @pytest.mark.parametrize(
        ("shape", "axis", "text"),
        [
            ((2, 3), 2, "axis must be from -2 to 1, an axis of x (shape (2, 3)); got 2 (int)."),
            ((2, 3), -3, "axis must be from -2 to 1, an axis of x (shape (2, 3)); got -3 (int)."),
            ((), 0, "axis must be an axis of x, which has none (shape ()); got 0 (int)."),
        ],
    )
    def test_axis_out_of_range_is_a_value_error_naming_it_and_the_shape(self, shape, axis, text):
        error = raised_by(pad_to_bucket, np.zeros(shape), (4,), axis=axis)
        assert type(error) is ValueError
        assert str(error) == f"pad_to_bucket: {text}"

    @pytest.mark.parametrize("axis", [1.0, True, "0", None])
    def test_axis_that_is_not_an_int_is_a_type_error(self, axis):
        error = raised_by(pad_to_bucket, np.zeros(3), (4,), axis=axis)
        assert_refused(error, TypeError, "pad_to_bucket", "axis", axis)

    @pytest.mark.parametrize(
        ("dtype", "fill"),
        [
            (np.uint8, -1),
            (np.int8, 128),
            (np.int32, 0.5),
            (np.int32, np.nan),
            (np.bool_, 2),
            (np.float16, 1e10),
            (np.float32, 1j),
        ],
        ids=repr,
    )
    def test_number_that_the_dtype_does_not_hold_is_a_value_error(self, dtype, fill):
        error = raised_by(pad_to_bucket, np.zeros(3, dtype), (4,), fill=fill)
        assert_refused(error, ValueError, "pad_to_bucket", "fill", fill)
        assert f"x's dtype {np.dtype(dtype)} holds" in str(error)

    @pytest.mark.parametrize(
        "fill",
        [None, "0", [0, 0], np.zeros(2), RaisingRepr()],
        ids=["None", "str", "list", "ndarray", "raising-repr"],
    )
    def test_fill_that_is_not_a_number_is_a_type_error(self, fill):
        error = raised_by(pad_to_bucket, np.zeros(3), (4,), fill=fill)
        assert_refused(error, TypeError, "pad_to_bucket", "fill", fill)

    @pytest.mark.parametrize(
        "x",
        [["a", "b"], [[1], [1, 2]], [None], [object()], "text"],
        ids=["strs", "ragged", "none", "object", "str"],
    )
    def test_what_is_no_array_of_numbers_is_a_type_error(self, x):
        error = raised_by(pad_to_bucket, x, (4,))
        assert_refused(error, TypeError, "pad_to_bucket", "x", x)

    def test_key_array_is_a_type_error(self):
        keys = jax.random.split(jax.random.key(0), 3)
        error = raised_by(pad_to_bucket, keys, (4,))
        assert type(error) is TypeError
        assert str(error).startswith("pad_to_bucket: x must be an array of numbers or booleans")

    def test_sizes_are_checked_by_check_sizes(self):
        error = raised_by(pad_to_bucket, np.zeros(3), (8, 4))
        assert str(error) == (
            "pad_to_bucket: sizes must be increasing (8 is followed by 4); got (8, 4) (tuple)."
        )


# --- pad_to_bucket: properties -------------------------------------------------------------

DTYPES = [np.bool_, np.int8, np.uint8, np.int32, np.float16, np.float32, np.complex64]


@st.composite
def padding_cases(draw):
    """An array, an axis, increasing sizes of which at least one holds the array on that
    axis, and a fill that the array's dtype holds."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=6))
    x = draw(hnp.arrays(dtype, shape))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    size = shape[axis]
    sizes = draw(st.lists(st.integers(1, 12), min_size=1, max_size=5, unique=True))
    if max(sizes) < size:
        sizes.append(size + draw(st.integers(0, 3)) or 1)
    fill = draw(hnp.from_dtype(dtype))
    return x, tuple(sorted(set(sizes))), axis, fill


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


class TestPadToBucketProperties:
    @pytest.mark.parametrize("name", list(HOSTILE_VALUES))
    @pytest.mark.parametrize("argument", ["x", "sizes", "axis", "fill"])
    def test_hostile_values_are_refused_naming_the_argument(self, argument, name):
        arguments = {"x": np.zeros((1, 3), np.float32), "sizes": (4,), "axis": 0, "fill": 0}
        arguments[argument] = HOSTILE_VALUES[name]()
        x, sizes = arguments.pop("x"), arguments.pop("sizes")
        try:
            pad_to_bucket(x, sizes, **arguments)
        except Exception as error:
            message = str(error)
            assert type(error) in (TypeError, ValueError), f"{type(error).__name__}: {message}"
            if argument == "x" and message.startswith("pad_to_bucket: axis"):
                assert "an axis of x, which has none" in message, message  # an int is 0-d
                return
            assert message.startswith(f"pad_to_bucket: {argument}"), message

    @PROPERTY
    @given(case=padding_cases(), on_device=st.booleans())
    def test_smallest_bucket_that_holds_x_with_x_first_and_fill_after(self, case, on_device):
        x, sizes, axis, fill = case
        if on_device:
            x = jnp.asarray(x)
        size = x.shape[axis]
        padded, length = pad_to_bucket(x, sizes, axis=axis, fill=fill)
        assert isinstance(padded, jax.Array) if on_device else type(padded) is np.ndarray
        assert (length, type(length)) == (size, int)
        bucket = min(candidate for candidate in sizes if candidate >= size)
        expected_shape = list(x.shape)
        expected_shape[axis] = bucket
        assert padded.shape == tuple(expected_shape)
        assert padded.dtype == x.dtype
        host = np.asarray(padded)
        assert same_bits(np.take(host, range(size), axis=axis), x)
        padding = np.take(host, range(size, bucket), axis=axis)
        assert same_bits(padding, np.full(padding.shape, fill, dtype=x.dtype))
        if size == bucket:
            assert padded is x

    @pytest.mark.parametrize("argument", ["x", "sizes", "axis", "fill"])
    @FUZZ
    @given(value=wide_values())
    def test_anything_is_accepted_or_refused_naming_the_argument_and_the_value(
        self, argument, value
    ):
        # The others are valid: x (1, 3), that any sizes hold on axis 0 and (4,) on either.
        arguments = {"x": np.zeros((1, 3), np.float32), "sizes": (4,), "axis": 0, "fill": 0}
        arguments[argument] = value
        x, sizes = arguments.pop("x"), arguments.pop("sizes")
        try:
            padded, length = pad_to_bucket(x, sizes, **arguments)
        except Exception as error:
            message = str(error)
            assert type(error) in (TypeError, ValueError), f"{type(error).__name__}: {message}"
            if argument == "x" and message.startswith("pad_to_bucket: axis"):
                assert "an axis of x" in message, message  # x has no axis 0 (a scalar)
                return
            if argument == "x" and " no bucket in sizes holds it" in message:
                return  # x is larger than 4 on axis 0
            assert message.startswith(f"pad_to_bucket: {argument}"), message
            if argument != "sizes":  # check_sizes names the entry (sizes[1]) it refuses
                assert describe(value) in message, message
            return
        assert isinstance(padded, (np.ndarray, jax.Array))
        assert type(length) is int
