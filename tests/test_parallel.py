"""`tinax.parallel.shard_mapped`: the Raises table, fuzzing, behaviour on 8 devices, introspection.

Every validation test builds through both the factory and the class (the
``make_sharded`` fixture): the factory only forwards, so both paths must
validate identically. Construction does not trace, so those tests are fast;
the behaviour tests build once, through the factory, and run the mapped function
on 8 CPU devices.
"""

import collections
import functools
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import tinax.parallel
from helpers.parallel_strategies import (
    axis_names_any,
    meshes_for_shard_map,
    specs_any,
    valid_shard_setups,
)
from helpers.strategies import (
    HOSTILE_CALLABLES,
    HOSTILE_VALUES,
    RaisingRepr,
    callables,
    wide_values,
)
from tinax.jit import batched_jit, bounded_jit
from tinax.parallel import ShardMapped, shard_mapped

API = "ShardMapped"
ARGUMENTS = ("function", "mesh", "in_specs", "out_specs", "axis_names", "check_vma")


# --- functions to wrap ---------------------------------------------------------------------


def double(x):
    """Doubles its shard."""
    return 2 * x


def scale(x, factor=2):
    return x * factor


def add(x, y):
    return x + y


def generator_function(x):
    yield x


class Pair(NamedTuple):
    a: Any
    b: Any


# --- helpers -------------------------------------------------------------------------------


@pytest.fixture(params=["factory", "class"])
def make_sharded(request):
    """Builds a ShardMapped through the factory or the class: both must validate the same."""
    return shard_mapped if request.param == "factory" else ShardMapped


@pytest.fixture(scope="module")
def mesh_xy():
    """A (2, 4) Auto mesh with axes ('x', 'y')."""
    return jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto))


@pytest.fixture(scope="module")
def explicit_mesh_xy():
    """A (2, 4) Explicit mesh with axes ('x', 'y')."""
    return jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit, AxisType.Explicit))


def raised_by(build: Callable[..., Any], *args: Any, **kwargs: Any) -> Exception:
    """The exception ``build(*args, **kwargs)`` raises; fails the test if it returns."""
    try:
        build(*args, **kwargs)
    except Exception as error:
        return error
    pytest.fail(f"construction succeeded; expected a rejection of {args!r} {kwargs!r}")


def assert_rejected(
    error: Exception, kind: type, argument: str, value: object, expected: str
) -> None:
    """Exactly ``kind``, and a message naming argument, received value and expectation."""
    message = str(error)
    assert type(error) is kind, f"{type(error).__name__} escaped: {message}"
    assert message.startswith(f"{API}: {argument} must be "), message
    assert repr(value)[:40] in message, message
    assert expected in message, message


def assert_documented_or_accepted(build: Callable[[], Any], arguments: tuple[str, ...]) -> None:
    """Construction succeeds, or raises exactly TypeError/ValueError naming an argument."""
    try:
        build()
    except Exception as error:
        message = str(error)
        assert type(error) in (TypeError, ValueError), (
            f"{type(error).__name__} escaped validation: {message}"
        )
        assert message.startswith(f"{API}: "), message
        assert any(f"{API}: {name}" in message for name in arguments), message


def valid_kwargs(mesh: Mesh, /, **changes: Any) -> dict[str, Any]:
    """Valid keyword arguments over ``mesh`` (an axis 'x'), updated with ``changes``."""
    kwargs: dict[str, Any] = {"mesh": mesh, "in_specs": P("x"), "out_specs": P("x")}
    kwargs.update(changes)
    return kwargs


# --- the Raises table: TypeError rows ------------------------------------------------------

NOT_CALLABLE = [
    pytest.param(None, id="None"),
    pytest.param(1, id="int"),
    pytest.param("double", id="str"),
    pytest.param([double], id="list-of-function"),
]

NOT_A_MESH = [
    pytest.param(lambda mesh: None, "a jax.sharding.Mesh", id="None"),
    pytest.param(lambda mesh: "mesh", "a jax.sharding.Mesh", id="str"),
    pytest.param(lambda mesh: jax.devices(), "a jax.sharding.Mesh", id="device-list"),
    pytest.param(lambda mesh: np.array(jax.devices()), "a jax.sharding.Mesh", id="device-ndarray"),
    pytest.param(lambda mesh: NamedSharding(mesh, P("x")), "a jax.sharding.Mesh", id="sharding"),
    pytest.param(lambda mesh: mesh.abstract_mesh, "AbstractMesh", id="abstract-mesh"),
]

IN_SPECS_NOT_A_SPEC_OR_TUPLE = [
    pytest.param(None, id="None"),
    pytest.param([P("x")], id="list"),
    pytest.param({"x": P("x")}, id="dict"),
    pytest.param("x", id="str"),
    pytest.param(0, id="int"),
    pytest.param(Pair(P("x"), P()), id="namedtuple"),
]

SPEC_LEAF_NOT_A_SPEC = [
    pytest.param((("x",),), "in_specs[0][0]", "x", id="tuple-of-str"),
    pytest.param((P("x"), 3), "in_specs[1]", 3, id="int-second"),
    pytest.param((P("unknown"), 3), "in_specs[1]", 3, id="int-after-unknown-axis"),
    pytest.param(({"w": [P("x"), "y"]},), "in_specs[0]['w'][1]", "y", id="nested-str"),
    pytest.param((collections.deque([P("x")]),), "in_specs[0]", None, id="deque"),
]

AXIS_NAMES_WRONG_TYPE = [
    pytest.param(lambda: {"x": 0}, id="dict"),
    pytest.param(lambda: ("x" for _ in range(1)), id="generator"),
    pytest.param(lambda: 1, id="int"),
    pytest.param(lambda: b"x", id="bytes"),
    pytest.param(lambda: collections.deque(["x"]), id="deque"),
    pytest.param(lambda: np.array(["x"]), id="ndarray-of-str"),
]

AXIS_NAMES_ENTRY_NOT_STR = [
    pytest.param([1], "axis_names[0]", id="list-int"),
    pytest.param(("x", None), "axis_names[1]", id="tuple-None"),
    pytest.param(["z", 1], "axis_names[1]", id="list-int-after-unknown-name"),
    pytest.param({b"x"}, "axis_names", id="set-bytes"),
    pytest.param(frozenset({"x", 3}), "axis_names", id="frozenset-int"),
]

NOT_A_BOOL = [
    pytest.param(1, id="int-1"),
    pytest.param(0, id="int-0"),
    pytest.param(None, id="None"),
    pytest.param("yes", id="str"),
    pytest.param(np.int64(1), id="np.int64"),
    pytest.param(np.array(True), id="0d-ndarray"),
    pytest.param(1.0, id="float"),
]


class TestTypeErrors:
    @pytest.mark.parametrize("value", NOT_CALLABLE)
    def test_raises_type_error_when_function_is_not_callable(self, make_sharded, mesh8, value):
        error = raised_by(make_sharded, value, **valid_kwargs(mesh8))
        assert_rejected(error, TypeError, "function", value, "callable")

    def test_raises_type_error_when_function_is_a_generator_function(self, make_sharded, mesh8):
        error = raised_by(make_sharded, generator_function, **valid_kwargs(mesh8))
        assert_rejected(
            error, TypeError, "function", generator_function, "not a generator function"
        )

    @pytest.mark.parametrize(("build", "expected"), NOT_A_MESH)
    def test_raises_type_error_when_mesh_is_not_a_concrete_mesh(
        self, make_sharded, mesh8, build, expected
    ):
        value = build(mesh8)
        error = raised_by(make_sharded, double, **valid_kwargs(value))
        assert_rejected(error, TypeError, "mesh", value, expected)

    @pytest.mark.parametrize("value", IN_SPECS_NOT_A_SPEC_OR_TUPLE)
    def test_raises_type_error_when_in_specs_is_not_a_spec_or_tuple(
        self, make_sharded, mesh8, value
    ):
        error = raised_by(make_sharded, double, **valid_kwargs(mesh8, in_specs=value))
        assert_rejected(error, TypeError, "in_specs", value, "a tuple with one entry")

    @pytest.mark.parametrize("value", [None, "x", 0])
    def test_raises_type_error_when_out_specs_is_not_a_pytree_of_specs(
        self, make_sharded, mesh8, value
    ):
        error = raised_by(make_sharded, double, **valid_kwargs(mesh8, out_specs=value))
        assert_rejected(error, TypeError, "out_specs", value, "PartitionSpec")

    @pytest.mark.parametrize(("value", "where", "leaf"), SPEC_LEAF_NOT_A_SPEC)
    def test_raises_type_error_naming_the_path_when_an_in_specs_leaf_is_not_a_spec(
        self, make_sharded, mesh8, value, where, leaf
    ):
        error = raised_by(
            make_sharded, lambda *args: args[0], **valid_kwargs(mesh8, in_specs=value)
        )
        shown = value[0] if leaf is None else leaf
        assert_rejected(error, TypeError, where, shown, "PartitionSpec or None")

    def test_raises_type_error_naming_the_path_when_an_out_specs_leaf_is_not_a_spec(
        self, make_sharded, mesh8
    ):
        value = {"loss": P(), "grads": [P("x"), ("x",)]}
        error = raised_by(make_sharded, double, **valid_kwargs(mesh8, out_specs=value))
        assert_rejected(error, TypeError, "out_specs['grads'][1][0]", "x", "PartitionSpec")

    def test_raises_type_error_when_specs_cannot_be_flattened(self, make_sharded, mesh8):
        value = {1: P("x"), "a": P("x")}  # keys JAX cannot sort
        error = raised_by(make_sharded, double, **valid_kwargs(mesh8, out_specs=value))
        assert_rejected(error, TypeError, "out_specs", value, "pytree")

    @pytest.mark.parametrize("build", AXIS_NAMES_WRONG_TYPE)
    def test_raises_type_error_when_axis_names_is_not_a_collection_of_str(
        self, make_sharded, mesh8, build
    ):
        value = build()
        error = raised_by(make_sharded, double, **valid_kwargs(mesh8, axis_names=value))
        assert_rejected(error, TypeError, "axis_names", value, "a set, frozenset, tuple or list")

    @pytest.mark.parametrize(("value", "where"), AXIS_NAMES_ENTRY_NOT_STR)
    def test_raises_type_error_when_an_axis_names_entry_is_not_a_str(
        self, make_sharded, mesh8, value, where
    ):
        error = raised_by(make_sharded, double, **valid_kwargs(mesh8, axis_names=value))
        assert_rejected(error, TypeError, where, value, "is not)")

    @pytest.mark.parametrize("value", NOT_A_BOOL)
    def test_raises_type_error_when_check_vma_is_not_a_bool(self, make_sharded, mesh8, value):
        error = raised_by(make_sharded, double, **valid_kwargs(mesh8, check_vma=value))
        assert_rejected(error, TypeError, "check_vma", value, "a bool")


# --- the Raises table: ValueError rows -----------------------------------------------------


def make_empty_mesh() -> Mesh:
    return Mesh(np.empty((0,), dtype=object), ("x",))


def _stable_id(value: object) -> str:
    """A test id the same in every process: a set's repr follows its strings' hashes,
    which differ from process to process (pytest-xdist's workers must agree)."""
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(map(repr, value))) + "}"
    return repr(value)


class TestValueErrors:
    def test_raises_value_error_when_mesh_is_empty(self, make_sharded):
        value = make_empty_mesh()
        error = raised_by(make_sharded, double, **valid_kwargs(value))
        assert_rejected(error, ValueError, "mesh", value, "non-empty")

    def test_raises_value_error_when_mesh_has_a_manual_axis(self, make_sharded):
        value = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Manual,))
        error = raised_by(make_sharded, double, **valid_kwargs(value))
        assert_rejected(error, ValueError, "mesh", value, "free of Manual axes")

    def test_raises_value_error_when_mesh_axis_names_are_not_str(self, make_sharded):
        value = Mesh(np.array(jax.devices()), (1,))
        error = raised_by(make_sharded, double, mesh=value, in_specs=P(), out_specs=P())
        assert_rejected(error, ValueError, "mesh", value, "axis names are all str")

    @pytest.mark.parametrize("value", [set(), frozenset(), (), []], ids=repr)
    def test_raises_value_error_when_axis_names_is_empty(self, make_sharded, mesh8, value):
        error = raised_by(make_sharded, double, **valid_kwargs(mesh8, axis_names=value))
        assert_rejected(error, ValueError, "axis_names", value, "pass None")

    @pytest.mark.parametrize("value", [["x", "x"], ("x", "y", "x")], ids=repr)
    def test_raises_value_error_when_axis_names_has_a_duplicate(self, make_sharded, mesh_xy, value):
        error = raised_by(make_sharded, double, **valid_kwargs(mesh_xy, axis_names=value))
        assert_rejected(error, ValueError, "axis_names", value, "'x' appears twice")

    @pytest.mark.parametrize(
        ("value", "where"),
        [("z", "axis_names"), (["x", "z"], "axis_names[1]"), ({"x", ""}, "axis_names")],
        ids=_stable_id,
    )
    def test_raises_value_error_when_axis_names_has_an_unknown_axis(
        self, make_sharded, mesh_xy, value, where
    ):
        error = raised_by(make_sharded, double, **valid_kwargs(mesh_xy, axis_names=value))
        assert_rejected(error, ValueError, where, value, "axes of the mesh ('x', 'y')")

    @pytest.mark.parametrize("argument", ["in_specs", "out_specs"])
    @pytest.mark.parametrize(
        ("spec", "axis"),
        [
            (P("z"), "'z'"),
            (P(("x", "z")), "'z'"),
            (P(None, "X"), "'X'"),
            (P(1), "1 (int)"),
        ],
        ids=repr,
    )
    def test_raises_value_error_naming_the_axis_when_a_spec_names_an_unknown_axis(
        self, make_sharded, mesh_xy, argument, spec, axis
    ):
        error = raised_by(make_sharded, double, **valid_kwargs(mesh_xy, **{argument: spec}))
        assert_rejected(
            error, ValueError, argument, spec, f"mesh axes ('x', 'y') ({axis} is not one of them)"
        )

    def test_raises_value_error_with_the_path_when_a_nested_spec_names_an_unknown_axis(
        self, make_sharded, mesh_xy
    ):
        spec = P("q")
        error = raised_by(make_sharded, add, **valid_kwargs(mesh_xy, in_specs=(P(), {"k": spec})))
        assert_rejected(error, ValueError, "in_specs[1]['k']", spec, "'q' is not one of them")

    @pytest.mark.parametrize("argument", ["in_specs", "out_specs"])
    @pytest.mark.parametrize("spec", [P("x", "x"), P(("x", "y"), "x"), P(("y", "y"))], ids=repr)
    def test_raises_value_error_when_a_spec_uses_an_axis_twice(
        self, make_sharded, mesh_xy, argument, spec
    ):
        # PartitionSpec itself accepts these; jax.shard_map fails on the first call
        # with a bare Exception (DuplicateSpecError).
        error = raised_by(make_sharded, double, **valid_kwargs(mesh_xy, **{argument: spec}))
        assert_rejected(error, ValueError, argument, spec, "appears twice")

    @pytest.mark.parametrize("argument", ["in_specs", "out_specs"])
    def test_raises_value_error_when_a_spec_names_an_axis_not_in_axis_names(
        self, make_sharded, mesh_xy, argument
    ):
        spec = P("y")
        kwargs = valid_kwargs(mesh_xy, axis_names="x", **{argument: spec})
        error = raised_by(make_sharded, double, **kwargs)
        assert_rejected(error, ValueError, argument, spec, "add it to axis_names")

    @pytest.mark.parametrize("argument", ["in_specs", "out_specs"])
    def test_raises_value_error_when_a_spec_is_unconstrained(self, make_sharded, mesh8, argument):
        spec = P(P.UNCONSTRAINED)
        error = raised_by(make_sharded, double, **valid_kwargs(mesh8, **{argument: spec}))
        assert_rejected(error, ValueError, argument, spec, "P.UNCONSTRAINED")

    @pytest.mark.parametrize("entry", [None, P.UNCONSTRAINED], ids=repr)
    def test_raises_value_error_when_an_axis_tuple_holds_a_non_name(
        self, make_sharded, mesh_xy, entry
    ):
        # jax.shard_map fails on the first call with a KeyError for ('x', None).
        spec = P(("x", entry))
        error = raised_by(make_sharded, double, **valid_kwargs(mesh_xy, in_specs=spec))
        assert_rejected(error, ValueError, "in_specs", spec, "axis tuples hold mesh axis names")

    def test_raises_value_error_when_unreduced_names_an_unknown_axis(
        self, make_sharded, explicit_mesh_xy
    ):
        # jax.shard_map fails on the first call with a KeyError here.
        spec = P("x", unreduced={"z"})
        kwargs = valid_kwargs(explicit_mesh_xy, in_specs=spec)
        error = raised_by(make_sharded, double, **kwargs)
        assert_rejected(error, ValueError, "in_specs", spec, "unreduced axes are axes of the mesh")

    def test_raises_value_error_when_reduced_names_an_auto_axis(self, make_sharded, mesh_xy):
        spec = P("x", reduced={"y"})
        error = raised_by(make_sharded, double, **valid_kwargs(mesh_xy, out_specs=spec))
        assert_rejected(error, ValueError, "out_specs", spec, "'y' is Auto")

    def test_raises_value_error_when_unreduced_is_used_with_an_auto_axis_left(
        self, make_sharded, explicit_mesh_xy
    ):
        # jax.shard_map raises NotImplementedError on the first call here.
        spec = P("x", unreduced={"y"})
        kwargs = valid_kwargs(explicit_mesh_xy, in_specs=spec, axis_names={"x"})
        error = raised_by(make_sharded, double, **kwargs)
        assert_rejected(error, ValueError, "in_specs", spec, "unless every mesh axis is Manual")

    @pytest.mark.parametrize(
        ("function", "in_specs", "takes"),
        [
            (double, (P("x"), P("x")), "exactly 1 (not 2)"),
            (add, (P("x"),), "exactly 2 (not 1)"),
            (scale, (), "1 to 2 (not 0)"),
            (lambda x, *rest: x, (), "at least 1 (not 0)"),
        ],
        ids=["too-many", "too-few", "below-defaults", "below-varargs"],
    )
    def test_raises_value_error_when_in_specs_does_not_fit_the_positional_arguments(
        self, make_sharded, mesh8, function, in_specs, takes
    ):
        error = raised_by(make_sharded, function, **valid_kwargs(mesh8, in_specs=in_specs))
        assert_rejected(error, ValueError, "in_specs", in_specs, takes)


# --- accepted values and their normalized form ----------------------------------------------


class TestAccepted:
    @pytest.mark.parametrize(
        ("given", "normalized"),
        [
            (None, ("x", "y")),
            ("y", ("y",)),
            (["y", "x"], ("x", "y")),
            (("x",), ("x",)),
            ({"y"}, ("y",)),
            (frozenset({"x", "y"}), ("x", "y")),
            ([np.str_("x")], ("x",)),
        ],
        # a set's repr has no fixed order: ids the same in every process (pytest-xdist)
        ids=lambda value: (
            repr(sorted(value)) if isinstance(value, (set, frozenset)) else repr(value)
        ),
    )
    def test_axis_names_become_a_tuple_in_mesh_order(
        self, make_sharded, mesh_xy, given, normalized
    ):
        spec = P(normalized[0])
        obj = make_sharded(double, mesh=mesh_xy, in_specs=spec, out_specs=spec, axis_names=given)
        assert obj.axis_names == normalized
        assert all(type(name) is str for name in obj.axis_names)

    @pytest.mark.parametrize("value", [True, False, np.True_, np.False_], ids=repr)
    def test_check_vma_accepts_python_and_numpy_bools_as_bool(self, make_sharded, mesh8, value):
        obj = make_sharded(double, **valid_kwargs(mesh8, check_vma=value))
        assert type(obj.check_vma) is bool and obj.check_vma == bool(value)

    def test_accepts_none_entries_in_in_specs_and_none_leaves_in_out_specs(
        self, make_sharded, mesh8
    ):
        obj = make_sharded(
            lambda x, n: (x * n, None),
            mesh=mesh8,
            in_specs=(P("x"), None),
            out_specs=(P("x"), None),
        )
        assert obj.in_specs == (P("x"), None)
        assert obj.out_specs == (P("x"), None)

    def test_specs_are_copies_that_later_mutation_does_not_reach(self, make_sharded, mesh8):
        out_specs = [P("x")]
        obj = make_sharded(lambda x: [2 * x], mesh=mesh8, in_specs=P("x"), out_specs=out_specs)
        out_specs.append("not a spec")
        assert obj.out_specs == [P("x")] and obj.out_specs is not out_specs
        obj.out_specs.append("not a spec either")  # the exposed copy is not the one jax holds
        assert obj(jnp.arange(8.0))[0].tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]

    @pytest.mark.parametrize("count", [1, 2, 3])
    def test_accepts_any_number_of_specs_when_function_takes_star_args(
        self, make_sharded, mesh8, count
    ):
        specs = (P("x"),) * count
        obj = make_sharded(lambda *xs: sum(xs), mesh=mesh8, in_specs=specs, out_specs=P("x"))
        assert obj.in_specs == specs
        arrays = [jnp.arange(8.0) * (k + 1) for k in range(count)]
        assert obj(*arrays).tolist() == (jnp.arange(8.0) * sum(range(1, count + 1))).tolist()

    def test_accepts_extra_specs_for_star_args_after_a_named_parameter(self, make_sharded, mesh8):
        specs = (P("x"), None, None)
        obj = make_sharded(
            lambda x, *factors: x * factors[0] * factors[1],
            mesh=mesh8,
            in_specs=specs,
            out_specs=P("x"),
        )
        assert obj(jnp.ones(8), 2.0, 3.0).tolist() == [6.0] * 8

    def test_skips_the_arity_check_when_function_has_no_signature(self, make_sharded, mesh8):
        obj = make_sharded(max, **valid_kwargs(mesh8, in_specs=(P("x"), P("x"), P("x"))))
        assert obj.in_specs == (P("x"), P("x"), P("x"))

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(setup=valid_shard_setups(), check_vma=st.booleans())
    def test_accepts_and_normalizes_when_every_argument_is_valid(
        self, make_sharded, setup, check_vma
    ):
        obj = make_sharded(
            double,
            mesh=setup["mesh"],
            in_specs=setup["in_specs"],
            out_specs=setup["out_specs"],
            axis_names=setup["axis_names"],
            check_vma=check_vma,
        )
        assert obj.mesh is setup["mesh"]
        assert obj.axis_names == setup["manual"]
        assert obj.in_specs == setup["in_specs"] and obj.out_specs == setup["out_specs"]
        assert obj.check_vma is check_vma


# --- hostile inputs and fuzzing: only TypeError/ValueError escape ---------------------------

HOSTILE = [pytest.param(build, id=name) for name, build in HOSTILE_VALUES.items()]
SABOTAGED_CALLABLES = [pytest.param(build, id=name) for name, build in HOSTILE_CALLABLES.items()]
OPTIONS = ("mesh", "in_specs", "out_specs", "axis_names", "check_vma")
FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@functools.cache
def _wide_for(argument: str) -> st.SearchStrategy[object]:
    """What the fuzzer passes as ``argument``: anything, plus values shaped like it.

    Cached: building these strategies costs more than running an example.
    """
    shaped = {
        "function": callables(),
        "mesh": meshes_for_shard_map(),
        "in_specs": specs_any(),
        "out_specs": specs_any(),
        "axis_names": axis_names_any(),
        "check_vma": st.sampled_from([True, False, np.True_, 1, 0, None]),
    }
    return st.one_of(wide_values(), shaped[argument])


class TestHostileInputs:
    def test_message_shows_a_fallback_repr_when_repr_raises(self, make_sharded, mesh8):
        error = raised_by(make_sharded, double, **valid_kwargs(mesh8, check_vma=RaisingRepr()))
        assert type(error) is TypeError
        assert str(error).startswith(f"{API}: check_vma must be")
        assert "RaisingRepr object at 0x" in str(error)

    @pytest.mark.parametrize("argument", OPTIONS)
    @pytest.mark.parametrize("build", HOSTILE)
    def test_raises_only_documented_errors_when_value_is_hostile(
        self, make_sharded, mesh8, argument, build
    ):
        kwargs = valid_kwargs(mesh8, **{argument: build()})
        assert_documented_or_accepted(lambda: make_sharded(double, **kwargs), (argument,))

    @pytest.mark.parametrize("argument", ["in_specs", "out_specs"])
    @pytest.mark.parametrize("build", HOSTILE)
    def test_raises_only_documented_errors_when_a_spec_leaf_is_hostile(
        self, make_sharded, mesh8, argument, build
    ):
        kwargs = valid_kwargs(mesh8, **{argument: (build(),)})
        assert_documented_or_accepted(lambda: make_sharded(double, **kwargs), (argument,))

    @pytest.mark.parametrize("build", SABOTAGED_CALLABLES)
    def test_accepts_or_clearly_rejects_when_callable_sabotages_introspection(
        self, make_sharded, mesh8, build
    ):
        function = build()
        obj = make_sharded(function, **valid_kwargs(mesh8))
        assert obj.function is function
        assert repr(obj).startswith(f"{API}(")


class TestFuzz:
    @pytest.mark.parametrize("argument", ARGUMENTS)
    @FUZZ
    @given(data=st.data())
    def test_raises_only_documented_errors_when_argument_is_anything(
        self, make_sharded, mesh_xy, argument, data
    ):
        value = data.draw(_wide_for(argument), label=argument)
        # Replicated specs fit any mesh and any axis_names: only ``argument`` can be wrong.
        base = valid_kwargs(mesh_xy, in_specs=P(), out_specs=P())
        kwargs: dict[str, Any] = {"function": double, **base, argument: value}
        function = kwargs.pop("function")
        assert_documented_or_accepted(lambda: make_sharded(function, **kwargs), (argument,))

    @FUZZ
    @given(data=st.data())
    def test_raises_only_documented_errors_when_every_argument_is_anything(
        self, make_sharded, data
    ):
        drawn = {name: data.draw(_wide_for(name), label=name) for name in ARGUMENTS}
        function = drawn.pop("function")
        assert_documented_or_accepted(lambda: make_sharded(function, **drawn), ARGUMENTS)


# --- behaviour on 8 devices -----------------------------------------------------------------


def features(v):
    """Per example: a (3,) vector to a (3,) vector."""
    return jnp.tanh(v) * v.sum() + 1.0


class TestBehaviour:
    def test_batched_jit_in_the_body_matches_vmap_under_bounded_jit(self, mesh8):
        body = batched_jit(features, max_traces=1)
        step = bounded_jit(
            shard_mapped(body, mesh=mesh8, in_specs=P("x"), out_specs=P("x")), max_traces=1
        )
        x = jnp.arange(48.0).reshape(16, 3) / 10
        np.testing.assert_allclose(step(x), jax.vmap(features)(x), rtol=1e-6)
        np.testing.assert_allclose(step(x + 1), jax.vmap(features)(x + 1), rtol=1e-6)
        assert (step.traces_used, body.traces_used) == (1, 1)

    def test_collectives_match_pmap(self, mesh8):
        def body(v):
            return jax.lax.psum(v, "x"), v - jax.lax.pmean(v, "x"), jax.lax.pmax(v, "x")

        x = jnp.arange(24.0).reshape(8, 3) ** 2
        expected = jax.pmap(body, axis_name="x")(x)
        mapped = shard_mapped(body, mesh=mesh8, in_specs=P("x"), out_specs=P("x"))
        for ours, theirs in zip(jax.jit(mapped)(x), expected, strict=True):
            np.testing.assert_allclose(ours, theirs, rtol=1e-6)

    def test_runs_eagerly_without_an_outer_jit(self, mesh8):
        mapped = shard_mapped(
            lambda v: v - jax.lax.pmean(v.mean(), "x"),
            mesh=mesh8,
            in_specs=P("x"),
            out_specs=P("x"),
        )
        out = mapped(jnp.arange(16.0))
        np.testing.assert_allclose(out, jnp.arange(16.0) - 7.5)
        assert out.sharding.spec == P("x")

    def test_body_sees_the_local_shard(self, mesh8):
        mapped = shard_mapped(
            lambda v: jnp.full((1,), v.shape[0]), mesh=mesh8, in_specs=P("x"), out_specs=P("x")
        )
        assert mapped(jnp.zeros(16)).tolist() == [2] * 8

    def test_none_in_specs_entry_passes_the_argument_unmapped(self, mesh8):
        mapped = shard_mapped(scale, mesh=mesh8, in_specs=(P("x"), None), out_specs=P("x"))
        assert mapped(jnp.ones(8), 3).tolist() == [3.0] * 8

    def test_partial_manual_axis_names_leave_other_axes_auto(self, mesh_xy):
        mapped = shard_mapped(
            lambda v: v * jax.lax.axis_index("x"),
            mesh=mesh_xy,
            in_specs=P("x"),
            out_specs=P("x"),
            axis_names={"x"},
        )
        expected = jnp.repeat(jnp.array([0.0, 1.0]), 2)[:, None] * jnp.ones((4, 8))
        np.testing.assert_array_equal(mapped(jnp.ones((4, 8))), expected)
        np.testing.assert_array_equal(jax.jit(mapped)(jnp.ones((4, 8))), expected)

    def test_check_vma_true_rejects_a_varying_output_declared_replicated(self, mesh8):
        mapped = shard_mapped(double, mesh=mesh8, in_specs=P("x"), out_specs=P())
        with pytest.raises(ValueError, match="out_specs"):
            jax.jit(mapped)(jnp.arange(8.0))

    def test_check_vma_false_trusts_out_specs(self, mesh8):
        mapped = shard_mapped(double, mesh=mesh8, in_specs=P("x"), out_specs=P(), check_vma=False)
        assert jax.jit(mapped)(jnp.arange(8.0)).shape == (1,)

    def test_runs_on_an_explicit_mesh_with_arguments_sharded_as_in_specs(self, explicit_mesh8):
        mapped = shard_mapped(double, mesh=explicit_mesh8, in_specs=P("x"), out_specs=P("x"))
        x = jax.device_put(jnp.arange(8.0), NamedSharding(explicit_mesh8, P("x")))
        assert mapped(x).tolist() == [2.0 * i for i in range(8)]

    def test_runs_under_its_own_mesh_set_with_set_mesh(self, mesh8):
        mapped = shard_mapped(double, **valid_kwargs(mesh8))
        with jax.set_mesh(mesh8):
            assert mapped(jnp.ones(8)).tolist() == [2.0] * 8


# --- introspection, repr, metadata, identity ------------------------------------------------


class TestIntrospection:
    def test_fields_are_read_only(self, mesh8):
        obj = shard_mapped(double, **valid_kwargs(mesh8))
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            obj.mesh = None

    def test_exposes_the_arguments(self, mesh8):
        obj = shard_mapped(double, **valid_kwargs(mesh8, in_specs=(P("x"),), check_vma=False))
        assert obj.function is double
        assert obj.mesh is mesh8
        assert obj.in_specs == (P("x"),) and obj.out_specs == P("x")
        assert obj.axis_names == ("x",)
        assert obj.check_vma is False

    def test_repr_is_short(self, mesh8):
        obj = shard_mapped(double, **valid_kwargs(mesh8))
        assert repr(obj) == (
            "ShardMapped(double, mesh=Mesh('x': 8, axis_types=(Auto,)), "
            "in_specs=P('x',), out_specs=P('x',))"
        )

    def test_repr_shows_partial_axis_names_and_disabled_check_vma(self, mesh_xy):
        obj = shard_mapped(double, **valid_kwargs(mesh_xy, axis_names="x", check_vma=False))
        assert repr(obj).endswith(
            "in_specs=P('x',), out_specs=P('x',), axis_names=('x',), check_vma=False)"
        )

    def test_looks_like_the_wrapped_function(self, mesh8):
        obj = shard_mapped(double, **valid_kwargs(mesh8))
        assert obj.__name__ == "double"
        assert obj.__qualname__ == "double"
        assert obj.__doc__ == "Doubles its shard."
        assert obj.__module__ == __name__
        assert obj.__wrapped__ is double
        assert inspect.signature(obj) == inspect.signature(double)

    def test_compares_and_hashes_by_identity(self, mesh8):
        first = shard_mapped(double, **valid_kwargs(mesh8))
        second = shard_mapped(double, **valid_kwargs(mesh8))
        assert first != second and first == first
        assert len({first, second, first}) == 2

    def test_class_takes_exactly_the_factory_arguments(self):
        ours = inspect.signature(ShardMapped).parameters
        theirs = inspect.signature(shard_mapped).parameters
        assert [(p.name, p.kind, p.default) for p in ours.values()] == [
            (p.name, p.kind, p.default) for p in theirs.values()
        ]
        first, *options = theirs.values()
        assert first.name == "function"
        assert first.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in options)

    def test_public_module_exports_and_names_itself(self):
        assert tinax.parallel.__all__ == ["ShardMapped", "fail_fast", "shard_mapped"]
        assert ShardMapped.__module__ == shard_mapped.__module__ == "tinax.parallel"
        assert tinax.parallel.fail_fast.__module__ == "tinax.parallel"

    def test_partial_function_keeps_a_readable_name_in_repr(self, mesh8):
        obj = shard_mapped(functools.partial(scale, factor=3), **valid_kwargs(mesh8))
        assert repr(obj).startswith("ShardMapped(partial(scale), mesh=")
