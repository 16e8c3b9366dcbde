"""An equinox model trained whole under bounded_jit(static_nonarrays=True).

Run with:  python examples/models_equinox.py
Its output is pasted into docs/models.md, section "equinox" (a test keeps the two
equal, timings aside).
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from tinax.jit import TraceBudgetError, batched_jit, bounded_jit


def section(title):
    print(f"\n=== {title}")


optimizer = optax.adam(1e-2)  # built once: a transformation rebuilt per step would retrace


def loss_fn(model, x, y):
    return jnp.mean((jax.vmap(model)(x) - y) ** 2)


def train_step(model, opt_state, x, y):
    loss, grads = eqx.filter_value_and_grad(loss_fn)(model, x, y)
    updates, opt_state = optimizer.update(grads, opt_state, model)
    return eqx.apply_updates(model, updates), opt_state, loss


x = jax.random.normal(jax.random.key(1), (64, 2))
y = jnp.sin(x[:, :1]) + 0.5 * x[:, 1:]


def train(step):
    model = eqx.nn.MLP(2, 1, 32, 2, activation=jax.nn.relu, key=jax.random.key(0))
    opt_state = optimizer.init(eqx.filter(model, eqx.is_array))
    losses = []
    for _ in range(6):
        model, opt_state, loss = step(model, opt_state, x, y)
        losses.append(float(loss))
    return model, losses


section("A training loop: the model passed whole, as under eqx.filter_jit")
step = bounded_jit(train_step, max_traces=1, static_nonarrays=True)
model, losses = train(step)
_, reference = train(eqx.filter_jit(train_step))
print("losses:            ", " ".join(f"{value:.5f}" for value in losses))
print("eqx.filter_jit:    ", " ".join(f"{value:.5f}" for value in reference))
print("same numbers:", losses == reference)
print("traces_used:", step.traces_used)
print("the model came back whole; its activation is jax.nn.relu:", model.activation is jax.nn.relu)

section("A model with another activation: the leaf is named")
gelu_model = eqx.nn.MLP(2, 1, 32, 2, activation=jax.nn.gelu, key=jax.random.key(0))
opt_state = optimizer.init(eqx.filter(gelu_model, eqx.is_array))
try:
    step(gelu_model, opt_state, x, y)
except TraceBudgetError as error:
    print(f"TraceBudgetError: {error}")

section("The same model without static_nonarrays: tinax says what to do")
plain = bounded_jit(train_step, max_traces=1)
print(plain.explain(model, opt_state, x, y))

section("Predictions over a batch: the model broadcast, its functions not batched")
predict = batched_jit(
    lambda model, x: model(x), in_axes=(None, 0), max_traces=1, static_nonarrays=True
)
print("predictions:", predict(model, x[:4]).shape, "traces_used:", predict.traces_used)
