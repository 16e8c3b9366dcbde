"""The diagnosis on real model code: equinox, flax.nnx and optax pytrees."""

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
import pytest
from flax import nnx

from tinax.jit import TraceBudgetError, bounded_jit


def differences(error_or_explanation):
    return [str(line).strip() for line in str(error_or_explanation).splitlines()]


class TestEquinox:
    def step(self):
        def forward(params, static, x):
            return eqx.combine(params, static)(x)

        return bounded_jit(forward, max_traces=1, static_argnames="static")

    def test_static_part_activation_change_is_named_by_field(self):
        step = self.step()
        relu = eqx.nn.MLP(2, 2, 4, 2, key=jax.random.key(0))
        gelu = eqx.nn.MLP(2, 2, 4, 2, activation=jax.nn.gelu, key=jax.random.key(0))
        params, static = eqx.partition(relu, eqx.is_array)
        step(params, static, jnp.ones(2))
        new_params, new_static = eqx.partition(gelu, eqx.is_array)
        with pytest.raises(TraceBudgetError) as info:
            step(new_params, new_static, jnp.ones(2))
        lines = differences(info.value)
        assert lines[2:4] == [
            "Closest earlier trace: #1 (1 difference):",
            "static.activation: <function relu> -> <function gelu> (static argument value)",
        ]

    def test_same_static_part_rebuilt_reuses_the_trace(self):
        step = self.step()
        params, static = eqx.partition(eqx.nn.MLP(2, 2, 4, 2, key=jax.random.key(0)), eqx.is_array)
        step(params, static, jnp.ones(2))
        _, rebuilt = eqx.partition(eqx.nn.MLP(2, 2, 4, 2, key=jax.random.key(1)), eqx.is_array)
        assert not step.explain(params, rebuilt, jnp.ones(2)).retraces
        step(params, rebuilt, jnp.ones(2))
        assert step.traces_used == 1

    def test_wider_model_names_static_field_and_shapes(self):
        step = self.step()
        params, static = eqx.partition(eqx.nn.MLP(2, 2, 4, 1, key=jax.random.key(0)), eqx.is_array)
        step(params, static, jnp.ones(2))
        wide, wide_static = eqx.partition(
            eqx.nn.MLP(2, 2, 8, 1, key=jax.random.key(0)), eqx.is_array
        )
        explanation = step.explain(wide, wide_static, jnp.ones(2))
        assert explanation.retraces
        lines = differences(explanation)
        assert "static.width_size: 4 -> 8 (static argument value)" in lines
        assert "params.layers[0].weight: f32[4,2] -> f32[8,2] (shape)" in lines


class Model(nnx.Module):
    def __init__(self, width, *, rngs):
        self.linear = nnx.Linear(2, width, rngs=rngs)
        self.temperature = 1.0

    def __call__(self, x):
        return self.linear(x) / self.temperature


class TestFlaxNnx:
    def test_module_passed_directly_reuses_its_trace(self):
        step = bounded_jit(lambda model, x: model(x), max_traces=1)
        model = Model(3, rngs=nnx.Rngs(0))
        step(model, jnp.ones(2))
        step(model, jnp.ones(2))
        assert step.traces_used == 1 and not step.explain(model, jnp.ones(2)).retraces

    def test_attribute_change_is_one_short_line(self):
        step = bounded_jit(lambda model, x: model(x), max_traces=1)
        model = Model(3, rngs=nnx.Rngs(0))
        step(model, jnp.ones(2))
        model.temperature = 2.0
        with pytest.raises(TraceBudgetError) as info:
            step(model, jnp.ones(2))
        lines = differences(info.value)
        assert lines[2:4] == [
            "Closest earlier trace: #1 (1 difference):",
            "model.temperature: 1.0 -> 2.0 (static field of Model)",
        ]
        assert max(map(len, str(info.value).splitlines())) <= 200

    def test_wider_layer_names_the_field_and_the_shapes(self):
        step = bounded_jit(lambda model, x: model(x), max_traces=1)
        step(Model(3, rngs=nnx.Rngs(0)), jnp.ones(2))
        explanation = step.explain(Model(4, rngs=nnx.Rngs(0)), jnp.ones(2))
        assert explanation.retraces
        assert differences(explanation)[2:5] == [
            "model.linear.out_features: 3 -> 4 (static field of Linear)",
            "model.linear.bias.value: f32[3] -> f32[4] (shape)",
            "model.linear.kernel.value: f32[2,3] -> f32[2,4] (shape)",
        ]


class TestOptax:
    def test_optimizer_state_in_the_arguments(self):
        optimizer = optax.adam(1e-3)

        def update(params, state, grads):
            updates, state = optimizer.update(grads, state, params)
            return optax.apply_updates(params, updates), state

        step = bounded_jit(update, max_traces=1)
        params = {"w": jnp.ones(3), "b": jnp.zeros(())}
        state = optimizer.init(params)
        params, state = step(params, state, params)
        params, state = step(params, state, params)  # the state round-trips: no retrace
        assert step.traces_used == 1
        wider = {"w": jnp.ones(4), "b": jnp.zeros(())}
        explanation = step.explain(wider, optimizer.init(wider), wider)
        lines = differences(explanation)
        assert "params['w']: f32[3] -> f32[4] (shape)" in lines
        assert "state[0].mu['w']: f32[3] -> f32[4] (shape)" in lines
        assert "state[0].nu['w']: f32[3] -> f32[4] (shape)" in lines

    def test_one_cast_of_params_and_state_is_one_line(self):
        optimizer = optax.sgd(0.1, momentum=0.9)
        step = bounded_jit(lambda params, state: params, max_traces=1)
        params = {f"w{i}": jnp.ones(2) for i in range(4)}
        step(params, optimizer.init(params))
        half = jax.tree.map(lambda leaf: leaf.astype(jnp.float16), params)
        lines = differences(step.explain(half, optimizer.init(half)))
        assert lines[1:3] == [
            "Closest earlier trace: #1 (8 differences):",
            "params, state (8 leaves): f32 -> f16 (dtype)",
        ]
