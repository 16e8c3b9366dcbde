"""Wrap-time validation of `BoundedJit`/`BatchedJit`: the Raises tables, the contract, fuzzing.

Every test builds through both the factory and the class (the ``make_bounded``
and ``make_batched`` fixtures): the factories only forward, so both paths must
validate identically. Nothing here calls the wrapped function: construction
does not trace, so these tests are fast.
"""

import math
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.sharding import AxisType, Mesh

from helpers.strategies import (
    BUILTINS_WITH_A_SIGNATURE_FROM_3_13,
    HOSTILE_CALLABLES,
    HOSTILE_VALUES,
    NUMPY_INTEGER_TYPES,
    RaisingRepr,
    builtins_without_signature,
    callables,
    identifiers,
    single_device_sharding,
    valid_argnames,
    valid_argnames_pair,
    valid_axis_sizes,
    valid_axis_specs,
    valid_functions,
    valid_max_traces,
    valid_meshes,
    valid_on_exceed,
    wide_values,
)
from tinax._src.core.validation import describe
from tinax._src.jit import options
from tinax.jit import BatchedJit, BoundedJit, batched_jit, bounded_jit


@pytest.fixture
def make_bounded(bounded_both_ways):
    """Here, unlike in behaviour tests, through the factory and through the class."""
    return bounded_both_ways


@pytest.fixture
def make_batched(batched_both_ways):
    """Here, unlike in behaviour tests, through the factory and through the class."""
    return batched_both_ways


# --- functions to wrap ---------------------------------------------------------------------


def step(x, y=0, *, scale=1.0):
    return x * scale + y


def takes_kwargs(x, **kwargs):
    return x


def positional_only(x, /, y):
    return x + y


def positional_only_and_kwargs(x, /, **kwargs):
    return x


def star_args(*args):
    return args[0]


def star_args_and_kwargs(*args, **kwargs):
    return args[0]


def everything(a, /, b, *args, c=0, **kwargs):
    return a


def generator_function(x):
    yield x


# --- helpers -------------------------------------------------------------------------------

BOUNDED = "BoundedJit"
BATCHED = "BatchedJit"
ARGNAMES = ("static_argnames", "donate_argnames")


def raised_by(build: Callable[..., Any], *args: Any, **kwargs: Any) -> Exception:
    """The exception ``build(*args, **kwargs)`` raises; fails the test if it returns."""
    try:
        build(*args, **kwargs)
    except Exception as error:
        return error
    pytest.fail(f"construction succeeded; expected a rejection of {args!r} {kwargs!r}")


def assert_rejected(
    error: Exception, kind: type, api: str, argument: str, value: object, expected: str
) -> None:
    """Exactly ``kind``, and a message naming argument, received value and expectation."""
    message = str(error)
    assert type(error) is kind, f"{type(error).__name__} escaped: {message}"
    assert message.startswith(f"{api}: "), message
    assert argument in message, message
    assert repr(value)[:40] in message, message
    assert expected in message, message


def assert_documented_or_accepted(build: Callable[[], Any], api: str, argument: str) -> None:
    """Construction succeeds, or raises exactly TypeError/ValueError naming ``argument``."""
    try:
        built = build()
    except Exception as error:
        message = str(error)
        assert type(error) in (TypeError, ValueError), (
            f"{type(error).__name__} escaped validation of {argument}: {message}"
        )
        assert message.startswith(f"{api}: "), message
        assert argument in message, message
        return
    assert_jax_jit_accepts(built)


def assert_jax_jit_accepts(built: object) -> None:
    """An object's `jax.jit` object, built at its first use where the wrap left it, is built
    without error: the wrap checked whatever jax.jit would raise for."""
    if isinstance(built, (BoundedJit, BatchedJit)):
        assert built._jitted is not None


def assert_type_or_value_error_or_accepted(build: Callable[[], Any], argument: str) -> None:
    """For pass-through arguments: only TypeError/ValueError may escape, any wording."""
    try:
        build()
    except Exception as error:
        assert type(error) in (TypeError, ValueError), (
            f"{type(error).__name__} escaped construction with {argument}: {error}"
        )


def make_mesh(kind: AxisType) -> Mesh:
    return jax.make_mesh((8,), ("x",), axis_types=(kind,))


def make_empty_mesh() -> Mesh:
    return Mesh(np.empty((0,), dtype=object), ("x",))


# Values parametrized below are built lazily where they need the JAX backend or are
# one-shot (generators), so every test gets a fresh one.

NOT_CALLABLE = [
    pytest.param(None, id="None"),
    pytest.param(1, id="int"),
    pytest.param("step", id="str"),
    pytest.param([step], id="list-of-function"),
    pytest.param(np.float32(1.0), id="np.float32"),
]

NOT_INTEGER = [
    pytest.param(1.0, id="float"),
    pytest.param(math.inf, id="inf"),
    pytest.param("1", id="str"),
    pytest.param(None, id="None"),
    pytest.param([1], id="list"),
    pytest.param(np.float32(1.0), id="np.float32"),
    pytest.param(np.array(1), id="0d-ndarray"),
]

BOOLEANS = [
    pytest.param(True, id="True"),
    pytest.param(False, id="False"),
    pytest.param(np.True_, id="np.True_"),
    pytest.param(np.False_, id="np.False_"),
]

NEGATIVE = [
    pytest.param(-1, id="minus-one"),
    pytest.param(-(10**100), id="huge-negative"),
    pytest.param(np.int8(-1), id="np.int8"),
    pytest.param(np.int64(-5), id="np.int64"),
]

# None is not here: it is jax.jit's own default for the names, and means what leaving
# them out means (test_jit_options.py::TestJaxJitDefaultsPort).
NOT_A_SEQUENCE = [
    pytest.param(lambda: 1, id="int"),
    pytest.param(lambda: {"x"}, id="set"),
    pytest.param(lambda: frozenset({"x"}), id="frozenset"),
    pytest.param(lambda: (name for name in ["x"]), id="generator"),
    pytest.param(lambda: iter(["x"]), id="iterator"),
    pytest.param(lambda: {"x": 0}, id="dict"),
    pytest.param(lambda: {"x": 0}.keys(), id="dict-keys"),
    pytest.param(lambda: np.array(["x"]), id="ndarray-of-str"),
]

NOT_STR_ENTRY = [
    pytest.param([1], 0, 1, id="int"),
    pytest.param(["x", None], 1, None, id="None"),
    pytest.param((b"x",), 0, b"x", id="bytes"),
    pytest.param([("x",)], 0, ("x",), id="tuple"),
    pytest.param([np.str_("x"), 2.0], 1, 2.0, id="float-after-np.str_"),
]

NOT_A_MESH = [
    pytest.param(lambda: "mesh", id="str"),
    pytest.param(lambda: 8, id="int"),
    pytest.param(lambda: jax.devices(), id="device-list"),
    pytest.param(lambda: np.array(jax.devices()), id="device-ndarray"),
    pytest.param(lambda: single_device_sharding(jax.devices()[0]), id="sharding"),
]


# --- the rows both Raises tables share (each through both classes and both factories) ------


@pytest.fixture(
    params=[
        (bounded_jit, BOUNDED),
        (BoundedJit, BOUNDED),
        (batched_jit, BATCHED),
        (BatchedJit, BATCHED),
    ],
    ids=["bounded_jit", "BoundedJit", "batched_jit", "BatchedJit"],
)
def make_either(request):
    """A builder of either class, and the API name its messages start with."""
    return request.param


class TestSharedRaisesRows:
    @pytest.mark.parametrize("value", NOT_CALLABLE)
    def test_raises_type_error_when_function_is_not_callable(self, make_either, value):
        make, api = make_either
        error = raised_by(make, value, max_traces=1)
        assert_rejected(error, TypeError, api, "function", value, "callable")

    @pytest.mark.parametrize("value", NOT_INTEGER)
    def test_raises_type_error_when_max_traces_is_not_an_integer(self, make_either, value):
        make, api = make_either
        error = raised_by(make, step, max_traces=value)
        assert_rejected(error, TypeError, api, "max_traces", value, "an int")

    @pytest.mark.parametrize("value", BOOLEANS)
    def test_raises_type_error_when_max_traces_is_a_bool(self, make_either, value):
        make, api = make_either
        error = raised_by(make, step, max_traces=value)
        assert_rejected(error, TypeError, api, "max_traces", value, "bool")

    @pytest.mark.parametrize("value", NEGATIVE)
    def test_raises_value_error_when_max_traces_is_negative(self, make_either, value):
        make, api = make_either
        error = raised_by(make, step, max_traces=value)
        assert_rejected(error, ValueError, api, "max_traces", value, "non-negative")

    @pytest.mark.parametrize("build", NOT_A_MESH)
    def test_raises_type_error_when_mesh_is_not_a_mesh(self, make_either, build):
        make, api = make_either
        value = build()
        error = raised_by(make, step, max_traces=1, mesh=value)
        assert_rejected(error, TypeError, api, "mesh", value, "jax.sharding.Mesh or None")

    def test_raises_value_error_when_mesh_is_empty(self, make_either):
        make, api = make_either
        value = make_empty_mesh()
        error = raised_by(make, step, max_traces=1, mesh=value)
        assert_rejected(error, ValueError, api, "mesh", value, "non-empty")


# --- the Raises table of bounded_jit --------------------------------------------------------


class TestBoundedJitRaisesTable:
    @pytest.mark.parametrize("argument", ARGNAMES)
    @pytest.mark.parametrize("build", NOT_A_SEQUENCE)
    def test_raises_type_error_when_argnames_is_not_a_sequence(self, make_bounded, argument, build):
        value = build()
        error = raised_by(make_bounded, takes_kwargs, max_traces=1, **{argument: value})
        assert_rejected(error, TypeError, BOUNDED, argument, value, "sequence")

    @pytest.mark.parametrize("argument", ARGNAMES)
    @pytest.mark.parametrize(("value", "index", "entry"), NOT_STR_ENTRY)
    def test_raises_type_error_when_argnames_entry_is_not_a_str(
        self, make_bounded, argument, value, index, entry
    ):
        error = raised_by(make_bounded, takes_kwargs, max_traces=1, **{argument: value})
        assert_rejected(error, TypeError, BOUNDED, f"{argument}[{index}]", entry, "a str")

    @pytest.mark.parametrize("argument", ARGNAMES)
    @pytest.mark.parametrize(
        ("value", "index"),
        [
            pytest.param("", 0, id="empty-str"),
            pytest.param([""], 0, id="list"),
            pytest.param(("x", ""), 1, id="tuple-second"),
        ],
    )
    def test_raises_value_error_when_argnames_entry_is_empty(
        self, make_bounded, argument, value, index
    ):
        error = raised_by(make_bounded, takes_kwargs, max_traces=1, **{argument: value})
        assert_rejected(error, ValueError, BOUNDED, f"{argument}[{index}]", "", "non-empty")

    @pytest.mark.parametrize("argument", ARGNAMES)
    @pytest.mark.parametrize(
        "value",
        [
            pytest.param(["x", "x"], id="list"),
            pytest.param(("x", "y", "x"), id="tuple-apart"),
        ],
    )
    def test_raises_value_error_when_argnames_entry_is_duplicated(
        self, make_bounded, argument, value
    ):
        error = raised_by(make_bounded, takes_kwargs, max_traces=1, **{argument: value})
        assert_rejected(error, ValueError, BOUNDED, argument, value, "duplicate")

    @pytest.mark.parametrize(
        ("static", "donate"),
        [
            pytest.param("x", "x", id="same-str"),
            pytest.param(["x", "y"], ("z", "x"), id="one-shared"),
        ],
    )
    def test_raises_value_error_when_static_and_donate_argnames_overlap(
        self, make_bounded, static, donate
    ):
        error = raised_by(
            make_bounded, takes_kwargs, max_traces=1, static_argnames=static, donate_argnames=donate
        )
        assert type(error) is ValueError, f"{type(error).__name__}: {error}"
        message = str(error)
        assert message.startswith(f"{BOUNDED}: "), message
        assert "static_argnames" in message and "donate_argnames" in message, message
        assert "'x'" in message and "overlap" in message, message


# --- the Raises table of batched_jit --------------------------------------------------------


class TestBatchedJitRaisesTable:
    @pytest.mark.parametrize("value", [p for p in NOT_INTEGER if p.values[0] is not None])
    def test_raises_type_error_when_axis_size_is_not_an_integer(self, make_batched, value):
        error = raised_by(make_batched, step, max_traces=1, axis_size=value)
        assert_rejected(error, TypeError, BATCHED, "axis_size", value, "an int or None")

    @pytest.mark.parametrize("value", BOOLEANS)
    def test_raises_type_error_when_axis_size_is_a_bool(self, make_batched, value):
        error = raised_by(make_batched, step, max_traces=1, axis_size=value)
        assert_rejected(error, TypeError, BATCHED, "axis_size", value, "bool")

    @pytest.mark.parametrize(
        "value",
        [
            pytest.param(0, id="zero"),
            pytest.param(-1, id="minus-one"),
            pytest.param(np.int32(0), id="np.int32-zero"),
            pytest.param(np.int64(-3), id="np.int64-negative"),
        ],
    )
    def test_raises_value_error_when_axis_size_is_not_positive(self, make_batched, value):
        error = raised_by(make_batched, step, max_traces=1, axis_size=value)
        assert_rejected(error, ValueError, BATCHED, "axis_size", value, "positive")


# --- integers: NumPy yes, booleans never ---------------------------------------------------


NUMPY_INTEGERS = [pytest.param(kind, id=kind.__name__) for kind in NUMPY_INTEGER_TYPES]


class TestIntegers:
    @pytest.mark.parametrize("kind", NUMPY_INTEGERS)
    def test_max_traces_is_a_plain_int_when_given_a_numpy_integer(self, make_bounded, kind):
        obj = make_bounded(step, max_traces=kind(3))
        assert type(obj.max_traces) is int
        assert obj.max_traces == 3

    @pytest.mark.parametrize("kind", NUMPY_INTEGERS)
    def test_batched_max_traces_is_a_plain_int_when_given_a_numpy_integer(self, make_batched, kind):
        obj = make_batched(step, max_traces=kind(3))
        assert type(obj.max_traces) is int
        assert obj.max_traces == 3

    @pytest.mark.parametrize("kind", NUMPY_INTEGERS)
    def test_axis_size_is_a_plain_int_when_given_a_numpy_integer(self, make_batched, kind):
        obj = make_batched(step, max_traces=1, axis_size=kind(4))
        assert type(obj.axis_size) is int
        assert obj.axis_size == 4

    @pytest.mark.parametrize(
        "value",
        [pytest.param(0, id="zero"), pytest.param(10**100, id="huge")],
    )
    def test_max_traces_is_kept_when_it_is_a_python_int(self, make_bounded, value):
        assert make_bounded(step, max_traces=value).max_traces == value

    def test_max_traces_is_exact_when_given_the_largest_uint64(self, make_bounded):
        obj = make_bounded(step, max_traces=np.uint64(2**64 - 1))
        assert obj.max_traces == 2**64 - 1
        assert type(obj.max_traces) is int

    def test_axis_size_stays_none_when_not_given(self, make_batched):
        assert make_batched(step, max_traces=1).axis_size is None

    def test_jax_integer_array_is_not_an_integer_when_given_as_max_traces(self, make_bounded):
        value = jnp.asarray(3)
        error = raised_by(make_bounded, step, max_traces=value)
        assert_rejected(error, TypeError, BOUNDED, "max_traces", value, "an int")


# --- argnames: normalization and rejection --------------------------------------------------


class TestArgnames:
    @pytest.mark.parametrize("argument", ARGNAMES)
    def test_is_one_name_when_given_a_single_str(self, make_bounded, argument):
        obj = make_bounded(takes_kwargs, max_traces=1, **{argument: "scale"})
        assert getattr(obj, argument) == ("scale",)

    @pytest.mark.parametrize("argument", ARGNAMES)
    def test_is_a_tuple_in_order_when_given_a_list(self, make_bounded, argument):
        obj = make_bounded(takes_kwargs, max_traces=1, **{argument: ["b", "a", "c"]})
        assert getattr(obj, argument) == ("b", "a", "c")
        assert type(getattr(obj, argument)) is tuple

    @pytest.mark.parametrize("argument", ARGNAMES)
    def test_is_the_same_tuple_when_given_a_tuple(self, make_bounded, argument):
        obj = make_bounded(step, max_traces=1, **{argument: ("y", "scale")})
        assert getattr(obj, argument) == ("y", "scale")

    @pytest.mark.parametrize("argument", ARGNAMES)
    def test_is_empty_when_not_given(self, make_bounded, argument):
        assert getattr(make_bounded(step, max_traces=1), argument) == ()

    def test_static_and_donate_are_both_kept_when_disjoint(self, make_bounded):
        obj = make_bounded(step, max_traces=1, static_argnames="scale", donate_argnames=["y"])
        assert (obj.static_argnames, obj.donate_argnames) == (("scale",), ("y",))

    @pytest.mark.parametrize("argument", ARGNAMES)
    def test_input_list_is_not_aliased_when_normalized(self, make_bounded, argument):
        names = ["y"]
        obj = make_bounded(step, max_traces=1, **{argument: names})
        names.append("scale")
        assert getattr(obj, argument) == ("y",)


class TestArgnamesAgainstSignature:
    @pytest.mark.parametrize("argument", ARGNAMES)
    def test_raises_value_error_when_name_is_not_a_parameter(self, make_bounded, argument):
        error = raised_by(make_bounded, step, max_traces=1, **{argument: "missing"})
        assert_rejected(error, ValueError, BOUNDED, argument, "missing", "parameters")

    @pytest.mark.parametrize("argument", ARGNAMES)
    @pytest.mark.parametrize(
        ("function", "name"),
        [
            pytest.param(positional_only, "x", id="positional-only"),
            pytest.param(star_args, "args", id="star-args"),
            pytest.param(positional_only_and_kwargs, "x", id="positional-only-with-kwargs"),
            pytest.param(star_args_and_kwargs, "args", id="star-args-with-kwargs"),
        ],
    )
    def test_raises_value_error_when_name_cannot_be_passed_by_keyword(
        self, make_bounded, argument, function, name
    ):
        # As jax.jit: positional-only and *args names are never keyword names.
        error = raised_by(make_bounded, function, max_traces=1, **{argument: name})
        assert_rejected(error, ValueError, BOUNDED, argument, name, "keyword")

    @pytest.mark.parametrize("argument", ARGNAMES)
    @pytest.mark.parametrize(
        "names",
        [
            pytest.param(("anything",), id="identifier"),
            pytest.param(("x", "other"), id="with-a-named-parameter"),
            pytest.param(("a b", "1x"), id="not-identifiers"),
        ],
    )
    def test_accepts_any_name_when_function_takes_kwargs(self, make_bounded, argument, names):
        obj = make_bounded(takes_kwargs, max_traces=1, **{argument: names})
        assert getattr(obj, argument) == names

    @pytest.mark.parametrize("argument", ARGNAMES)
    def test_accepts_the_kwargs_parameter_name_when_function_takes_kwargs(
        self, make_bounded, argument
    ):
        # takes_kwargs(1, kwargs=2) is a valid call, and jax.jit accepts the name.
        obj = make_bounded(takes_kwargs, max_traces=1, **{argument: "kwargs"})
        assert getattr(obj, argument) == ("kwargs",)

    @pytest.mark.parametrize(
        "function", [pytest.param(f, id=getattr(f, "__name__", "partial")) for f in (max, int)]
    )
    def test_accepts_function_when_it_has_no_signature(self, make_bounded, function):
        obj = make_bounded(function, max_traces=1)
        assert obj.function is function

    def test_skips_the_name_check_when_function_has_no_signature(self, make_bounded):
        obj = make_bounded(max, max_traces=1, static_argnames="key")
        assert obj.static_argnames == ("key",)

    @pytest.mark.parametrize(
        "function", [pytest.param(f, id=f.__name__) for f in BUILTINS_WITH_A_SIGNATURE_FROM_3_13]
    )
    def test_a_builtin_is_checked_against_its_signature_where_python_gives_one(
        self, make_bounded, function
    ):
        # Python 3.13 gave bool and zip a signature: tinax checks names against it there,
        # and accepts any name on the Pythons where inspect.signature raises.
        if sys.version_info >= (3, 13):
            error = raised_by(make_bounded, function, max_traces=1, static_argnames="key")
            assert type(error) is ValueError
            assert "static_argnames must name parameters of function; got 'key'" in str(error)
        else:
            obj = make_bounded(function, max_traces=1, static_argnames="key")
            assert obj.static_argnames == ("key",)

    def test_rejects_donated_name_when_function_has_no_signature(self, make_bounded):
        # jax.jit cannot resolve donated names without a signature; say so at wrap time.
        error = raised_by(make_bounded, max, max_traces=1, donate_argnames="key")
        assert type(error) is ValueError
        assert str(error).startswith("BoundedJit: donate_argnames needs the signature")
        assert "'key'" in str(error)


# --- meshes --------------------------------------------------------------------------------


class TestMesh:
    def test_mesh_is_none_when_not_given(self, make_either):
        make, _ = make_either
        assert make(step, max_traces=1).mesh is None

    @pytest.mark.parametrize("kind", [AxisType.Auto, AxisType.Explicit], ids=["Auto", "Explicit"])
    def test_mesh_is_kept_when_given_a_concrete_mesh(self, make_either, kind):
        make, _ = make_either
        mesh = make_mesh(kind)
        assert make(step, max_traces=1, mesh=mesh).mesh is mesh

    def test_raises_type_error_when_mesh_is_abstract(self, make_either, mesh8):
        make, api = make_either
        value = mesh8.abstract_mesh
        error = raised_by(make, step, max_traces=1, mesh=value)
        assert_rejected(error, TypeError, api, "mesh", value, "jax.sharding.Mesh or None")

    def test_raises_value_error_when_mesh_has_a_manual_axis(self, make_either):
        make, api = make_either
        value = make_mesh(AxisType.Manual)
        error = raised_by(make, step, max_traces=1, mesh=value)
        assert_rejected(error, ValueError, api, "mesh", value, "Manual")


# --- hostile inputs: only TypeError/ValueError may escape -----------------------------------


HOSTILE = [pytest.param(build, id=name) for name, build in HOSTILE_VALUES.items()]
SABOTAGED_CALLABLES = [pytest.param(build, id=name) for name, build in HOSTILE_CALLABLES.items()]
BOUNDED_OPTIONS = {
    "max_traces": {},
    "static_argnames": {"max_traces": 1},
    "donate_argnames": {"max_traces": 1},
    "mesh": {"max_traces": 1},
    "on_exceed": {"max_traces": 1},
}
BATCHED_OPTIONS = {
    "max_traces": {},
    "axis_size": {"max_traces": 1},
    "mesh": {"max_traces": 1},
    "on_exceed": {"max_traces": 1},
}


class TestHostileInputs:
    def test_message_shows_a_fallback_repr_when_repr_raises(self, make_bounded):
        error = raised_by(make_bounded, step, max_traces=RaisingRepr())
        assert type(error) is TypeError
        assert str(error).startswith(f"{BOUNDED}: max_traces must be")
        assert "RaisingRepr object at 0x" in str(error)

    def test_function_message_shows_a_fallback_repr_when_repr_raises(self, make_batched):
        error = raised_by(make_batched, RaisingRepr(), max_traces=1)
        assert type(error) is TypeError
        assert "RaisingRepr object at 0x" in str(error)

    @pytest.mark.parametrize("argument", BOUNDED_OPTIONS)
    @pytest.mark.parametrize("build", HOSTILE)
    def test_bounded_raises_only_documented_errors_when_value_is_hostile(
        self, make_bounded, argument, build
    ):
        options = {**BOUNDED_OPTIONS[argument], argument: build()}
        assert_documented_or_accepted(
            lambda: make_bounded(takes_kwargs, **options), BOUNDED, argument
        )

    @pytest.mark.parametrize("argument", BATCHED_OPTIONS)
    @pytest.mark.parametrize("build", HOSTILE)
    def test_batched_raises_only_documented_errors_when_value_is_hostile(
        self, make_batched, argument, build
    ):
        options = {**BATCHED_OPTIONS[argument], argument: build()}
        assert_documented_or_accepted(lambda: make_batched(step, **options), BATCHED, argument)

    @pytest.mark.parametrize("argument", ["in_axes", "out_axes"])
    @pytest.mark.parametrize("build", HOSTILE)
    def test_batched_raises_only_type_or_value_error_when_axes_are_hostile(
        self, make_batched, argument, build
    ):
        value = build()
        assert_type_or_value_error_or_accepted(
            lambda: make_batched(step, max_traces=1, **{argument: value}), argument
        )

    @pytest.mark.parametrize("build", SABOTAGED_CALLABLES)
    def test_bounded_accepts_or_clearly_rejects_when_callable_sabotages_introspection(
        self, make_bounded, build
    ):
        function = build()
        assert_documented_or_accepted(
            lambda: make_bounded(function, max_traces=1), BOUNDED, "function"
        )

    @pytest.mark.parametrize("build", SABOTAGED_CALLABLES)
    def test_batched_accepts_or_clearly_rejects_when_callable_sabotages_introspection(
        self, make_batched, build
    ):
        function = build()
        assert_documented_or_accepted(
            lambda: make_batched(function, max_traces=1), BATCHED, "function"
        )

    def test_bounded_rejects_generator_function(self, make_bounded):
        # As jax.jit does: a generator function cannot be traced.
        error = raised_by(make_bounded, generator_function, max_traces=1)
        assert_rejected(
            error, TypeError, BOUNDED, "function", generator_function, "not a generator function"
        )

    def test_batched_rejects_generator_function(self, make_batched):
        # As jax.vmap does, but with our message.
        error = raised_by(make_batched, generator_function, max_traces=1)
        assert_rejected(
            error, TypeError, BATCHED, "function", generator_function, "not a generator function"
        )


# --- on_exceed: None or one of three policies ----------------------------------------------


def assert_plain_policy(normalized: object, given: object) -> None:
    """``on_exceed`` is stored as ``None`` or a plain ``str`` equal to what was given."""
    if given is None:
        assert normalized is None
    else:
        assert type(normalized) is str
        assert normalized == str.__str__(given)  # pyright: ignore[reportArgumentType]


POLICY_PROPERTY = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


class TestOnExceed:
    @pytest.mark.parametrize("value", [None, "raise", "warn", "log"])
    def test_is_kept_when_valid(self, make_either, value):
        make, _ = make_either
        assert make(step, max_traces=1, on_exceed=value).on_exceed == value

    def test_is_none_when_not_given(self, make_either):
        make, _ = make_either
        assert make(step, max_traces=1).on_exceed is None

    @pytest.mark.parametrize(
        "value",
        [
            pytest.param(1, id="int"),
            pytest.param(True, id="bool"),
            pytest.param(b"warn", id="bytes"),
            pytest.param(["warn"], id="list"),
            pytest.param(np.str_("warn").encode(), id="np.bytes_"),
        ],
    )
    def test_raises_type_error_when_not_a_str(self, make_either, value):
        make, api = make_either
        error = raised_by(make, step, max_traces=1, on_exceed=value)
        assert_rejected(error, TypeError, api, "on_exceed", value, "'raise', 'warn', 'log'")

    @pytest.mark.parametrize("value", ["", "WARN", "warn ", "error", "ignore", "raise\x00"])
    def test_raises_value_error_when_not_a_policy(self, make_either, value):
        make, api = make_either
        error = raised_by(make, step, max_traces=1, on_exceed=value)
        assert_rejected(error, ValueError, api, "on_exceed", value, "'raise', 'warn', 'log'")

    @POLICY_PROPERTY
    @given(value=st.text(max_size=8).filter(lambda text: text not in ("raise", "warn", "log")))
    def test_raises_value_error_when_any_other_str(self, make_either, value):
        make, api = make_either
        error = raised_by(make, step, max_traces=1, on_exceed=value)
        assert type(error) is ValueError
        assert str(error).startswith(f"{api}: on_exceed must be None or one of")

    @POLICY_PROPERTY
    @given(value=valid_on_exceed())
    def test_is_a_plain_str_when_given_a_str_subclass(self, make_either, value):
        make, _ = make_either
        assert_plain_policy(make(step, max_traces=1, on_exceed=value).on_exceed, value)


# --- the first error: which of several invalid options is reported --------------------------
# Checks run in a fixed order (function, the budget, the mesh, the policy, the model options,
# the jax.jit options, then across them), and users see the first error only: each row gives
# several invalid options and the exact message of today's first one.

_THREE = ("sharding",) * 3  # three entries for a function with two positional parameters

FIRST_ERROR_BOUNDED = [
    ({"function": 1, "max_traces": -1}, TypeError, "function must be callable; got 1 (int)."),
    (
        {"max_traces": True, "mesh": "m"},
        TypeError,
        "max_traces must be an int (bool is not accepted); got True (bool).",
    ),
    ({"max_traces": -1, "mesh": "m"}, ValueError, "max_traces must be non-negative; got -1 (int)."),
    (
        {"mesh": "m", "on_exceed": 3},
        TypeError,
        "mesh must be a jax.sharding.Mesh or None; got 'm' (str).",
    ),
    (
        {"on_exceed": "boom", "static_argnames": 1},
        ValueError,
        "on_exceed must be None or one of 'raise', 'warn', 'log'; got 'boom' (str).",
    ),
    (
        {"on_exceed": 3, "propagate_updates": "yes"},
        TypeError,
        "on_exceed must be None or one of 'raise', 'warn', 'log' (a str); got 3 (int).",
    ),
    (
        {"propagate_updates": "yes", "static_argnames": 1},
        TypeError,
        "propagate_updates must be True, False or None; got 'yes' (str).",
    ),
    (
        {"static_argnames": 1, "donate_argnames": 1},
        TypeError,
        "static_argnames must be a str or an ordered sequence (tuple, list) of str; got 1 (int).",
    ),
    (
        {"static_argnames": ("x", "x"), "static_argnums": True},
        ValueError,
        "static_argnames must be free of duplicates ('x' appears twice); got ('x', 'x') (tuple).",
    ),
    (
        {"static_argnames": "x", "donate_argnames": "x", "static_argnums": "a"},
        ValueError,
        "static_argnames and donate_argnames must not overlap; got ('x',) in both.",
    ),
    (
        {"static_argnums": "a", "donate_argnums": "b"},
        TypeError,
        "static_argnums must be None, an int or an ordered sequence (tuple, list) of int "
        "(bool is not accepted); got 'a' (str).",
    ),
    (
        {"donate_argnums": True, "keep_unused": 1},
        TypeError,
        "donate_argnums must be None, an int or an ordered sequence (tuple, list) of int "
        "(bool is not accepted); got True (bool).",
    ),
    ({"keep_unused": 1, "inline": 1}, TypeError, "keep_unused must be a bool; got 1 (int)."),
    # The rest of inline's message names the running JAX's version: its start is pinned.
    ({"inline": 1, "device": 1}, TypeError, "inline must be a bool"),
    (
        {"device": 1, "backend": 1},
        TypeError,
        "device must be a jax.Device or None; got 1 (int).",
    ),
    (
        {"backend": 1, "compiler_options": 1},
        TypeError,
        "backend must be a str (a platform name such as 'cpu'); got 1 (int).",
    ),
    (
        {"compiler_options": 1, "static_nonarrays": 1},
        TypeError,
        "compiler_options must be a dict of str to values, or None; got 1 (int).",
    ),
    (
        {"static_argnames": "z", "in_shardings": _THREE},
        ValueError,
        "static_argnames must name parameters of function; got 'z', but "
        "function(x, y=0, *, scale=1.0) accepts only ('x', 'y', 'scale').",
    ),
    (
        {"static_argnums": 5, "in_shardings": _THREE},
        ValueError,
        "static_argnums must index positional parameters of function (0 to 1, or -2 to -1 "
        "from the end); got 5 in (5,), and function(x, y=0, *, scale=1.0) takes 2 "
        "positional arguments.",
    ),
    (
        {"static_argnums": 0, "donate_argnums": 0, "static_nonarrays": True},
        ValueError,
        "static and donated arguments must not overlap; got ('x',) in both "
        "(static_argnums=(0,), static_argnames=(), donate_argnums=(0,), donate_argnames=()).",
    ),
    (
        {"static_argnums": 0, "static_nonarrays": True, "propagate_updates": True},
        ValueError,
        "static_argnums must be left unset when static_nonarrays=True (every leaf that is not "
        "an array is static already, and the call reaches jax.jit as its array leaves, where "
        "argument numbers and names do not apply; eqx.filter_jit refuses them too); got "
        "static_argnums=(0,).",
    ),
    (
        {"static_nonarrays": True, "propagate_updates": True},
        ValueError,
        "propagate_updates must not be True when static_nonarrays=True (an nnx object keeps its "
        "non-array attributes in its tree structure already: use propagate_updates alone for "
        "nnx objects, static_nonarrays for equinox modules); got propagate_updates=True.",
    ),
]
# BatchedJit checks axis_size after function and the vmap options after on_exceed; the rest
# as BoundedJit (its argnames before its argnums, whatever the order of its fields).
FIRST_ERROR_BATCHED = [
    (
        {"function": 1, "axis_size": 0, "max_traces": -1},
        TypeError,
        "function must be callable; got 1 (int).",
    ),
    (
        {"axis_size": True, "max_traces": -1},
        TypeError,
        "axis_size must be an int or None (bool is not accepted); got True (bool).",
    ),
    ({"axis_size": 0, "mesh": "m"}, ValueError, "axis_size must be positive; got 0 (int)."),
    *FIRST_ERROR_BOUNDED[1:7],
    (
        {"on_exceed": "boom", "axis_name": []},
        ValueError,
        "on_exceed must be None or one of 'raise', 'warn', 'log'; got 'boom' (str).",
    ),
    (
        {"axis_name": [], "spmd_axis_name": []},
        TypeError,
        "axis_name must be None or a hashable axis name (a str); got [] (list).",
    ),
    (
        {"spmd_axis_name": [], "sum_match": 1},
        TypeError,
        "spmd_axis_name must be None or a hashable axis name (a str); got [] (list).",
    ),
    (
        {"sum_match": 1, "propagate_updates": "yes"},
        TypeError,
        "sum_match must be a bool; got 1 (int).",
    ),
    (
        {"static_argnums": "a", "static_argnames": 1},
        TypeError,
        "static_argnames must be a str or an ordered sequence (tuple, list) of str; got 1 (int).",
    ),
    (
        {"donate_argnums": True, "donate_argnames": 1},
        TypeError,
        "donate_argnames must be a str or an ordered sequence (tuple, list) of str; got 1 (int).",
    ),
    (
        {"donate_argnames": ("x", "x"), "keep_unused": 1},
        ValueError,
        "donate_argnames must be free of duplicates ('x' appears twice); got ('x', 'x') (tuple).",
    ),
    *FIRST_ERROR_BOUNDED[12:],
]


def _first_error(make: Callable[..., Any], options: dict[str, Any]) -> Exception:
    kwargs = {"max_traces": 1, **options}
    if kwargs.get("in_shardings") == _THREE:
        kwargs["in_shardings"] = (single_device_sharding(jax.devices()[0]),) * 3
    function = kwargs.pop("function", step)
    with pytest.raises((TypeError, ValueError)) as info:
        make(function, **kwargs)
    return info.value


class TestFirstError:
    @pytest.mark.parametrize(("options", "kind", "expected"), FIRST_ERROR_BOUNDED)
    def test_bounded_reports_the_first_invalid_option_in_check_order(
        self, make_bounded, options, kind, expected
    ):
        error = _first_error(make_bounded, options)
        assert type(error) is kind
        if expected == "inline must be a bool":
            assert str(error).startswith(f"BoundedJit: {expected}")
        else:
            assert str(error) == f"BoundedJit: {expected}"

    @pytest.mark.parametrize(("options", "kind", "expected"), FIRST_ERROR_BATCHED)
    def test_batched_reports_the_first_invalid_option_in_check_order(
        self, make_batched, options, kind, expected
    ):
        error = _first_error(make_batched, options)
        assert type(error) is kind
        if expected == "inline must be a bool":
            assert str(error).startswith(f"BatchedJit: {expected}")
        else:
            assert str(error) == f"BatchedJit: {expected}"


# --- fuzzing: any value, any argument -------------------------------------------------------

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
PROPERTY = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _fuzzed(function: Any, argument: str, value: object) -> dict[str, Any]:
    """Valid arguments for ``function``, except ``argument``, which is ``value``."""
    kwargs: dict[str, Any] = {"function": function, "max_traces": 1}
    kwargs[argument] = value
    return kwargs


# The options given to jax.jit but the argnames (fuzzed with the names below), and
# static_nonarrays: fuzzed with a function that takes anything.
JIT_OPTIONS = (
    *(o.name for o in options.OPTIONS if o.kind == "jax.jit" and not o.name.endswith("argnames")),
    "static_nonarrays",
)
BOUNDED_FUZZED = {
    "function": step,
    **{
        name: everything if name in JIT_OPTIONS or name.endswith("argnames") else step
        for name in options.SIGNATURES["BoundedJit"]
    },
}
# Every option but in_axes and out_axes, which pass through to jax.vmap unchecked.
BATCHED_FUZZED = (
    "function",
    *(name for name in options.SIGNATURES["BatchedJit"] if name not in ("in_axes", "out_axes")),
)


class TestFuzzBoundedJit:
    @pytest.mark.parametrize("argument", list(BOUNDED_FUZZED))
    @FUZZ
    @given(value=st.one_of(wide_values(), callables()))
    def test_raises_only_documented_errors_when_argument_is_anything(
        self, make_bounded, argument, value
    ):
        kwargs = _fuzzed(BOUNDED_FUZZED[argument], argument, value)
        function = kwargs.pop("function")
        assert_documented_or_accepted(lambda: make_bounded(function, **kwargs), BOUNDED, argument)

    @FUZZ
    @given(
        function=wide_values(),
        max_traces=wide_values(),
        static=wide_values(),
        donate=wide_values(),
        mesh=wide_values(),
        on_exceed=wide_values(),
        options=st.dictionaries(st.sampled_from(JIT_OPTIONS), wide_values(), max_size=3),
    )
    def test_raises_only_documented_errors_when_every_argument_is_anything(
        self, make_bounded, function, max_traces, static, donate, mesh, on_exceed, options
    ):
        try:
            built = make_bounded(
                function,
                max_traces=max_traces,
                static_argnames=static,
                donate_argnames=donate,
                mesh=mesh,
                on_exceed=on_exceed,
                **options,
            )
        except Exception as error:
            message = str(error)
            assert type(error) in (TypeError, ValueError), f"{type(error).__name__}: {message}"
            assert message.startswith(f"{BOUNDED}: "), message
            assert any(name in message for name in BOUNDED_FUZZED), message
            return
        assert_jax_jit_accepts(built)


class TestFuzzBatchedJit:
    @pytest.mark.parametrize("argument", BATCHED_FUZZED)
    @FUZZ
    @given(value=st.one_of(wide_values(), callables()))
    def test_raises_only_documented_errors_when_argument_is_anything(
        self, make_batched, argument, value
    ):
        kwargs = _fuzzed(step, argument, value)
        function = kwargs.pop("function")
        assert_documented_or_accepted(lambda: make_batched(function, **kwargs), BATCHED, argument)

    @pytest.mark.parametrize("argument", ["in_axes", "out_axes"])
    @FUZZ
    @given(value=wide_values())
    def test_raises_only_type_or_value_error_when_axes_are_anything(
        self, make_batched, argument, value
    ):
        # Passed through to jax.vmap unvalidated (the page says why): any wording.
        assert_type_or_value_error_or_accepted(
            lambda: make_batched(step, max_traces=1, **{argument: value}), argument
        )


# --- valid values are always accepted and normalized ----------------------------------------


class TestValidValuesBoundedJit:
    @PROPERTY
    @given(
        function=valid_functions(),
        max_traces=valid_max_traces(),
        mesh=valid_meshes(),
        on_exceed=valid_on_exceed(),
    )
    def test_accepts_and_normalizes_when_every_argument_is_valid(
        self, make_bounded, function, max_traces, mesh, on_exceed
    ):
        obj = make_bounded(function, max_traces=max_traces, mesh=mesh, on_exceed=on_exceed)
        assert obj.function is function
        assert type(obj.max_traces) is int and obj.max_traces == int(max_traces)
        assert obj.mesh is mesh
        assert (obj.static_argnames, obj.donate_argnames) == ((), ())
        assert_plain_policy(obj.on_exceed, on_exceed)

    @PROPERTY
    @given(pair=valid_argnames_pair(exclude=("x", "kwargs")), as_list=st.booleans())
    def test_argnames_round_trip_in_order_when_function_takes_kwargs(
        self, make_bounded, pair, as_list
    ):
        static, donate = pair
        build = list if as_list else tuple
        obj = make_bounded(
            takes_kwargs, max_traces=1, static_argnames=build(static), donate_argnames=build(donate)
        )
        assert obj.static_argnames == tuple(static)
        assert obj.donate_argnames == tuple(donate)

    @PROPERTY
    @given(name=identifiers(exclude=("x", "kwargs")))
    def test_single_str_is_one_name_when_function_takes_kwargs(self, make_bounded, name):
        obj = make_bounded(takes_kwargs, max_traces=1, static_argnames=name)
        assert obj.static_argnames == (name,)

    @PROPERTY
    @given(function=builtins_without_signature(), names=valid_argnames(max_size=3))
    def test_accepts_any_static_name_when_function_has_no_signature(
        self, make_bounded, function, names
    ):
        obj = make_bounded(function, max_traces=1, static_argnames=names)
        assert obj.static_argnames == tuple(names)


def three(a, b, c=0):
    return a


@st.composite
def _disjoint_argnums(draw: Any) -> tuple[Any, Any]:
    """Static and donated argnums of ``three`` naming different parameters, each as a
    non-negative or negative index, an int or a list or tuple, or None."""
    chosen = draw(st.permutations([0, 1, 2]))
    split = draw(st.integers(0, 3))

    def spell(indices: list[int]) -> Any:
        numbers = [draw(st.sampled_from([i, i - 3])) for i in indices]
        if not numbers:
            return draw(st.sampled_from([None, (), []]))
        if len(numbers) == 1 and draw(st.booleans()):
            return draw(st.sampled_from([numbers[0], np.int32(numbers[0])]))
        return draw(st.sampled_from([tuple, list]))(numbers)

    return spell(chosen[:split]), spell(chosen[split:])


class TestValidJitOptions:
    @PROPERTY
    @given(
        argnums=_disjoint_argnums(),
        keep_unused=st.sampled_from([True, False, np.True_, np.False_]),
        inline=st.booleans(),
        compiler_options=st.one_of(
            st.none(), st.dictionaries(identifiers(), st.booleans(), max_size=2)
        ),
        shardings=st.sampled_from([None, jax.sharding.PartitionSpec()]),
    )
    def test_accepts_and_normalizes_every_valid_combination(
        self, make_bounded, argnums, keep_unused, inline, compiler_options, shardings
    ):
        static, donate = argnums
        obj = make_bounded(
            three,
            max_traces=1,
            static_argnums=static,
            donate_argnums=donate,
            keep_unused=keep_unused,
            inline=inline,
            compiler_options=compiler_options,
            out_shardings=shardings,
        )

        def normalized(value: Any) -> Any:
            if value is None:
                return None
            return (int(value),) if np.ndim(value) == 0 else tuple(int(v) for v in value)

        assert obj.static_argnums == normalized(static)
        assert obj.donate_argnums == normalized(donate)
        assert type(obj.keep_unused) is bool and obj.keep_unused == bool(keep_unused)
        assert obj.inline is inline

    @PROPERTY
    @given(index=st.integers(-50, 50), option=st.sampled_from(["static_argnums", "donate_argnums"]))
    def test_an_index_is_accepted_exactly_when_jax_jit_accepts_it(
        self, make_bounded, index, option
    ):
        try:
            jax.jit(three, **{option: index})
        except ValueError:
            with pytest.raises(ValueError, match=f"{option} must index positional parameters"):
                make_bounded(three, max_traces=1, **{option: index})
        else:
            make_bounded(three, max_traces=1, **{option: index})


class TestValidValuesBatchedJit:
    @PROPERTY
    @given(
        function=valid_functions(),
        max_traces=valid_max_traces(),
        axis_size=valid_axis_sizes(),
        in_axes=valid_axis_specs(),
        out_axes=valid_axis_specs(),
        mesh=valid_meshes(),
        on_exceed=valid_on_exceed(),
    )
    def test_accepts_and_normalizes_when_every_argument_is_valid(
        self, make_batched, function, max_traces, axis_size, in_axes, out_axes, mesh, on_exceed
    ):
        obj = make_batched(
            function,
            max_traces=max_traces,
            axis_size=axis_size,
            in_axes=in_axes,
            out_axes=out_axes,
            mesh=mesh,
            on_exceed=on_exceed,
        )
        assert_plain_policy(obj.on_exceed, on_exceed)
        assert obj.function is function
        assert type(obj.max_traces) is int and obj.max_traces == int(max_traces)
        if axis_size is None:
            assert obj.axis_size is None
        else:
            assert type(obj.axis_size) is int and obj.axis_size == int(axis_size)
        assert obj.in_axes is in_axes and obj.out_axes is out_axes
        assert obj.mesh is mesh


class TestStaticNonarrays:
    @PROPERTY
    @given(value=st.one_of(wide_values(), st.sampled_from([True, False, np.True_, np.False_])))
    def test_accepted_exactly_when_a_bool_else_type_error_naming_it(self, make_either, value):
        make, api = make_either
        if type(value) in (bool, np.bool_):
            built = make(step, max_traces=1, static_nonarrays=value)
            assert built.static_nonarrays is bool(value)
            return
        error = raised_by(make, step, max_traces=1, static_nonarrays=value)
        assert type(error) is TypeError, error
        assert str(error).startswith(f"{api}: static_nonarrays must be a bool; got "), error
        try:
            shown = repr(value)
        except Exception:  # a hostile repr: the message shows a fallback
            return
        assert shown[:40] in str(error)

    @PROPERTY
    @given(
        option=st.sampled_from(
            ["static_argnums", "static_argnames", "donate_argnums", "donate_argnames"]
        ),
        on=st.booleans(),
    )
    def test_static_options_are_refused_only_next_to_static_nonarrays(
        self, make_either, option, on
    ):
        make, api = make_either
        value = 0 if option.endswith("argnums") else "y"
        if not on or option.startswith("donate"):  # donation is taken next to it
            built = make(step, max_traces=1, static_nonarrays=on, **{option: value})
            assert getattr(built, option) == ((0,) if option.endswith("argnums") else ("y",))
            return
        error = raised_by(make, step, max_traces=1, static_nonarrays=True, **{option: value})
        assert type(error) is ValueError
        assert str(error).startswith(f"{api}: {option} must be left unset when static_nonarrays")

    @PROPERTY
    @given(
        option=st.sampled_from(["donate_argnums", "donate_argnames"]),
        value=st.one_of(wide_values(), st.sampled_from([0, 1, -1, 5, (0, 0), "x", "y", "zz"])),
    )
    def test_donation_is_checked_next_to_static_nonarrays_as_without_it(
        self, make_either, option, value
    ):
        make, _ = make_either
        try:
            alone = make(step, max_traces=1, **{option: value})
        except Exception as error:
            next_to = raised_by(make, step, max_traces=1, static_nonarrays=True, **{option: value})
            assert type(next_to) is type(error) and type(error) in (TypeError, ValueError)
            assert str(next_to) == str(error)
            return
        built = make(step, max_traces=1, static_nonarrays=True, **{option: value})
        assert (built.donate_argnums, built.donate_argnames) == (
            alone.donate_argnums,
            alone.donate_argnames,
        )


class TestPropagateUpdates:
    @PROPERTY
    @given(value=wide_values().filter(lambda value: value is not None))
    def test_raises_type_error_naming_argument_and_value_unless_a_bool_or_none(
        self, make_either, value
    ):
        make, api = make_either
        if issubclass(type(value), bool | np.bool_):
            assert make(step, max_traces=1, propagate_updates=value).propagate_updates is bool(
                value
            )
            return
        error = raised_by(make, step, max_traces=1, propagate_updates=value)
        assert type(error) is TypeError
        assert str(error) == (
            f"{api}: propagate_updates must be True, False or None; got {describe(value)}."
        )

    @pytest.mark.parametrize("value", [0, 1, "True", "none", (), np.array(True), jnp.array(True)])
    def test_raises_type_error_when_a_truthy_or_falsy_non_bool(self, make_either, value):
        make, api = make_either
        error = raised_by(make, step, max_traces=1, propagate_updates=value)
        assert_rejected(error, TypeError, api, "propagate_updates", value, "True, False or None")

    @pytest.mark.parametrize(
        ("value", "kept"),
        [(None, None), (True, True), (False, False), (np.True_, True), (np.False_, False)],
    )
    def test_is_a_plain_bool_or_none_when_valid(self, make_either, value, kept):
        make, _ = make_either
        assert make(step, max_traces=1, propagate_updates=value).propagate_updates is kept

    def test_defaults_to_none(self, make_either):
        make, _ = make_either
        assert make(step, max_traces=1).propagate_updates is None

    @pytest.mark.parametrize("factory", [bounded_jit, batched_jit], ids=["bounded", "batched"])
    def test_decorator_form_takes_it_and_validates_at_decoration(self, factory):
        assert factory(max_traces=1, propagate_updates=True)(step).propagate_updates is True
        decorate = factory(max_traces=1, propagate_updates=1)
        with pytest.raises(
            TypeError, match=r"propagate_updates must be True, False or None; got 1"
        ):
            decorate(step)


def tokens_step(tokens, mask=None, *, scale=1.0):
    return tokens * scale


# Sizes a bucket list refuses: (value, error, the entry named ("" for the list), the value
# named, what the message says it expected).
BAD_SIZES = [
    ([], ValueError, "", [], "a non-empty sequence of positive ints, increasing"),
    ([0, 4], ValueError, "[0]", 0, "must be positive"),
    ([8, 8], ValueError, "", [8, 8], "increasing (8 is followed by 8)"),
    ([16, 8], ValueError, "", [16, 8], "increasing (16 is followed by 8)"),
    ("16", TypeError, "", "16", "a non-empty sequence of positive ints"),
    ((8, -1), ValueError, "[1]", -1, "must be positive"),
    (8, TypeError, "", 8, "a non-empty sequence of positive ints"),
    ([8.0], TypeError, "[0]", 8.0, "must be an int"),
    ([1, True], TypeError, "[1]", True, "must be an int"),
]


class TestBuckets:
    """``buckets``: every check that can be made at wrap time is one, through both
    classes and both factories (`make_either`), each naming the option and the value."""

    @pytest.mark.parametrize(("sizes", "kind", "entry", "shown", "expected"), BAD_SIZES)
    def test_refuses_sizes_that_are_not_positive_and_increasing(
        self, make_either, sizes, kind, entry, shown, expected
    ):
        build, api = make_either
        error = raised_by(build, tokens_step, max_traces=8, buckets={"tokens": {1: sizes}})
        assert_rejected(error, kind, api, f"buckets['tokens'][1]{entry} must be", shown, expected)
        assert raised_by(build, tokens_step, max_traces=8, buckets={"tokens": {1: {8, 16}}})

    def test_refuses_an_argument_the_function_does_not_take(self, make_either):
        build, api = make_either
        error = raised_by(build, tokens_step, max_traces=2, buckets={"tokenz": {0: (1, 2)}})
        assert_rejected(error, ValueError, api, "buckets key", "tokenz", "(tokens, mask, scale)")

    def test_a_path_is_checked_by_its_argument(self, make_either):
        build, _ = make_either
        ok = build(tokens_step, max_traces=2, buckets={"tokens['ids']": {0: (1, 2)}})
        assert ok.buckets == {"tokens['ids']": {0: (1, 2)}}
        error = raised_by(build, tokens_step, max_traces=2, buckets={"batch['ids']": {0: (1,)}})
        assert "buckets key must be a path from a parameter" in str(error)

    def test_any_name_where_the_function_takes_kwargs(self, make_either):
        build, _ = make_either
        built = build(takes_kwargs, max_traces=2, buckets={"anything": {0: (1, 2)}})
        assert built.buckets == {"anything": {0: (1, 2)}}

    @pytest.mark.parametrize(
        ("buckets", "kind", "argument", "value", "expected"),
        [
            ([("tokens", {0: (1,)})], TypeError, "buckets", "[('tokens'", "a mapping of"),
            ({1: {0: (1,)}}, TypeError, "buckets key", "1", "a str (an argument's name"),
            ({"tokens": [1, 2]}, TypeError, "buckets['tokens']", "[1, 2]", "a non-empty map"),
            ({"tokens": {}}, ValueError, "buckets['tokens']", "{}", "a non-empty mapping"),
            ({"tokens": {"0": (1,)}}, TypeError, "buckets['tokens'] key", "'0'", "an int"),
            ({"tokens": {True: (1,)}}, TypeError, "buckets['tokens'] key", "True", "an int"),
            ({"tokens": {-1: (1,)}}, ValueError, "buckets['tokens'] key", "-1", "non-negative"),
            ({"[0]": {0: (1,)}}, ValueError, "buckets key", "'[0]'", "an argument's name"),
        ],
    )
    def test_refuses_a_malformed_declaration(
        self, make_either, buckets, kind, argument, value, expected
    ):
        build, api = make_either
        error = raised_by(build, tokens_step, max_traces=8, buckets=buckets)
        assert type(error) is kind, error
        message = str(error)
        assert message.startswith(f"{api}: {argument} must be "), message
        assert value in message and expected in message, message

    def test_refuses_a_budget_smaller_than_the_combinations(self, make_either):
        build, api = make_either
        buckets = {"tokens": {0: (1, 2), 1: (8, 16, 32)}}
        error = raised_by(build, tokens_step, max_traces=5, buckets=buckets)
        assert type(error) is ValueError
        assert str(error) == (
            f"{api}: max_traces must be at least the number of combinations of buckets, "
            "6 (2 x 3), since each may trace; got 5."
        )
        assert build(tokens_step, max_traces=6, buckets=buckets).max_traces == 6
        error = raised_by(build, tokens_step, max_traces=2, buckets={"tokens": {1: (8, 16, 32)}})
        assert str(error) == (
            f"{api}: max_traces must be at least the number of buckets of tokens axis 1, 3, "
            "since each may trace; got 2."
        )

    def test_refuses_one_array_named_twice(self, make_either):
        build, api = make_either
        buckets = {"tokens": {0: (1, 2)}, "tokens['ids']": {1: (8, 16)}}
        error = raised_by(build, tokens_step, max_traces=4, buckets=buckets)
        assert type(error) is ValueError
        assert str(error) == (
            f"{api}: buckets must name each array once; got 'tokens' and \"tokens['ids']\", "
            "one inside the other."
        )
        # a name that merely starts alike is another argument
        other = {"tokens": {0: (1, 2)}, "tokens2": {0: (1, 2)}}
        assert raised_by(build, takes_kwargs, max_traces=3, buckets=other)
        assert build(takes_kwargs, max_traces=4, buckets=other).buckets == other

    def test_refuses_a_static_argument(self, make_either):
        build, api = make_either
        error = raised_by(
            build,
            tokens_step,
            max_traces=2,
            static_argnames="scale",
            buckets={"scale": {0: (1, 2)}},
        )
        assert_rejected(error, ValueError, api, "buckets key", "scale", "not static")

    def test_shows_the_declaration_normalized_and_read_only(self, make_either):
        build, _ = make_either
        built = build(
            tokens_step, max_traces=6, buckets={"tokens": {1: [8, 16, 32], 0: range(1, 3)}}
        )
        assert built.buckets == {"tokens": {1: (8, 16, 32), 0: (1, 2)}}
        with pytest.raises(TypeError):
            built.buckets["tokens"][1] = (1,)  # type: ignore[index]
        assert build(tokens_step, max_traces=1).buckets is None

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        buckets=st.one_of(
            st.none(),
            st.dictionaries(
                st.sampled_from(["tokens", "mask", "tokens['a']", "x", "", "tokens.a", 3]),
                st.one_of(
                    st.dictionaries(
                        st.one_of(st.integers(-2, 3), st.booleans(), st.text(max_size=2)),
                        st.one_of(
                            st.lists(st.integers(-2, 70), max_size=4),
                            st.integers(),
                            st.text(max_size=3),
                            st.none(),
                        ),
                        max_size=3,
                    ),
                    st.lists(st.integers(), max_size=2),
                    st.none(),
                ),
                max_size=3,
            ),
            st.integers(),
            st.text(max_size=3),
        ),
        max_traces=st.integers(0, 70),
    )
    def test_raises_only_documented_errors_for_any_declaration(self, buckets, max_traces):
        for build, api in ((bounded_jit, BOUNDED), (BatchedJit, BATCHED)):
            try:
                built = build(tokens_step, max_traces=max_traces, buckets=buckets)
            except (TypeError, ValueError) as error:
                message = str(error)
                assert message.startswith(f"{api}: "), message
                assert "buckets" in message or "max_traces" in message, message
            else:
                assert buckets is None or built.buckets is not None or buckets == {}
