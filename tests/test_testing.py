"""tinax.testing: values drawn at a fixed abstract signature, and ``no_new_traces``.

The promise under test: a property test draws thousands of examples from
``arguments(trace)`` and the object never traces again, each drawn leaf typed
exactly as in the trace; a step precompiled in a fixture passes hypothesis's
default 200 ms deadline; ``no_new_traces`` fails with the diagnosis when an
object traces inside it. hypothesis stays optional: without it, the scopes import and
work (a serving process needs no test library), and ``arguments`` says which extra to
install.
"""

import dataclasses
import functools
import os
import pathlib
import re
import textwrap

import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import FlakyFailure, NoSuchExample
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from helpers.pages import untimed
from helpers.processes import Module, run_program
from tinax._src.diagnosis import compare, report
from tinax.jit import TraceBudgetError, bounded_jit
from tinax.testing import arguments, no_new_traces

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Every dtype kind JAX supports on CPU, the narrow ml_dtypes floats and ints included.
DTYPES = [
    jnp.bool_,
    jnp.int8,
    jnp.int16,
    jnp.int32,
    jnp.uint8,
    jnp.uint16,
    jnp.uint32,
    jnp.int4,
    jnp.uint4,
    jnp.float16,
    jnp.bfloat16,
    jnp.float32,
    jnp.float8_e4m3fn,
    jnp.float8_e5m2,
    jnp.complex64,
]


@functools.partial(jax.tree_util.register_dataclass, data_fields=["w", "b"], meta_fields=["n"])
@dataclasses.dataclass
class Layer:
    w: object
    b: object
    n: int


def identity():
    """A new function per object: objects rebuilt for one function at one place warn."""

    def ignore(*args, **kwargs):
        return None

    return ignore


def minimal(strategy, condition=lambda call: True):
    """The simplest draw that meets ``condition``, found quickly (no explain phase)."""
    quick = settings(database=None, phases=[Phase.generate, Phase.shrink], max_examples=50)
    return find(strategy, condition, settings=quick)


def leaf_types(tree):
    return [jax.typeof(leaf) for leaf in jax.tree.leaves(tree)]


def traced_types(signature):
    """The abstract value of every array leaf recorded in a trace, in call order."""
    return [
        value for argument in signature.recorded if not argument.static for value in argument.values
    ]


# --- drawn pytrees -------------------------------------------------------------------------


def arrays_of_every_kind():
    shapes = hnp.array_shapes(min_dims=0, max_dims=2, max_side=3)
    return st.builds(lambda dtype, shape: jnp.zeros(shape, dtype), st.sampled_from(DTYPES), shapes)


def python_scalars():
    return st.sampled_from([0.5, 3, 1j])  # weakly typed: f32, i32, c64


def pytrees():
    leaves = arrays_of_every_kind() | python_scalars() | st.none()
    return st.recursive(
        leaves,
        lambda children: (
            st.lists(children, max_size=3)
            | st.tuples(children, children)
            | st.dictionaries(st.sampled_from("abc"), children, max_size=3)
            | st.builds(Layer, children, children, st.integers(0, 3))
        ),
        max_leaves=6,
    ).filter(lambda tree: len(jax.tree.leaves(tree)) >= 2)


class TestRoundTrip:
    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(tree=pytrees(), data=st.data())
    def test_draws_never_retrace_and_keep_every_leaf_type_when_pytrees_are_drawn(
        self, make_bounded, tree, data
    ):
        step = make_bounded(identity(), max_traces=1)
        step(tree, scale=1.0)
        signature = step.traced_signatures[-1]
        for _ in range(8):  # 25 trees x 8 draws: 200 drawn calls
            args, kwargs = data.draw(arguments(signature))
            assert leaf_types((args, kwargs)) == traced_types(signature)
            assert jax.tree.structure((args, kwargs)) == jax.tree.structure(
                ((tree,), {"scale": 1.0})
            )
            step(*args, **kwargs)
        assert step.traces_used == 1

    def test_two_hundred_draws_never_retrace_when_every_kind_is_in_one_call(self):
        tree = {
            "arrays": [jnp.zeros((2, 3), dtype) for dtype in DTYPES],
            "weak": (0.5, 3, 1j),
            "layer": Layer(jnp.zeros(3), None, 2),
            "key": jax.random.key(0),
        }
        step = bounded_jit(identity(), max_traces=1, static_argnames="mode")  # one builder: slow
        step(tree, jnp.ones(2, jnp.bfloat16), mode="train", lr=0.1)
        signature = step.traced_signatures[-1]
        drawn = 0

        @settings(max_examples=200, deadline=None, database=None)
        @given(arguments(step))
        def run(call):
            nonlocal drawn
            args, kwargs = call
            assert kwargs.pop("mode") == "train"
            assert leaf_types((args, kwargs)) == traced_types(signature)
            step(*args, mode="train", **kwargs)
            drawn += 1

        run()
        assert drawn == 200
        assert step.traces_used == 1


class TestLeaves:
    def test_weak_scalars_are_drawn_as_python_numbers(self, make_bounded):
        step = make_bounded(identity(), max_traces=1)
        step(0.5, 3, 1j)
        args, _ = minimal(arguments(step))
        assert [type(arg) for arg in args] == [float, int, complex]

    @pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: jnp.dtype(dtype).name)
    def test_arrays_are_jax_arrays_of_the_traced_dtype_and_native_byte_order(
        self, make_bounded, dtype
    ):
        step = make_bounded(identity(), max_traces=1)
        step(jnp.zeros((4,), dtype))
        (array,), _ = minimal(arguments(step))
        assert isinstance(array, jax.Array)
        assert array.dtype == jnp.dtype(dtype)
        assert np.asarray(array).dtype.isnative

    @settings(max_examples=30, deadline=None)
    @given(data=st.data())
    def test_default_values_are_finite_and_moderate_when_not_overridden(self, data):
        structs = [jax.ShapeDtypeStruct((6,), dtype) for dtype in DTYPES]
        (drawn, weak), _ = data.draw(
            arguments(((structs, jax.ShapeDtypeStruct((), jnp.float32, weak_type=True)), {}))
        )
        for array in drawn:
            values = np.asarray(array).astype(np.complex128)
            assert np.all(np.isfinite(values))
            bound = 100 if jnp.issubdtype(array.dtype, jnp.integer) else 10
            assert np.all(np.abs(values) <= bound * (1 + 1e-6))  # complex: magnitude
        assert -10 <= weak <= 10

    def test_draws_shrink_towards_zeros(self, make_bounded):
        step = make_bounded(identity(), max_traces=1)
        step([jnp.ones((3,), dtype) for dtype in DTYPES], 2.5, key=jax.random.key(3))
        (arrays, weak), kwargs = minimal(arguments(step))
        assert all(not np.asarray(array).astype(np.complex128).any() for array in arrays)
        assert weak == 0.0
        assert not jax.random.key_data(kwargs["key"]).any()

    def test_a_failing_draw_shrinks_to_the_boundary_value(self, make_bounded):
        step = make_bounded(identity(), max_traces=1)
        step(jnp.ones((4, 4)))
        (array,), _ = minimal(arguments(step), lambda call: float(call[0][0].max()) >= 1)
        assert set(np.asarray(array).flat) <= {0.0, 1.0}  # the boundary, not any value >= 1

    def test_keys_of_each_implementation_keep_their_type(self, make_bounded):
        keys = [jax.random.key(0, impl=impl) for impl in ("threefry2x32", "rbg", "unsafe_rbg")]
        keys.append(jax.random.split(jax.random.key(0), (2, 3)))
        step = make_bounded(identity(), max_traces=1)
        step(*keys)
        call = minimal(arguments(step))
        assert leaf_types(call) == leaf_types(((*keys,), {}))

    def test_float0_and_tokens_are_drawn_as_their_only_values(self, make_bounded):
        zeros = np.zeros((2,), jax.dtypes.float0)
        token = jax.lax.create_token()
        step = make_bounded(identity(), max_traces=1)
        step(zeros, token)
        call = minimal(arguments(step))
        assert leaf_types(call) == leaf_types(((zeros, token), {}))
        step(*call[0], **call[1])
        assert step.traces_used == 1

    def test_static_arguments_and_none_are_kept_as_traced(self, make_bounded):
        config = ("adam", (1, 2))
        step = make_bounded(identity(), max_traces=1, static_argnames="config")
        step({"a": None, "b": jnp.ones(2)}, config=config)
        args, kwargs = minimal(arguments(step))
        assert kwargs["config"] is config
        assert args[0]["a"] is None

    def test_weakly_typed_array_is_refused_with_a_value_error_when_drawn(self, make_bounded):
        step = make_bounded(identity(), max_traces=1)
        step(jnp.full((3,), 0.5))  # weakly typed f32[3]
        with pytest.raises(ValueError, match=r"args\[0\] is a weakly typed float32\[3\]"):
            minimal(arguments(step))


class TestFailingExample:
    def test_failing_example_is_printed_as_the_call_itself(self):
        step = bounded_jit(identity(), max_traces=1)
        step({"w": jnp.ones(2)}, 0.5)

        @settings(database=None, max_examples=5)
        @given(arguments(step))
        def fails(call):
            raise AssertionError("always")

        with pytest.raises(AssertionError) as raised:
            fails()
        notes = " ".join("\n".join(raised.value.__notes__).split())
        assert "call=(({'w': Array([0., 0.], dtype=float32)}, 0.0), {})" in notes


class TestElements:
    def test_override_replaces_the_default_for_its_kind_only(self, make_bounded):
        step = make_bounded(identity(), max_traces=1)
        step(jnp.zeros(3), jnp.zeros(3, jnp.bfloat16), jnp.zeros(3, jnp.int32), 1.0)
        strategy = arguments(step, elements={"float": st.just(0.25)})
        (f32, bf16, i32, weak), _ = minimal(strategy)
        assert np.asarray(f32).tolist() == [0.25] * 3
        assert np.asarray(bf16).astype(np.float32).tolist() == [0.25] * 3
        assert weak == 0.25
        assert np.asarray(i32).tolist() == [0, 0, 0]

    @settings(max_examples=20, deadline=None)
    @given(data=st.data())
    def test_values_are_rounded_to_the_dtype_when_overridden(self, data):
        dtypes = [jnp.bfloat16, jnp.float16, jnp.float32]
        structs = tuple(jax.ShapeDtypeStruct((5,), dtype) for dtype in dtypes)
        values = st.sampled_from([np.float64(0.1), np.float64(1 / 3)])  # exact in none of them
        drawn, _ = data.draw(arguments((structs, {}), elements={"float": values}))
        assert [array.dtype for array in drawn] == dtypes
        for array in drawn:
            assert np.all((np.asarray(array) > 0) & (np.asarray(array) < 0.34))

    def test_unknown_kind_is_a_value_error(self):
        with pytest.raises(ValueError, match=r"arguments: elements must be keyed by dtype kinds"):
            arguments(((), {}), elements={"floats": st.just(0.0)})

    @pytest.mark.parametrize("elements", [[("float", st.just(0.0))], {"float": 0.0}])
    def test_what_is_not_a_mapping_of_strategies_is_a_type_error(self, elements):
        with pytest.raises(TypeError, match=r"arguments: elements"):
            arguments(((), {}), elements=elements)


def update(model, batch, step_count):
    """A step whose leaves need their own strategies: a rate in [0, 1), a positive
    variance, a step counter."""
    return model.w * model.b + batch["x"].sum() / batch["var"].sum() + step_count


@functools.cache
def traced_update():
    """Built and traced once, for every test of the class (draws never trace again)."""
    step = bounded_jit(update, max_traces=1)
    model = Layer(w=jnp.ones(3), b=jnp.float32(0.5), n=2)
    batch = {"x": jnp.ones((4, 3)), "var": jnp.ones((4, 3))}
    step(model, batch, jnp.int32(0))
    return step


RATE = st.floats(0, 1, exclude_max=True, width=32)
VARIANCE = hnp.arrays(np.float32, (4, 3), elements=st.floats(0.5, 4, width=32))
COUNTER = st.integers(0, 1000)
OVERRIDES = {"model.b": RATE, "batch['var']": VARIANCE, "step_count": COUNTER}


class TestOverrides:
    @settings(max_examples=40, deadline=None)
    @given(data=st.data())
    def test_overridden_leaves_satisfy_their_strategy_and_others_keep_the_defaults(self, data):
        step = traced_update()
        (model, batch, step_count), kwargs = data.draw(arguments(step, overrides=OVERRIDES))
        assert kwargs == {}
        assert 0 <= float(model.b) < 1
        assert np.all(np.asarray(batch["var"]) >= 0.5)
        assert 0 <= int(step_count) <= 1000
        for default in (model.w, batch["x"]):  # the default elements: [-10, 10]
            assert np.all(np.abs(np.asarray(default)) <= 10)
        assert leaf_types((model, batch, step_count)) == traced_types(step.traced_signatures[-1])
        step(model, batch, step_count)
        assert step.traces_used == 1

    def test_leaves_not_overridden_still_draw_negative_values(self):
        strategy = arguments(traced_update(), overrides=OVERRIDES)
        (model, batch, _), _ = minimal(
            strategy, lambda call: (np.asarray(call[0][1]["x"]) < 0).any()
        )
        assert (np.asarray(batch["x"]) < 0).any()
        assert 0 <= float(model.b) < 1

    def test_overridden_leaf_never_takes_a_value_outside_its_strategy(self):
        strategy = arguments(traced_update(), overrides=OVERRIDES)
        with pytest.raises(NoSuchExample):
            minimal(strategy, lambda call: float(call[0][0].b) < 0 or int(call[0][2]) < 0)

    def test_star_arguments_and_keywords_are_named_as_tinax_prints_them(self, make_bounded):
        step = make_bounded(lambda *xs, scale: xs, max_traces=1)
        step(jnp.ones(2), jnp.ones(3), scale=jnp.float32(2))
        assert [leaf.path for leaf in step.traced_signatures[-1].leaves] == [
            "xs[0]",
            "xs[1]",
            "scale",
        ]
        overrides = {"xs[1]": st.just(np.full(3, 7.0)), "scale": st.just(np.float32(-1))}
        (_, second), kwargs = minimal(arguments(step, overrides=overrides))
        assert np.asarray(second).tolist() == [7.0] * 3
        assert float(kwargs["scale"]) == -1.0

    def test_positional_arguments_of_args_and_kwargs_are_args_i(self):
        source = (
            (jax.ShapeDtypeStruct((2,), jnp.float32),),
            {"lr": jax.ShapeDtypeStruct((), jnp.float32)},
        )
        overrides = {"args[0]": st.just([1.0, 2.0]), "lr": st.just(3)}
        (array,), kwargs = minimal(arguments(source, overrides=overrides))
        assert np.asarray(array).tolist() == [1.0, 2.0]
        assert jax.typeof(kwargs["lr"]) == jax.typeof(jnp.float32(3))

    def test_path_of_no_leaf_is_a_value_error_naming_the_closest_path(self):
        trace = traced_update().traced_signatures[-1]
        with pytest.raises(ValueError) as raised:
            arguments(trace, overrides={"batch['vars']": VARIANCE})  # checked at once
        assert str(raised.value).startswith(
            "arguments: overrides[\"batch['vars']\"] matches no leaf of the signature; "
            "the closest is \"batch['var']\"."
        )
        assert "Drawn leaves: model.w, model.b, batch['var'], batch['x'], step_count." in str(
            raised.value
        )

    def test_path_of_no_leaf_is_a_value_error_when_an_object_first_draws(self):
        strategy = arguments(traced_update(), overrides={"model.bias": RATE})
        with pytest.raises(
            ValueError, match=r"overrides\['model.bias'\] matches no leaf.*closest is 'model.b'\."
        ):
            minimal(strategy)

    def test_static_argument_path_is_a_value_error(self, make_bounded):
        step = make_bounded(lambda x, n: x * n, max_traces=1, static_argnames="n")
        step(jnp.ones(2), n=3)
        with pytest.raises(ValueError, match=r"overrides\['n'\] names a leaf that is not drawn"):
            minimal(arguments(step, overrides={"n": st.just(4)}))

    @pytest.mark.parametrize(
        ("path", "strategy", "why"),
        [
            ("batch['var']", hnp.arrays(np.float32, (3,)), r"its shape is \(3,\), not \(4, 3\)"),
            ("step_count", st.floats(0, 1), "its dtype float64 does not convert to int32"),
            ("step_count", st.just(2**40), "its values do not fit in int32"),
            ("model.b", st.just(1e300), "its values do not fit in float32"),
            ("model.b", st.just("0.5"), "its dtype <U3 does not convert to float32"),
        ],
        ids=["shape", "dtype kind", "int overflow", "float overflow", "not a number"],
    )
    def test_draw_that_does_not_fit_the_leaf_is_a_value_error_naming_the_path(
        self, path, strategy, why
    ):
        with pytest.raises(ValueError) as raised:
            minimal(arguments(traced_update(), overrides={path: strategy}))
        text = str(raised.value)
        assert text.startswith(f"arguments: overrides[{path!r}] drew ")
        assert f"which does not fit the leaf {path} (" in text
        assert re.search(why, text), text

    @pytest.mark.parametrize(
        "overrides",
        [[("x", st.just(0.0))], {1: st.just(0.0)}, {"x": 0.0}],
        ids=["not a mapping", "key not a str", "value not a strategy"],
    )
    def test_what_is_not_a_mapping_of_paths_to_strategies_is_a_type_error(self, overrides):
        with pytest.raises(TypeError, match=r"^arguments: overrides"):
            arguments(((), {}), overrides=overrides)


class TestSources:
    def test_structs_are_drawn_and_other_leaves_kept_when_source_is_args_and_kwargs(self):
        source = ((jax.ShapeDtypeStruct((2,), jnp.float16), "fixed"), {"n": 3})
        (array, text), kwargs = minimal(arguments(source))
        assert jax.typeof(array) == jax.typeof(jnp.zeros(2, jnp.float16))
        assert (text, kwargs) == ("fixed", {"n": 3})

    def test_latest_trace_is_looked_up_when_the_strategy_first_draws(self, make_bounded):
        step = make_bounded(identity(), max_traces=2)
        strategy = arguments(step)  # no trace yet
        step(jnp.zeros(2))
        step(jnp.zeros((4, 4), jnp.int8))
        (array,), _ = minimal(strategy)
        assert jax.typeof(array) == jax.typeof(jnp.zeros((4, 4), jnp.int8))

    def test_object_without_a_trace_is_a_value_error_when_drawn(self, make_bounded):
        step = make_bounded(identity(), max_traces=1)
        with pytest.raises(ValueError, match=r"has no trace yet to draw arguments for"):
            minimal(arguments(step))

    def test_batched_object_draws_its_batched_arguments(self, make_batched):
        norms = make_batched(lambda v: (v * v).sum(), max_traces=1)
        norms(jnp.ones((8, 3)))
        (batch,), _ = minimal(arguments(norms))
        assert batch.shape == (8, 3)

    @pytest.mark.parametrize("source", [3, "step", (1, 2, 3), ([], []), [(), {}], None], ids=repr)
    def test_other_sources_are_a_type_error(self, source):
        with pytest.raises(TypeError, match=r"^arguments: source must be a TracedSignature"):
            arguments(source)


class TestShardings:
    def test_draws_are_placed_like_the_trace_when_the_object_is_bound_to_an_explicit_mesh(
        self, make_bounded, explicit_mesh8
    ):
        x = jax.device_put(jnp.ones((16, 3)), NamedSharding(explicit_mesh8, P("x")))
        step = make_bounded(lambda v: v * 2, max_traces=1, mesh=explicit_mesh8)
        step(x)
        (drawn,), _ = minimal(arguments(step))
        assert drawn.sharding == NamedSharding(explicit_mesh8, P("x", None))
        assert jax.typeof(drawn) == jax.typeof(x)
        step(drawn)
        assert step.traces_used == 1

    def test_draws_stay_on_the_auto_mesh_when_the_trace_was_on_it(self, make_bounded, mesh8):
        x = jax.device_put(jnp.ones((16, 3)), NamedSharding(mesh8, P("x")))
        step = make_bounded(lambda v: v * 2, max_traces=1, mesh=mesh8)
        step(x)
        (drawn,), _ = minimal(arguments(step))
        assert jax.typeof(drawn) == jax.typeof(x)
        step(drawn)
        assert step.traces_used == 1

    def test_ambient_mesh_is_used_when_the_object_has_none(self, make_bounded, explicit_mesh8):
        x = jax.device_put(jnp.ones((16, 3)), NamedSharding(explicit_mesh8, P("x")))
        step = make_bounded(lambda v: v * 2, max_traces=1)
        with jax.set_mesh(explicit_mesh8):
            step(x)
            (drawn,), _ = minimal(arguments(step))
            step(drawn)
        assert drawn.sharding.mesh is explicit_mesh8
        assert step.traces_used == 1

    def test_no_concrete_mesh_is_a_value_error_when_drawn(self, make_bounded, explicit_mesh8):
        x = jax.device_put(jnp.ones((16, 3)), NamedSharding(explicit_mesh8, P("x")))
        step = make_bounded(lambda v: v * 2, max_traces=1)
        with jax.set_mesh(explicit_mesh8):
            step(x)
        with pytest.raises(ValueError, match=r"no concrete mesh with that shape is known"):
            minimal(arguments(step))

    def test_concrete_sharding_of_a_struct_is_applied_as_given(self, mesh8):
        sharding = NamedSharding(mesh8, P("x"))
        source = ((jax.ShapeDtypeStruct((16,), jnp.float32, sharding=sharding),), {})
        (drawn,), _ = minimal(arguments(source))
        assert drawn.sharding == sharding


# --- the deadline --------------------------------------------------------------------------


def make_train_step():
    def loss_fn(params, batch):
        hidden = jnp.tanh(batch["x"] @ params["w1"] + params["b1"])
        return jnp.mean((hidden @ params["w2"] + params["b2"] - batch["y"]) ** 2)

    def train_step(params, batch, lr):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss

    return train_step


@pytest.fixture(scope="module")
def precompiled_step():
    step = bounded_jit(make_train_step(), max_traces=1)
    f32 = functools.partial(jax.ShapeDtypeStruct, dtype=jnp.float32)
    params = {"w1": f32((16, 32)), "b1": f32((32,)), "w2": f32((32, 4)), "b2": f32((4,))}
    batch = {"x": f32((64, 16)), "y": f32((64, 4))}
    step.precompile(params, batch, jax.ShapeDtypeStruct((), jnp.float32, weak_type=True))
    return step


class TestDefaultDeadline:
    runs = 0

    @settings(settings.get_profile("default"), max_examples=100)
    @given(call=st.data())
    def test_precompiled_step_passes_100_examples_under_the_default_settings(
        self, precompiled_step, call
    ):
        args, kwargs = call.draw(arguments(precompiled_step))
        _params, loss = precompiled_step(*args, **kwargs)
        assert np.isfinite(np.asarray(loss))
        type(self).runs += 1

    def test_every_example_ran_from_the_one_precompiled_trace(self, precompiled_step):
        assert settings.get_profile("default").deadline.total_seconds() == 0.2
        assert type(self).runs == 100
        assert precompiled_step.traces_used == 1


# --- no_new_traces -------------------------------------------------------------------------


class TestNoNewTraces:
    def test_passes_when_every_call_is_cached(self, make_bounded):
        double = make_bounded(lambda x: 2 * x, max_traces=2)
        double(jnp.ones(3))
        with no_new_traces(double):
            double(jnp.zeros(3))
            double(jnp.zeros(3) + 4)
        assert double.traces_used == 1

    def test_fails_with_the_diagnosis_when_an_object_retraces(self, make_bounded):
        def double(x):
            return 2 * x

        step = make_bounded(double, max_traces=2)
        step(jnp.ones(3))
        with pytest.raises(AssertionError) as raised:
            with no_new_traces(step):
                step(jnp.ones(4))
        message = str(raised.value)
        first, second = step.traced_signatures
        best, found = compare.closest([first], second)
        assert message.startswith(
            "TestNoNewTraces.test_fails_with_the_diagnosis_when_an_object_retraces.<locals>."
            "double (tests/test_testing.py:"
        )
        assert "traced 1 time inside no_new_traces: traces_used 1 -> 2 (max_traces=2)." in message
        assert "\nNew trace #2:\n" in message
        for line in report.explanation_lines(best, found, second):
            assert f"\n  {line}" in message
        assert "f32[3]" in message and "f32[4]" in message

    def test_counts_traces_of_lower_and_precompile_too(self, make_bounded):
        step = make_bounded(lambda x: x + 1, max_traces=3)
        with pytest.raises(AssertionError, match=r"traced 2 times inside no_new_traces"):
            with no_new_traces(step):
                step.lower(jnp.ones(2))
                step.precompile(jax.ShapeDtypeStruct((5,), jnp.int32))

    def test_first_trace_is_reported_with_nothing_to_compare_when_it_had_no_history(
        self, make_bounded
    ):
        step = make_bounded(lambda x: x + 1, max_traces=3)
        with pytest.raises(AssertionError) as raised:
            with no_new_traces(step):
                step(jnp.ones(2))
        assert "traces_used 0 -> 1" in str(raised.value)
        assert "No earlier trace to compare with" in str(raised.value)

    def test_names_only_the_objects_that_traced_when_several_are_watched(self, make_bounded):
        def calm(x):
            return x

        def busy(x):
            return x * 2

        quiet, noisy = make_bounded(calm, max_traces=2), make_bounded(busy, max_traces=2)
        quiet(jnp.ones(2))
        noisy(jnp.ones(2))
        with pytest.raises(AssertionError) as raised:
            with no_new_traces(quiet, noisy):
                quiet(jnp.ones(2))
                noisy(jnp.ones(3))
        assert "busy" in str(raised.value) and "calm" not in str(raised.value)

    def test_reports_one_paragraph_per_object_when_several_traced(self, make_bounded):
        first = make_bounded(lambda x: x, max_traces=2)
        second = make_bounded(lambda x: x * 2, max_traces=2)
        with pytest.raises(AssertionError) as raised:
            with no_new_traces(first, second):
                first(jnp.ones(2))
                second(jnp.ones(2))
        assert len(str(raised.value).split("\n\n")) == 2

    def test_nested_blocks_each_check_their_own_span(self, make_bounded):
        outer_step = make_bounded(lambda x: x, max_traces=3)
        inner_step = make_bounded(lambda x: x * 2, max_traces=3)
        with pytest.raises(AssertionError) as raised:
            with no_new_traces(outer_step):
                with no_new_traces(inner_step):
                    outer_step(jnp.ones(2))  # the inner block does not watch it
                inner_step(jnp.ones(2))  # the outer block does not watch it
        assert "traces_used 0 -> 1" in str(raised.value)
        assert str(raised.value).count("New trace") == 1

    def test_inner_failure_passes_through_the_outer_block_unchanged(self, make_bounded):
        step = make_bounded(lambda x: x, max_traces=3)
        with pytest.raises(AssertionError) as raised:
            with no_new_traces(step):
                with no_new_traces(step):
                    step(jnp.ones(2))
        assert str(raised.value).count("New trace #1") == 1

    def test_exception_inside_the_block_passes_through(self, make_bounded):
        step = make_bounded(lambda x: x, max_traces=1)
        step(jnp.ones(2))
        with pytest.raises(TraceBudgetError):
            with no_new_traces(step):
                step(jnp.ones(3))

    def test_same_object_given_twice_is_reported_once(self, make_bounded):
        step = make_bounded(lambda x: x, max_traces=1)
        with pytest.raises(AssertionError) as raised:
            with no_new_traces(step, step):
                step(jnp.ones(2))
        assert str(raised.value).count("New trace #1") == 1

    @pytest.mark.parametrize(
        "value", [jax.jit(lambda x: x), "step", None], ids=["jax.jit object", "str", "None"]
    )
    def test_what_is_not_a_budgeted_object_is_a_type_error(self, make_bounded, value):
        step = make_bounded(lambda x: x, max_traces=1)
        with pytest.raises(TypeError, match=r"^no_new_traces: objects\[1\] must be a BoundedJit"):
            no_new_traces(step, value)

    def test_no_object_is_a_value_error(self):
        with pytest.raises(ValueError, match=r"^no_new_traces: objects must be at least one"):
            no_new_traces()

    def test_property_test_that_draws_shapes_fails_with_the_diagnosis(self, make_bounded):
        # A retrace happens once: JAX caches it, so hypothesis's replay of the failing
        # example passes and hypothesis reports the failure as flaky, diagnosis inside.
        step = make_bounded(lambda x: x.sum(), max_traces=100)
        step(jnp.ones(1))

        @settings(max_examples=20, deadline=None, database=None)
        @given(size=st.integers(1, 5))
        def fuzz_shapes(size):
            with no_new_traces(step):
                step(jnp.ones(size))

        with pytest.raises(FlakyFailure) as raised:
            fuzz_shapes()
        (error,) = raised.value.exceptions
        assert isinstance(error, AssertionError)
        assert re.search(r"x: f32\[\d\] -> f32\[\d\] \(shape\)", str(error))

    def test_budget_spent_exactly_fails_every_replay_and_shrinks_to_the_smallest_change(
        self, make_bounded
    ):
        # The deterministic alternative the guide recommends: a refused trace is not
        # cached, so every replay fails alike and hypothesis shrinks to the minimal draw.
        step = make_bounded(lambda x: x.sum(), max_traces=1)
        step(jnp.ones(1))

        @settings(max_examples=20, deadline=None, database=None)
        @given(size=st.integers(1, 5))
        def fuzz_shapes(size):
            step(jnp.ones(size))

        with pytest.raises(TraceBudgetError, match=r"x: f32\[1\] -> f32\[2\] \(shape\)"):
            fuzz_shapes()


# --- the public surface --------------------------------------------------------------------


class TestPublicSurface:
    def test_module_exports_its_three_names_from_where_it_says(self):
        import inspect

        import tinax.testing

        assert tinax.testing.__all__ == ["arguments", "no_new_compiles", "no_new_traces"]
        for name in tinax.testing.__all__:
            assert getattr(tinax.testing, name).__module__ == "tinax.testing"
        parameters = inspect.signature(arguments).parameters
        assert [(p.name, p.kind.name) for p in parameters.values()] == [
            ("source", "POSITIONAL_OR_KEYWORD"),
            ("elements", "KEYWORD_ONLY"),
            ("overrides", "KEYWORD_ONLY"),
        ]
        assert parameters["overrides"].default is None  # the contract's extension
        assert inspect.signature(tinax.testing.no_new_compiles).parameters == {}

    def test_precompile_is_a_method_of_both_classes(self, make_bounded, make_batched):
        for obj in (
            make_bounded(lambda x: x, max_traces=1),
            make_batched(lambda x: x, max_traces=1),
        ):
            assert obj.precompile(jax.ShapeDtypeStruct((2, 3), jnp.float32)) is not None
            assert obj.traces_used == 1


# --- hypothesis is optional ----------------------------------------------------------------

BLOCKER = textwrap.dedent(
    """
    import sys

    class HideHypothesis:
        def find_spec(self, name, path=None, target=None):
            if name == "hypothesis" or name.startswith("hypothesis."):
                raise ImportError(f"No module named {name!r} (hidden by the test)")
            return None

    sys.meta_path.insert(0, HideHypothesis())
    """
)


def run_without_hypothesis(tmp_path, code, returncode=0):
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    return run_program(code, cwd=ROOT, pythonpath=[tmp_path], timeout=120, returncode=returncode)


class TestOptionalDependency:
    def test_arguments_names_the_testing_extra_when_hypothesis_is_missing(self, tmp_path):
        code = "import tinax.testing\nfrom tinax.testing import arguments\n"
        result = run_without_hypothesis(tmp_path, code, returncode=1)
        last = result.stderr.strip().splitlines()[-1]
        assert last == (
            "ImportError: tinax.testing needs hypothesis, an optional dependency of tinax: "
            "pip install 'tinax[testing]'"
        )

    def test_the_rest_of_tinax_works_when_hypothesis_is_missing(self, tmp_path):
        code = (
            "import jax.numpy as jnp, tinax\n"
            "from tinax.jit import bounded_jit\n"
            "step = bounded_jit(lambda x: x + 1, max_traces=1)\n"
            "step.precompile(jnp.ones(2))\n"
            "print(step(jnp.ones(2)).tolist(), step.traces_used)\n"
        )
        result = run_without_hypothesis(tmp_path, code)
        assert result.stdout.strip() == "[2.0, 2.0] 1"

    def test_scopes_work_in_a_serving_process_when_hypothesis_is_missing(self, tmp_path):
        code = textwrap.dedent(
            """
            import jax.numpy as jnp
            import tinax.testing
            from tinax.jit import bounded_jit
            from tinax.testing import no_new_compiles, no_new_traces

            step = bounded_jit(lambda x: x + 1, max_traces=1)
            step.precompile(jnp.ones(2))
            with no_new_compiles(), no_new_traces(step):
                print(step(jnp.ones(2)).tolist(), step.traces_used)
            names = tinax.testing.__all__, "arguments" in dir(tinax.testing)
            print(no_new_compiles.__module__, *names)
            try:
                from tinax.testing import arguments
            except ImportError as error:
                print(error)
            """
        )
        out = run_without_hypothesis(tmp_path, code).stdout.splitlines()
        assert out == [
            "[2.0, 2.0] 1",
            "tinax.testing ['arguments', 'no_new_compiles', 'no_new_traces'] True",
            "tinax.testing needs hypothesis, an optional dependency of tinax: "
            "pip install 'tinax[testing]'",
        ]

    def test_scope_still_refuses_and_reports_compiles_when_hypothesis_is_missing(self, tmp_path):
        code = textwrap.dedent(
            """
            import jax
            import jax.numpy as jnp
            from tinax.jit import bounded_jit
            from tinax.testing import no_new_compiles

            step = bounded_jit(lambda x: x + 1, max_traces=2)
            step.precompile(jnp.ones(2))
            for compiles in (lambda: step(jnp.ones(3)), lambda: jax.jit(jnp.sin)(1.0)):
                try:
                    with no_new_compiles():
                        compiles()
                except Exception as error:
                    print(type(error).__name__)
            """
        )
        out = run_without_hypothesis(tmp_path, code).stdout.split()
        assert out == ["TraceBudgetError", "AssertionError"]

    def test_plugin_reports_budgets_of_a_suite_without_hypothesis(self, tmp_path):
        (tmp_path / "test_serving.py").write_text(
            textwrap.dedent(
                """
                import jax.numpy as jnp
                from tinax.jit import bounded_jit
                from tinax.testing import no_new_compiles

                def test_precompiled_step_compiles_nothing_more():
                    step = bounded_jit(lambda x: x * 2, max_traces=1)
                    step.precompile(jnp.ones(4))
                    with no_new_compiles():
                        assert step(jnp.ones(4)).tolist() == [2.0] * 4
                """
            )
        )
        code = (
            "import sys, pytest\n"
            "sys.exit(pytest.main(['-p', '_tinax_pytestplugin', '--tinax-budgets', "
            "'-W', 'error', '-q', '-p', 'no:cacheprovider', 'test_serving.py']))\n"
        )
        (tmp_path / "sitecustomize.py").write_text(BLOCKER)
        result = run_program(
            code,
            cwd=tmp_path,
            pythonpath=[tmp_path],
            env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            timeout=120,
        )
        assert "1 passed" in result.stdout
        assert "tinax budgets" in result.stdout

    def test_importing_tinax_and_the_scopes_never_imports_hypothesis(self):
        code = (
            "import sys, tinax, tinax.jit, tinax.parallel, _tinax_pytestplugin\n"
            "from tinax.testing import no_new_compiles, no_new_traces\n"
            "from tinax._src.observe import session_budgets\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'hypothesis'))\n"
            "from tinax.testing import arguments\n"
            "print('hypothesis' in sys.modules)\n"
        )
        out = run_program(code, cwd=ROOT, timeout=120).stdout.splitlines()
        assert out == ["[]", "True"]


# --- the guide -----------------------------------------------------------------------------

GUIDE = ROOT / "docs" / "property-tests.md"
EXAMPLE = ROOT / "examples" / "property_tests.py"


def run_from_root(program, *args, **environment):
    """``program`` run from the checkout's root as a newcomer runs it (no ``XLA_FLAGS``)."""
    return run_program(program, *args, cwd=ROOT, env=environment, devices=None, timeout=600).stdout


def budgets_report(out):
    """The ``--tinax-budgets`` report in pytest's output: its title line and table."""
    lines = out.splitlines()
    start = next(index for index, line in enumerate(lines) if "tinax budgets" in line)
    end = next(index for index in range(start, len(lines)) if " passed in " in lines[index])
    return "\n".join(lines[start:end])


def untimed_rows(report):
    """The report with durations and runs of spaces masked, rows sorted (rows with
    similar compile times come in either order)."""
    title, header, *rows = untimed(report).splitlines()
    return title, header, sorted(rows)


class TestGuide:
    def test_example_tests_pass_under_the_default_hypothesis_settings_and_report(self):
        """The example's tests pass with warnings as errors (the project's configuration),
        and the page shows the real ``--tinax-budgets`` report of that session
        (``TINAX_REGENERATE_DOCS=1`` writes it in)."""
        out = run_from_root(
            Module("pytest"),
            *("-p", "no:cacheprovider", "-q", "-p", "_tinax_pytestplugin"),
            *(str(EXAMPLE.relative_to(ROOT)), "--tinax-budgets"),
            PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",  # the plugin as -p loads it, installed or not
            COLUMNS="80",
        )
        assert "9 passed" in out
        report = budgets_report(out)
        page = GUIDE.read_text()
        (block,) = re.findall(r"```text\n(=+ tinax budgets.*?)\n```", page, flags=re.DOTALL)
        if os.environ.get("TINAX_REGENERATE_DOCS") == "1":
            GUIDE.write_text(page.replace(block, report))
            block = report
        assert untimed_rows(block) == untimed_rows(report)
        assert "4 budgeted functions" in report

    def test_every_code_block_of_the_page_is_quoted_from_the_example(self):
        blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.DOTALL)
        assert len(blocks) >= 6
        lines = {line.strip() for line in EXAMPLE.read_text().splitlines()}
        for block in blocks:  # indentation aside: the page runs at top level what __main__ runs
            unquoted = [line for line in block.splitlines() if line.strip() not in lines]
            assert unquoted == [], f"not in the example:\n{block}"

    def test_page_shows_the_real_output_of_the_script(self):
        out = run_from_root(EXAMPLE)
        sections = out.split("\n=== ")[1:]
        assert len(sections) == 4
        page = GUIDE.read_text()
        for section in sections:
            title, _, body = section.partition("\n")
            assert f"```text\n{body.rstrip()}\n```" in page, f"section {title!r} is out of date"
