"""The retrace diagnostics of tinax.jit, on the usual causes of retracing.

Run with:  python examples/retraces.py
Its output is pasted into docs/debugging-retraces.md (a test keeps the two equal).
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
from flax import nnx

from tinax.jit import TraceBudgetError, bounded_jit, pad_to_bucket


def section(title):
    print(f"\n=== {title}")


def refused(call):
    try:
        call()
    except TraceBudgetError as error:
        print(f"TraceBudgetError: {error}")
    else:
        raise SystemExit("expected a TraceBudgetError")


def update(params, batch, lr, mode="train"):
    grads = jax.grad(lambda p: jnp.mean((batch["x"] @ p["w"] + p["b"] - batch["y"]) ** 2))(params)
    scale = lr if mode == "train" else 0.0
    return jax.tree.map(lambda p, g: p - scale * g, params, grads)


def make_batch(size):
    return {"x": jnp.ones((size, 3)), "y": jnp.zeros(size)}


params = {"w": jnp.zeros(3), "b": jnp.zeros(())}

section("a new shape: the last batch is partial")
step = bounded_jit(update, max_traces=1, static_argnames="mode")
params = step(params, make_batch(32), 0.1)
refused(lambda: step(params, make_batch(20), 0.1))

section("the fix: the batch axis declared as a bucket, the last batch padded, its loss masked")


def masked_update(params, batch, lr):
    def loss(p):
        errors = (batch["x"] @ p["w"] + p["b"] - batch["y"]) ** 2
        return jnp.where(batch["mask"], errors, 0.0).sum() / batch["mask"].sum()

    grads = jax.grad(loss)(params)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def padded(batch):
    x, size = pad_to_bucket(batch["x"], (32,))
    y, _ = pad_to_bucket(batch["y"], (32,))
    return {"x": x, "y": y, "mask": jnp.arange(32) < size}  # True on the real rows


start = {"w": jnp.array([0.5, -1.0, 2.0]), "b": jnp.ones(())}
step = bounded_jit(masked_update, max_traces=1, buckets={"batch": {0: (32,)}})
step(start, padded(make_batch(32)), 0.1)
last = step(start, padded(make_batch(20)), 0.1)  # the same trace
print(f"traces_used={step.traces_used}, compiles_used={step.compiles_used}")
same = jax.tree.map(jnp.allclose, last, update(start, make_batch(20), 0.1))
print(f"the same update as the unpadded batch of 20: {all(jax.tree.leaves(same))}")

section("a Python float became an array")
step = bounded_jit(update, max_traces=1, static_argnames="mode")
params = step(params, make_batch(32), 0.1)
refused(lambda: step(params, make_batch(32), jnp.float32(0.1)))

section("several changes at once, against the closest of several traces")
step = bounded_jit(update, max_traces=2, static_argnames="mode")
params = step(params, make_batch(32), 0.1)
step(params, make_batch(32), 0.1, mode="eval")
refused(lambda: step({**params, "extra": jnp.zeros(2)}, make_batch(32), 0.1, mode="debug"))

section("equinox: the static part of a model changed")


def forward(params, static, x):
    return eqx.combine(params, static)(x)


step = bounded_jit(forward, max_traces=1, static_argnames="static")
weights, static = eqx.partition(eqx.nn.MLP(2, 2, 8, 2, key=jax.random.key(0)), eqx.is_array)
step(weights, static, jnp.ones(2))
model = eqx.nn.MLP(2, 2, 8, 2, activation=jax.nn.gelu, key=jax.random.key(0))
weights, static = eqx.partition(model, eqx.is_array)
refused(lambda: step(weights, static, jnp.ones(2)))

section("flax.nnx: a module attribute changed, and a config dataclass")


class Classifier(nnx.Module):
    def __init__(self, width, *, rngs):
        self.hidden = nnx.Linear(4, width, rngs=rngs)
        self.temperature = 1.0

    def __call__(self, x):
        return self.hidden(x) / self.temperature


@dataclasses.dataclass(frozen=True)
class Config:
    name: str = "digits-mlp-baseline-experiment-2024"
    activation: str = "relu"


def predict(model, x, config):
    return model(x)


step = bounded_jit(predict, max_traces=1, static_argnames="config")
classifier = Classifier(8, rngs=nnx.Rngs(0))
step(classifier, jnp.ones(4), config=Config())
classifier.temperature = 2.0
refused(lambda: step(classifier, jnp.ones(4), config=Config(activation="gelu")))

section("a static value equal only to itself")


class Settings:  # no __eq__ or __hash__: compared by identity
    def __init__(self, depth):
        self.depth = depth

    def __repr__(self):
        return f"Settings(depth={self.depth})"


step = bounded_jit(lambda x, settings: x * settings.depth, max_traces=1, static_argnames="settings")
step(jnp.ones(2), settings=Settings(2))
refused(lambda: step(jnp.ones(2), settings=Settings(2)))

section("explain: will this call trace, and why?")
step = bounded_jit(update, max_traces=4, static_argnames="mode")
params = step(params, make_batch(32), 0.1)
print(step.explain(params, make_batch(32), 0.2))
print(step.explain(params, make_batch(32), lr=0.1))

section("the history, as a debugger shows step.traced_signatures")
step(params, make_batch(32), 0.1, mode="eval")
step(params, make_batch(16), 0.1, mode="eval")
print(step.traced_signatures)
