"""``static_nonarrays=True``: equinox models passed whole, trained as under eqx.filter_jit."""

from __future__ import annotations

import os
import re
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinax.jit import BatchedJit, BoundedJit, TraceBudgetError, batched_jit, bounded_jit
from tinax.testing import arguments, no_new_traces


def unaddressed(text: str) -> str:
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)


def lines(text: object) -> list[str]:
    return [line.strip() for line in str(text).splitlines()]


def mlp(activation: Any = jax.nn.relu, seed: int = 0) -> eqx.nn.MLP:
    return eqx.nn.MLP(16, 4, 32, 2, activation=activation, key=jax.random.key(seed))


class Scaled(eqx.Module):
    """A module with a Python-int field (a leaf, not a static field)."""

    linear: eqx.nn.Linear
    power: int

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.linear(x) ** self.power


def scaled(power: int) -> Scaled:
    return Scaled(eqx.nn.Linear(3, 2, key=jax.random.key(0)), power)


def forward(model: Any, x: jax.Array) -> jax.Array:
    return model(x)


class Dropped(eqx.Module):
    """A Linear then a Dropout, whose bool ``inference`` field inference_mode flips."""

    layers: list[Any]

    def __init__(self, key: jax.Array) -> None:
        self.layers = [eqx.nn.Linear(3, 3, key=key), eqx.nn.Dropout(0.5)]

    def __call__(self, x: jax.Array, key: jax.Array) -> jax.Array:
        return self.layers[1](self.layers[0](x), key=key)


def apply_keyed(model: Any, x: jax.Array, key: jax.Array) -> jax.Array:
    return model(x, key)


class Gain(eqx.Module):
    """A module with a number field the function only computes with."""

    gain: Any

    def __call__(self, x: jax.Array) -> jax.Array:
        return x * self.gain


# --- training, as under eqx.filter_jit ------------------------------------------------------


def train(jit: Any, model: Any, batches: list[tuple[jax.Array, jax.Array]]) -> list[float]:
    """Losses of an optax adam loop whose step is compiled by ``jit``."""
    optimizer = optax.adam(1e-2)

    def loss_fn(model: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((jax.vmap(model)(x) - y) ** 2)

    def step(model: Any, state: Any, x: jax.Array, y: jax.Array) -> Any:
        loss, grads = eqx.filter_value_and_grad(loss_fn)(model, x, y)
        updates, state = optimizer.update(grads, state, model)
        return eqx.apply_updates(model, updates), state, loss

    compiled = jit(step)
    state = optimizer.init(eqx.filter(model, eqx.is_array))
    losses = []
    for x, y in batches:
        model, state, loss = compiled(model, state, x, y)
        losses.append(float(loss))
    return losses


class SmallCNN(eqx.Module):
    conv: eqx.nn.Conv2d
    head: eqx.nn.Linear
    activation: Any

    def __init__(self, key: jax.Array) -> None:
        first, second = jax.random.split(key)
        self.conv = eqx.nn.Conv2d(1, 2, 3, key=first)
        self.head = eqx.nn.Linear(2 * 4 * 4, 1, key=second)
        self.activation = jax.nn.relu

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.head(self.activation(self.conv(x)).reshape(-1))


def batches(x_shape: tuple[int, ...], y_shape: tuple[int, ...], count: int = 4) -> list[Any]:
    keys = jax.random.split(jax.random.key(1), 2 * count)
    return [
        (jax.random.normal(keys[2 * i], x_shape), jax.random.normal(keys[2 * i + 1], y_shape))
        for i in range(count)
    ]


class TestTraining:
    @pytest.mark.parametrize(
        "make, x_shape, y_shape",
        [
            pytest.param(lambda: mlp(), (8, 16), (8, 4), id="mlp"),
            pytest.param(lambda: SmallCNN(jax.random.key(0)), (8, 1, 6, 6), (8, 1), id="cnn"),
        ],
    )
    def test_losses_equal_filter_jit_when_trained_with_optax(self, make, x_shape, y_shape):
        data = batches(x_shape, y_shape)
        ours: list[BoundedJit[..., Any]] = []

        def tinax_jit(step: Any) -> Any:
            ours.append(bounded_jit(step, max_traces=1, static_nonarrays=True))
            return ours[0]

        expected = train(eqx.filter_jit, make(), data)
        got = train(tinax_jit, make(), data)
        np.testing.assert_allclose(got, expected, rtol=1e-6)
        assert got[-1] < got[0]  # it trains
        assert ours[0].traces_used == 1


# --- what comes back ------------------------------------------------------------------------


class TestOutputs:
    def test_module_comes_back_with_its_functions_when_returned(self):
        step = bounded_jit(lambda model: model, max_traces=1, static_nonarrays=True)
        model = mlp()
        for _ in range(3):
            model = step(model)
        assert type(model) is eqx.nn.MLP
        assert model.activation is jax.nn.relu
        assert model(jnp.ones(16)).shape == (4,)
        assert step.traces_used == 1

    def test_python_values_of_the_output_come_back_as_they_are(self):
        marker = object()

        def function(x: jax.Array, name: str) -> Any:
            return {"y": x * 2, "name": name, "n": 3, "lr": 0.5, "mark": marker, "none": None}

        step = bounded_jit(function, max_traces=1, static_nonarrays=True)
        out = step(jnp.ones(2), "run-1")
        assert out["name"] == "run-1" and out["n"] == 3 and out["lr"] == 0.5
        assert out["mark"] is marker and out["none"] is None
        assert type(out["n"]) is int
        assert out["y"].tolist() == [2.0, 2.0]

    def test_static_output_belongs_to_its_trace_when_shapes_retrace(self):
        step = bounded_jit(lambda x: (x, x.shape[0]), max_traces=2, static_nonarrays=True)
        assert step(jnp.ones(2))[1] == 2
        assert step(jnp.ones(5))[1] == 5
        assert step(jnp.ones(2))[1] == 2  # trace 1's executable, trace 1's static output
        assert step.traces_used == 2

    def test_unhashable_output_leaf_comes_back(self):
        step = bounded_jit(lambda x: (x, {1, 2}), max_traces=1, static_nonarrays=True)
        assert step(jnp.ones(2))[1] == {1, 2}
        assert step(jnp.ones(2))[1] == {1, 2}

    def test_numpy_arrays_are_traced_and_python_numbers_are_static(self):
        step = bounded_jit(lambda x, n: x * n, max_traces=3, static_nonarrays=True)
        step(np.ones(2, np.float32), 2)
        step(jnp.ones(2), 2)  # the same abstract value: no trace
        assert step.traces_used == 1
        step(jnp.ones(2), np.float32(3.0))  # a NumPy scalar is an array
        step(jnp.ones(2), np.float32(4.0))
        assert step.traces_used == 2
        step(jnp.ones(2), 3)
        assert step.traces_used == 3


# --- the returned model: JAX's C++ dispatch, bit for bit eqx.filter_jit -------------------


def python_dispatches(call: Any) -> int:
    """How many Python frames of JAX's jit dispatch (its ``pjit`` module) ``call()`` runs:
    none where JAX's C++ dispatch takes a cached call, one or more on its Python path."""
    import sys

    seen = [0]

    def profile(frame: Any, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_filename.endswith(os.path.join("_src", "pjit.py")):
            seen[0] += 1

    sys.setprofile(profile)
    try:
        jax.block_until_ready(call())
    finally:
        sys.setprofile(None)
    return seen[0]


def assert_same(got: Any, expected: Any) -> None:
    """The same tree, equal arrays bit for bit (dtype too), the same other leaves."""
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    expected_leaves, expected_tree = jax.tree_util.tree_flatten(expected)
    assert got_tree == expected_tree
    for mine, theirs in zip(got_leaves, expected_leaves, strict=True):
        if eqx.is_array(theirs):
            assert np.asarray(mine).dtype == np.asarray(theirs).dtype
            np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))
        else:
            assert type(mine) is type(theirs) and (mine is theirs or mine == theirs)


class NormedCNN(eqx.Module):
    """Conv, BatchNorm (its statistics in an ``eqx.nn.State``), Linear."""

    conv: eqx.nn.Conv2d
    norm: eqx.nn.BatchNorm
    head: eqx.nn.Linear

    def __init__(self, key: jax.Array) -> None:
        first, second = jax.random.split(key)
        self.conv = eqx.nn.Conv2d(1, 2, 3, key=first)
        self.norm = eqx.nn.BatchNorm(2, axis_name="batch", mode="batch")
        self.head = eqx.nn.Linear(2 * 4 * 4, 1, key=second)

    def __call__(self, x: jax.Array, state: eqx.nn.State) -> tuple[jax.Array, eqx.nn.State]:
        x, state = self.norm(self.conv(x), state)
        return self.head(jax.nn.relu(x).reshape(-1)), state


OPTIMIZER = optax.adamw(1e-2)


def mlp_step(model: Any, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
    def loss_fn(model: Any) -> jax.Array:
        return jnp.mean((jax.vmap(model)(x) - y) ** 2)

    loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
    updates, opt_state = OPTIMIZER.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss


def cnn_step(model: Any, state: Any, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
    def loss_fn(model: Any) -> tuple[jax.Array, Any]:
        batched = jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))
        out, new_state = batched(x, state)
        return jnp.mean((out - y) ** 2), new_state

    (loss, state), grads = eqx.filter_value_and_grad(loss_fn, has_aux=True)(model)
    updates, opt_state = OPTIMIZER.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), state, opt_state, loss


def cnn_eval(model: Any, state: Any, x: jax.Array) -> Any:
    model = eqx.nn.inference_mode(model)
    return jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)


def mlp_training() -> tuple[Any, tuple[Any, ...], list[tuple[jax.Array, ...]]]:
    model = mlp()
    return (
        mlp_step,
        (model, OPTIMIZER.init(eqx.filter(model, eqx.is_array))),
        batches((8, 16), (8, 4)),
    )


def cnn_training() -> tuple[Any, tuple[Any, ...], list[tuple[jax.Array, ...]]]:
    model, state = eqx.nn.make_with_state(NormedCNN)(jax.random.key(0))
    carried = (model, state, OPTIMIZER.init(eqx.filter(model, eqx.is_array)))
    return cnn_step, carried, batches((8, 1, 6, 6), (8, 1))


TRAININGS = [pytest.param(mlp_training, id="mlp-adamw"), pytest.param(cnn_training, id="cnn-bn")]


class TestReturnedModel:
    @pytest.mark.parametrize("training", TRAININGS)
    def test_a_training_loop_equals_filter_jit_bit_for_bit(self, training):
        step, carried, data = training()
        ours = bounded_jit(step, max_traces=1, static_nonarrays=True)
        theirs = eqx.filter_jit(step)
        mine = expected = carried
        for x, y in data:
            *mine, loss = ours(*mine, x, y)
            *expected, expected_loss = theirs(*expected, x, y)
            assert_same(loss, expected_loss)
            assert_same(mine, expected)
        assert type(mine[0]) is type(carried[0])
        if step is mlp_step:
            assert mine[0].activation is jax.nn.relu
        assert ours.traces_used == 1 and len(ours.traced_signatures) == 1
        assert str(ours.explain(*mine, *data[0])).count("\n") == 0  # reuses trace #1

    @pytest.mark.parametrize("training", TRAININGS)
    def test_a_cached_training_step_stays_on_jax_s_cpp_dispatch(self, training):
        step, carried, data = training()
        ours = bounded_jit(step, max_traces=1, static_nonarrays=True)
        x, y = data[0]
        carried = ours(*carried, x, y)[:-1]
        ours(*carried, x, y)
        assert python_dispatches(lambda: ours(*carried, x, y)) == 0

    def test_an_eval_step_equals_filter_jit_and_stays_on_jax_s_cpp_dispatch(self):
        _, (model, state, _), data = cnn_training()
        ours = bounded_jit(cnn_eval, max_traces=1, static_nonarrays=True)
        for x, _ in data[:2]:
            assert_same(ours(model, state, x), eqx.filter_jit(cnn_eval)(model, state, x))
        assert python_dispatches(lambda: ours(model, state, data[0][0])) == 0

    def test_functions_numbers_strings_and_none_come_back_on_jax_s_cpp_dispatch(self):
        def function(model: Any, x: jax.Array, name: str) -> Any:
            return {"y": model(x), "model": model, "name": name, "n": 3, "lr": 0.5, "no": None}

        ours = bounded_jit(function, max_traces=1, static_nonarrays=True)
        model, x = mlp(), jnp.ones(16)
        for _ in range(3):
            assert_same(ours(model, x, "run"), eqx.filter_jit(function)(model, x, "run"))
        assert python_dispatches(lambda: ours(model, x, "run")["y"]) == 0

    def test_an_all_array_output_stays_on_jax_s_cpp_dispatch(self):
        ours = bounded_jit(forward, max_traces=1, static_nonarrays=True)
        ours(mlp(), jnp.ones(16))
        assert python_dispatches(lambda: ours(mlp(), jnp.ones(16))) == 0

    def test_each_signature_gives_back_its_own_output_structure(self):
        def function(x: jax.Array) -> Any:
            if x.shape[0] == 2:
                return {"x": x, "act": jax.nn.relu, "size": 2}
            return (x * 2, "five", None, [x.shape[0], jnp.sin])

        ours = bounded_jit(function, max_traces=2, static_nonarrays=True)
        for size in (2, 5, 2, 5, 5, 2):
            x = jnp.ones(size)
            assert_same(ours(x), eqx.filter_jit(function)(x))
        assert ours.traces_used == 2
        assert python_dispatches(lambda: ours(jnp.ones(5))[0]) == 0
        assert python_dispatches(lambda: ours(jnp.ones(2))["x"]) == 0

    def test_a_returned_model_comes_back_whole_inside_an_outer_jit_and_grad(self):
        step = bounded_jit(lambda m, x: (m(x), m), max_traces=1, static_nonarrays=True)
        model, x = mlp(), jnp.ones(16)

        def loss(m: Any) -> jax.Array:
            y, returned = step(m, x)
            assert returned.activation is jax.nn.relu
            return y.sum() + returned(x).sum()

        grads = eqx.filter_grad(loss)(model)
        assert_same(grads, eqx.filter_grad(loss)(model))
        assert float(jax.jit(lambda v: step(model, v)[1](v).sum())(x)) == pytest.approx(
            float(model(x).sum())
        )
        assert step.traces_used == 1

    def test_a_tree_of_out_shardings_still_gives_the_model_back(self, mesh8):
        replicated = jax.sharding.NamedSharding(mesh8, jax.sharding.PartitionSpec())
        step = bounded_jit(
            lambda m, x: (m(x), m),
            max_traces=1,
            static_nonarrays=True,
            out_shardings=(replicated, None),
        )
        for _ in range(2):
            y, model = step(mlp(), jnp.ones(16))
        assert y.sharding == replicated and model.activation is jax.nn.relu

    def test_batched_output_with_static_leaves_stays_on_jax_s_cpp_dispatch(self):
        def per_example(model: Scaled, x: jax.Array) -> Any:
            return model(x), model, "tag"

        step = batched_jit(per_example, in_axes=(None, 0), max_traces=1, static_nonarrays=True)
        model, x = scaled(2), jnp.ones((4, 3))
        y, returned, tag = step(model, x)
        assert y.shape == (4, 2) and returned.power == 2 and tag == "tag"
        assert returned.linear.weight.shape == (4, 2, 3)  # out_axes=0 batches every array
        assert python_dispatches(lambda: step(model, x)[0]) == 0


def copied(tree: Any) -> Any:
    """``tree`` with a buffer of its own for each array leaf (donation deletes them)."""
    return jax.tree.map(lambda leaf: jnp.copy(leaf) if eqx.is_array(leaf) else leaf, tree)


def array_leaves(tree: Any) -> list[jax.Array]:
    return jax.tree.leaves(eqx.filter(tree, eqx.is_array))


class TestDonation:
    """``donate_argnums``/``donate_argnames`` next to ``static_nonarrays``, as
    ``eqx.filter_jit(step, donate="all")`` donates: the array leaves of the donated
    arguments, and only theirs, are donated."""

    @pytest.mark.parametrize("training", TRAININGS)
    def test_a_donating_training_loop_equals_filter_jit_bit_for_bit(self, training):
        step, carried, data = training()
        positions = tuple(range(len(carried)))  # the model, its state: not the batch
        ours = bounded_jit(step, max_traces=1, static_nonarrays=True, donate_argnums=positions)
        theirs = eqx.filter_jit(step, donate="all")
        mine, expected = copied(carried), copied(carried)
        for x, y in data:
            given = mine
            *mine, loss = ours(*given, x, y)
            *expected, expected_loss = theirs(*expected, *copied((x, y)))
            assert_same(loss, expected_loss)
            assert_same(mine, expected)
            assert all(leaf.is_deleted() for leaf in array_leaves(given))
            assert not any(leaf.is_deleted() for leaf in array_leaves((x, y, mine)))
        assert ours.traces_used == 1
        assert str(ours.explain(*mine, *data[0])).count("\n") == 0  # reuses trace #1
        given = copied(mine)
        assert python_dispatches(lambda: ours(*given, *data[0])) == 0  # JAX's C++ dispatch

    @pytest.mark.parametrize(
        "options",
        [
            pytest.param({"donate_argnames": ("model", "opt_state")}, id="argnames"),
            pytest.param({"donate_argnums": (0, 1)}, id="argnums"),
        ],
    )
    def test_a_donated_argument_is_donated_by_position_or_keyword(self, options):
        step, carried, (batch, *_) = mlp_training()
        ours = bounded_jit(step, max_traces=2, static_nonarrays=True, **options)
        given = copied(carried)
        expected = eqx.filter_jit(step)(*carried, *batch)
        assert_same(ours(given[0], opt_state=given[1], x=batch[0], y=batch[1]), expected)
        again = copied(carried)
        assert_same(ours(*again, *batch), expected)
        assert all(leaf.is_deleted() for leaf in array_leaves((given, again)))
        assert not any(leaf.is_deleted() for leaf in array_leaves((carried, batch)))

    def test_only_the_named_arguments_are_donated(self):
        step, carried, (batch, *_) = mlp_training()
        ours = bounded_jit(step, max_traces=1, static_nonarrays=True, donate_argnames="opt_state")
        model, opt_state = copied(carried)
        ours(model, opt_state, *batch)
        assert all(leaf.is_deleted() for leaf in array_leaves(opt_state))
        assert not any(leaf.is_deleted() for leaf in array_leaves((model, batch)))

    def test_lower_eval_shape_and_precompile_take_the_call_as_donated(self):
        step, carried, (batch, *_) = mlp_training()
        ours = bounded_jit(step, max_traces=1, static_nonarrays=True, donate_argnums=(0, 1))
        shapes = ours.eval_shape(*carried, *batch)
        assert_same(shapes, eqx.filter_eval_shape(step, *carried, *batch))
        ours.precompile(*carried, *batch)
        assert ours.lower(*carried, *batch).compile() is not None
        given = copied(carried)
        ours(*given, *batch)
        assert ours.traces_used == 1 and ours.compiles_used == 1
        assert all(leaf.is_deleted() for leaf in array_leaves(given))
        assert not any(leaf.is_deleted() for leaf in array_leaves(carried))


# --- traces and diagnosis ------------------------------------------------------------------


class TestDiagnosis:
    def test_activation_change_is_named_with_its_path_when_over_budget(self):
        step = bounded_jit(forward, max_traces=1, static_nonarrays=True)
        step(mlp(), jnp.ones(16))
        with pytest.raises(TraceBudgetError) as info:
            step(mlp(jax.nn.gelu), jnp.ones(16))
        assert lines(info.value)[2:6] == [
            "Closest earlier trace: #1 (1 difference):",
            "model.activation: <function relu> -> <function gelu> (static leaf)",
            "How to fix:",
            "static value: with static_nonarrays=True each new non-array value is a new trace: "
            "keep functions and configs fixed, or allow a trace per value (max_traces at least "
            "the count of values)",  # a function is no array: no advice to pass one
        ]
        assert step.traces_used == 1

    def test_inference_mode_gets_the_mode_fix_and_each_way_runs_as_filter_jit(self):
        """eqx.nn.inference_mode flips Dropout's bool inference field, which Dropout reads
        with a Python if: the fix is a trace per mode or an object per mode, and each,
        followed literally, runs as eqx.filter_jit; the array it does not offer raises."""
        model, x, key = Dropped(jax.random.key(0)), jnp.ones(3), jax.random.key(1)
        step = bounded_jit(apply_keyed, max_traces=1, static_nonarrays=True)
        step(model, x, key)
        with pytest.raises(TraceBudgetError) as info:
            step(eqx.nn.inference_mode(model), x, key)
        assert lines(info.value)[2:6] == [
            "Closest earlier trace: #1 (1 difference):",
            "model.layers[1].inference: False -> True (static leaf)",
            "How to fix:",
            "static value: a bool read by a Python if cannot be traced "
            "(TracerBoolConversionError): allow a trace per mode (max_traces=2, twice what "
            "one mode needs), or wrap the function once per mode",
        ]
        modes = [model, eqx.nn.inference_mode(model)]
        reference = eqx.filter_jit(apply_keyed)
        per_mode = bounded_jit(apply_keyed, max_traces=2, static_nonarrays=True)
        for mode in modes * 2:  # train, eval, train, eval
            np.testing.assert_array_equal(per_mode(mode, x, key), reference(mode, x, key))
        assert per_mode.traces_used == 2
        for mode in modes:  # one object per mode, the budget of one mode each
            own = bounded_jit(apply_keyed, max_traces=1, static_nonarrays=True)
            for _ in range(2):
                np.testing.assert_array_equal(own(mode, x, key), reference(mode, x, key))
            assert own.traces_used == 1
        as_array = eqx.nn.inference_mode(model, value=jnp.asarray(True))
        for jit in (bounded_jit(apply_keyed, max_traces=1, static_nonarrays=True), reference):
            with pytest.raises(jax.errors.TracerBoolConversionError):
                jit(as_array, x, key)

    def test_a_number_field_passed_as_an_array_runs_as_filter_jit(self):
        step = bounded_jit(forward, max_traces=1, static_nonarrays=True)
        step(Gain(2.0), jnp.ones(3))
        with pytest.raises(TraceBudgetError) as info:
            step(Gain(3.0), jnp.ones(3))
        assert lines(info.value)[5] == (
            "static value: with static_nonarrays=True each new non-array value is a new trace: "
            "keep functions and configs fixed, or pass a number the function only computes "
            "with as an array (jnp.asarray)"
        )
        step = bounded_jit(forward, max_traces=1, static_nonarrays=True)
        for gain in (2.0, 3.0):
            ours = step(Gain(jnp.asarray(gain)), jnp.ones(3))
            np.testing.assert_array_equal(ours, eqx.filter_jit(forward)(Gain(gain), jnp.ones(3)))
        assert step.traces_used == 1

    def test_a_function_field_gets_a_trace_per_value_which_runs_as_filter_jit(self):
        step = bounded_jit(forward, max_traces=2, static_nonarrays=True)  # the fix: 2 values
        for activation in (jax.nn.relu, jax.nn.gelu, jax.nn.relu):
            model = mlp(activation)
            np.testing.assert_array_equal(
                step(model, jnp.ones(16)), eqx.filter_jit(forward)(model, jnp.ones(16))
            )
        assert step.traces_used == 2

    def test_python_int_field_change_is_named_by_explain(self):
        step = bounded_jit(forward, max_traces=1, static_nonarrays=True)
        step(scaled(2), jnp.ones(3))
        explanation = step.explain(scaled(3), jnp.ones(3))
        assert explanation.retraces
        assert lines(explanation)[1:3] == [
            "Closest earlier trace: #1 (1 difference):",
            "model.power: 2 -> 3 (static leaf)",
        ]

    def test_equal_module_rebuilt_reuses_the_trace(self):
        step = bounded_jit(forward, max_traces=1, static_nonarrays=True)
        step(scaled(2), jnp.ones(3))
        assert not step.explain(scaled(2), jnp.ones(3)).retraces
        step(scaled(2), jnp.ones(3))
        assert step.traces_used == 1

    def test_history_shows_static_leaves_by_value(self):
        step = bounded_jit(forward, max_traces=2, static_nonarrays=True)
        step(scaled(2), jnp.ones(3))
        step(scaled(3), jnp.ones(3))
        table = str(step.traced_signatures)
        assert "* model.power" in table and "model.linear.weight  f32[2,3]" in table
        leaves = {leaf.path: leaf for leaf in step.traced_signatures[0].leaves}
        assert leaves["model.power"].kind == "static" and leaves["model.power"].text == "2"

    def test_same_value_of_another_type_traces_again_as_jax_keys_statics(self):
        # eqx.filter_jit compares its static leaves by == only: 1 and True share a trace
        # there. JAX's rule for static arguments is type and ==: tinax follows JAX.
        step = bounded_jit(lambda x, n: x * n, max_traces=2, static_nonarrays=True)
        step(jnp.ones(2), 1)
        explanation = step.explain(jnp.ones(2), True)
        assert explanation.retraces
        assert "n: 1 -> True (static leaf, type: int -> bool)" in lines(explanation)
        step(jnp.ones(2), True)
        assert step.traces_used == 2

    def test_rebuilt_optax_transformation_gets_the_build_once_fix(self):
        step = bounded_jit(lambda x, opt: x, max_traces=1, static_nonarrays=True)
        step(jnp.ones(2), optax.adam(1e-3))
        text = lines(step.explain(jnp.ones(2), optax.adam(1e-3)))
        assert (
            "opt.init: <function init_fn> -> <function init_fn> "
            "(function is equal by repr but not by ==)"
        ) in text
        assert any(
            line.startswith("static equality: a function is equal only to itself and this one")
            and "once, outside the step" in line
            for line in text
        )
        assert not any("define __eq__" in line for line in text)

    def test_lambda_rebuilt_per_step_as_static_argument_gets_the_build_once_fix(self):
        step = bounded_jit(lambda x, f: f(x), max_traces=1, static_argnames="f")
        step(jnp.ones(2), f=lambda v: v + 1)
        text = lines(step.explain(jnp.ones(2), f=lambda v: v + 1))
        assert any("once, outside the step" in line for line in text)
        assert not any("define __eq__" in line for line in text)

    def test_dataclass_static_argument_still_gets_the_eq_fix(self):
        class Config:
            def __repr__(self) -> str:
                return "Config()"

        step = bounded_jit(lambda x, c: x, max_traces=1, static_argnames="c")
        step(jnp.ones(2), c=Config())
        text = lines(step.explain(jnp.ones(2), c=Config()))
        assert any("define __eq__" in line for line in text)


class TestWithoutStaticNonarrays:
    """A function leaf without static_nonarrays: tinax's hint, not JAX's static_argnums."""

    def test_explain_says_what_to_do_instead_of_tracing(self):
        step = bounded_jit(forward, max_traces=1)
        explanation = step.explain(mlp(), jnp.ones(16))
        assert not explanation.retraces and explanation.reuses is None
        assert lines(explanation)[1] == "It would raise this error, and trace nothing:"
        text = explanation.raises or ""
        assert text.startswith("TypeError: BoundedJit: the argument leaf model.activation is ")
        assert "model.activation is <function relu> (custom_jvp), not an array" in text
        assert "static_nonarrays=True" in text and "eqx.partition" in text

    @pytest.mark.parametrize("method", ["lower", "trace", "eval_shape", "precompile"])
    def test_forwarded_methods_raise_tinax_hint_as_a_type_error(self, method):
        step = bounded_jit(forward, max_traces=1)
        with pytest.raises(TypeError) as info:
            getattr(step, method)(mlp(), jnp.ones(16))
        message = str(info.value)
        assert message.startswith("BoundedJit: the argument leaf model.activation is ")
        assert "static_nonarrays=True" in message and "static_argnums" not in message
        assert step.traces_used == 0

    @pytest.mark.parametrize("kind", ["bounded", "bounded on a mesh", "batched"])
    def test_a_call_raises_tinax_hint_as_a_type_error(self, kind, mesh8):
        """The call itself (JAX's slow path) says static_nonarrays=True, not JAX's
        static_argnums, and reads as explain does."""
        x = jnp.ones((8, 16)) if kind == "batched" else jnp.ones(16)
        if kind == "batched":
            step: Any = batched_jit(forward, max_traces=1, in_axes=(None, 0))
        else:
            step = bounded_jit(forward, max_traces=1, mesh=mesh8 if "mesh" in kind else None)
        with pytest.raises(TypeError) as info:
            step(mlp(), x)
        message = str(info.value)
        api = type(step).__name__
        assert message.startswith(
            f"{api}: the argument leaf model.activation is <function relu> (custom_jvp), not an "
            "array, and jax.jit traces arrays only. Pass static_nonarrays=True"
        )
        assert "static_argnums" not in message
        assert step.explain(mlp(), x).raises == f"TypeError: {message}"
        assert info.value.__suppress_context__  # JAX's inner error is not printed under it
        assert step.traces_used == 0

    def test_a_rejected_call_leaves_the_object_working_and_looking_as_jax_jit_s(self):
        def double(tree, x):
            return x * 2

        step = bounded_jit(double, max_traces=1)
        with pytest.raises(TypeError, match=r"the argument leaf tree\['f'\] is <function tanh>"):
            step({"f": jnp.tanh}, jnp.ones(2))
        assert step({"f": jnp.ones(2)}, jnp.ones(2)).tolist() == [2.0, 2.0]
        assert step.traces_used == 1
        assert type(step).__call__.fget(step) is step._jitted  # pyright: ignore
        # What jax.jit was given prints as the function wherever JAX's message is not built.
        given = step._jitted.__wrapped__  # pyright: ignore
        assert unaddressed(f"{given}") == unaddressed(str(given)) == unaddressed(repr(double))
        assert unaddressed(repr(step._jitted)) == unaddressed(repr(jax.jit(double)))

    def test_a_plain_call_is_still_the_jax_jit_object(self):
        step = bounded_jit(forward, max_traces=1, static_nonarrays=False)
        assert step.__call__ is step._jitted  # pyright: ignore[reportPrivateUsage]
        assert step.static_nonarrays is False


class TestUnhashable:
    class Block(eqx.Module):
        cfg: Any

    class Net(eqx.Module):
        layers: list[Any]

    def test_unhashable_leaf_is_a_type_error_naming_its_path(self):
        step = bounded_jit(lambda model, x: x, max_traces=1, static_nonarrays=True)
        net = self.Net([self.Block({1, 2})])
        expected = "the leaf model.layers[0].cfg is {1, 2} (set), which is not"
        assert expected in (step.explain(net, jnp.ones(2)).raises or "")
        for call in (step, step.lower):
            with pytest.raises(TypeError) as info:
                call(net, jnp.ones(2))
            assert str(info.value).startswith("BoundedJit: with static_nonarrays=True")
            assert expected in str(info.value)
        assert step.traces_used == 0


# --- the object's other paths ---------------------------------------------------------------


class TestPaths:
    def test_precompile_from_a_traced_signature_then_call_traces_nothing(self):
        step = bounded_jit(forward, max_traces=1, static_nonarrays=True)
        step.lower(scaled(2), jnp.ones(3))
        signature = step.traced_signatures[-1]
        args, _ = signature.abstract_arguments()
        assert args[0].power == 2 and isinstance(args[0].linear.weight, jax.ShapeDtypeStruct)
        other = bounded_jit(forward, max_traces=1, static_nonarrays=True)
        other.precompile(signature)
        with no_new_traces(other):
            other(scaled(2), jnp.ones(3))
        assert other.traces_used == 1

    def test_eval_shape_gives_back_the_output_structure_with_static_leaves(self):
        step = bounded_jit(lambda model: model, max_traces=1, static_nonarrays=True)
        shaped = step.eval_shape(scaled(4))
        assert shaped.power == 4 and shaped.linear.weight.shape == (2, 3)

    def test_arguments_strategy_draws_at_the_traced_signature(self):
        step = bounded_jit(forward, max_traces=1, static_nonarrays=True)
        step(scaled(2), jnp.ones(3))

        @settings(max_examples=5, deadline=None)
        @given(call=arguments(step.traced_signatures[-1]))
        def check(call: Any) -> None:
            args, kwargs = call
            assert args[0].power == 2
            with no_new_traces(step):
                step(*args, **kwargs)

        check()
        assert step.traces_used == 1

    def test_decorator_form_and_mesh_take_static_nonarrays(self):
        mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))

        @bounded_jit(max_traces=1, static_nonarrays=True, mesh=mesh)
        def apply(model: Any, x: jax.Array) -> jax.Array:
            return model(x)

        assert apply(scaled(2), jnp.ones(3)).shape == (2,)
        assert apply.static_nonarrays is True and apply.traces_used == 1

    def test_under_filter_grad_and_an_outer_jit_it_reuses_its_trace(self):
        step = bounded_jit(lambda m, x: m(x).sum(), max_traces=1, static_nonarrays=True)
        model = mlp()
        step(model, jnp.ones(16))
        grads = eqx.filter_grad(lambda m: step(m, jnp.ones(16)))(model)
        assert grads.layers[0].weight.shape == (32, 16) and grads.activation is None
        outer = jax.jit(lambda x: step(model, x))
        assert float(outer(jnp.ones(16))) == pytest.approx(float(step(model, jnp.ones(16))))
        assert step.traces_used == 1

    def test_out_shardings_apply_to_the_array_leaves_of_the_output(self, mesh8):
        replicated = jax.sharding.NamedSharding(mesh8, jax.sharding.PartitionSpec())
        step = bounded_jit(
            lambda m, x: (m(x), m), max_traces=1, static_nonarrays=True, out_shardings=replicated
        )
        y, model = step(mlp(), jnp.ones(16))
        assert y.sharding == replicated and model.layers[0].weight.sharding == replicated
        assert model.activation is jax.nn.relu

    def test_disable_jit_runs_eagerly_and_counts_nothing(self):
        step = bounded_jit(lambda model: model, max_traces=0, static_nonarrays=True)
        with jax.disable_jit():
            assert step(scaled(2)).power == 2
        assert step.traces_used == 0


class TestBatched:
    @pytest.mark.parametrize(
        "options", [{"donate_argnames": "x"}, {"donate_argnums": 1}], ids=["argnames", "argnums"]
    )
    def test_the_donated_batch_is_deleted_and_the_module_kept(self, options):
        def per_example(model: Scaled, x: jax.Array) -> Any:
            return model(x), x + model.power

        step = batched_jit(
            per_example, in_axes=(None, 0), max_traces=1, static_nonarrays=True, **options
        )
        model, x = scaled(2), jnp.ones((4, 3))
        expected = eqx.filter_jit(jax.vmap(per_example, in_axes=(None, 0)))(model, x)
        given = jnp.ones((4, 3))
        assert_same(step(model, given), expected)
        assert given.is_deleted()
        assert not any(leaf.is_deleted() for leaf in array_leaves((model, x)))

    def test_module_broadcast_over_a_batch_when_in_axes_is_none(self):
        model = mlp()
        step = batched_jit(forward, in_axes=(None, 0), max_traces=1, static_nonarrays=True)
        x = jax.random.normal(jax.random.key(2), (5, 16))
        np.testing.assert_allclose(step(model, x), jax.vmap(model)(x), rtol=1e-5, atol=1e-6)
        step(model, x + 1)
        assert step.traces_used == 1 and isinstance(step, BatchedJit)

    def test_static_leaves_are_not_batched_and_come_back_in_the_output(self):
        def per_example(model: Scaled, x: jax.Array) -> Any:
            return model(x), model.power, "tag"

        step = batched_jit(per_example, in_axes=(None, 0), max_traces=2, static_nonarrays=True)
        y, power, tag = step(scaled(2), jnp.ones((4, 3)))
        assert y.shape == (4, 2) and power == 2 and tag == "tag"
        with pytest.raises(TraceBudgetError):
            step(scaled(3), jnp.ones((4, 3)))
            step(scaled(4), jnp.ones((4, 3)))
        assert step.traces_used == 2


# --- validation -----------------------------------------------------------------------------


class TestValidation:
    @pytest.mark.parametrize("factory", [bounded_jit, batched_jit, BoundedJit, BatchedJit])
    @pytest.mark.parametrize("value", [1, 0, "yes", None, jnp.bool_(True)])
    def test_raises_type_error_naming_the_value_when_not_a_bool(self, factory, value):
        with pytest.raises(TypeError, match=r": static_nonarrays must be a bool; got "):
            factory(forward, max_traces=1, static_nonarrays=value)

    @pytest.mark.parametrize("factory", [bounded_jit, batched_jit])
    @pytest.mark.parametrize(
        "option, value",
        [
            ("static_argnums", 1),
            ("static_argnames", "x"),
            ("in_shardings", None),
        ],
    )
    def test_raises_value_error_when_an_argument_option_is_given(self, factory, option, value):
        with pytest.raises(ValueError, match=f"{option} must be left unset when static_nonarrays"):
            factory(forward, max_traces=1, static_nonarrays=True, **{option: value})

    def test_numpy_bool_is_a_plain_bool(self):
        step = bounded_jit(forward, max_traces=1, static_nonarrays=np.True_)
        assert step.static_nonarrays is True


# --- traces again exactly when eqx.filter_jit does ------------------------------------------


def _double(x: Any) -> Any:
    return x * 2


LEAVES = st.one_of(
    st.sampled_from([0, 1, 2, 0.5, 2.5, "a", "b", jnp.sin, jnp.cos, _double, None]),
    st.sampled_from([(2,), (3,)]).map(lambda shape: np.ones(shape, np.float32)),
    st.sampled_from([(2,), (3,)]).map(jnp.zeros),
)


class Holder(eqx.Module):
    weight: Any
    extra: Any


TREES = st.one_of(
    st.builds(lambda a, b, c: {"a": a, "b": (b, c)}, LEAVES, LEAVES, LEAVES),
    st.builds(lambda a, b: Holder(a, b), LEAVES, LEAVES),
    st.builds(lambda a, b: [Holder(a, None), b], LEAVES, LEAVES),
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(calls=st.lists(TREES, min_size=1, max_size=5))
def test_traces_again_exactly_when_filter_jit_does(calls: list[Any]) -> None:
    # eqx.filter_jit keys static leaves by == alone (1 == True == 1.0 share a trace
    # there; see test_same_value_of_another_type_traces_again_as_jax_keys_statics): the
    # drawn values have no bools and no integral floats, so the two rules agree.
    counts = {"eqx": 0, "tinax": 0}

    def make(name: str) -> Any:
        def function(tree: Any, x: jax.Array) -> jax.Array:
            counts[name] += 1
            arrays = [leaf for leaf in jax.tree.leaves(tree) if eqx.is_array(leaf)]
            return x + sum((jnp.sum(leaf) for leaf in arrays), jnp.zeros(()))

        return function

    filtered = eqx.filter_jit(make("eqx"))
    ours = bounded_jit(make("tinax"), max_traces=len(calls), static_nonarrays=True)
    for tree in calls:
        retraces = ours.explain(tree, jnp.ones(2)).retraces
        before = counts["eqx"]
        filtered(tree, jnp.ones(2))
        ours(tree, jnp.ones(2))
        assert retraces == (counts["eqx"] > before)
        assert counts["tinax"] == counts["eqx"] == ours.traces_used


# --- the guide ------------------------------------------------------------------------------


def test_models_page_equinox_section_shows_the_real_output():
    """Each printed section of examples/models_equinox.py is the next ``text`` block of
    the page's ``## equinox`` section (``TINAX_REGENERATE_DOCS=1`` writes them in)."""
    from helpers.pages import text_blocks, untimed
    from helpers.processes import ROOT, run_example

    out = run_example("models_equinox.py")
    path = ROOT / "docs" / "models.md"
    page = path.read_text()
    begin = page.index("\n## equinox\n")
    end = page.find("\n## ", begin + 1)
    end = len(page) if end == -1 else end
    part = page[begin:end]
    sections = [section.partition("\n") for section in out.split("\n=== ")[1:]]
    blocks = text_blocks(part)
    assert len(sections) == len(blocks) == 4
    if os.environ.get("TINAX_REGENERATE_DOCS") == "1":
        for (start, stop), (_, _, body) in reversed(list(zip(blocks, sections, strict=True))):
            part = part[:start] + body.rstrip() + part[stop:]
        path.write_text(page[:begin] + part + page[end:])
        blocks = text_blocks(part)
    for (start, stop), (title, _, body) in zip(blocks, sections, strict=True):
        assert untimed(part[start:stop]) == untimed(body.rstrip()), f"{title!r} is out of date"
    assert "same numbers: True" in out
    assert "  model.activation: <function relu> -> <function gelu> (static leaf)" in out
