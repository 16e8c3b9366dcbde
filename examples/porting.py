"""Porting a jax.jit call: a sharded, donated training step and its bounded_jit twin.

Run with:  python examples/porting.py
Its output is pasted into docs/porting.md (a test keeps the two equal, timings aside).
"""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tinax.jit import TraceBudgetError, bounded_jit


def section(title):
    print(f"\n=== {title}")


mesh = jax.make_mesh((8,), ("data",))
p_sharding = NamedSharding(mesh, P())  # parameters: replicated
batch_sharding = NamedSharding(mesh, P("data"))  # the batch: split over the devices


def loss(params, batch):
    prediction = batch["x"] @ params["w"] + params["b"]
    return jnp.mean((prediction - batch["y"]) ** 2)


def train_step(params, batch):
    value, grads = jax.value_and_grad(loss)(params, batch)
    new_params = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    return new_params, value


def fresh_params():
    return jax.device_put({"w": jnp.zeros(16), "b": jnp.zeros(())}, p_sharding)


def make_batch(size, seed):
    x = jax.random.normal(jax.random.key(seed), (size, 16))
    return jax.device_put({"x": x, "y": x.sum(axis=1)}, batch_sharding)


OPTIONS = {
    "in_shardings": (p_sharding, batch_sharding),
    "out_shardings": (p_sharding, p_sharding),
    "donate_argnums": (0,),
}
batches = [make_batch(64, seed) for seed in range(3)]


def train(step):
    params, losses = fresh_params(), []
    for batch in batches:
        params, value = step(params, batch)  # the old params are donated: never reused
        losses.append(float(value))
    return params, losses


section("jax.jit")
# The step as production code writes it.
jitted = jax.jit(train_step, **OPTIONS)
theirs, their_losses = train(jitted)
print("losses:", [round(value, 4) for value in their_losses])
print("params['w'] sharding:", theirs["w"].sharding.spec)

section("bounded_jit: the same call, plus max_traces")
step = bounded_jit(train_step, max_traces=1, **OPTIONS)
ours, our_losses = train(step)
print("losses:", [round(value, 4) for value in our_losses])
print("params['w'] sharding:", ours["w"].sharding.spec)
print("same numbers as jax.jit:", all(np.array_equal(ours[k], theirs[k]) for k in ours))
first = fresh_params()
step(first, batches[0])
print("donated input deleted:", first["w"].is_deleted())
print(step)

section("a short last batch: refused, with the cause")
try:
    step(ours, make_batch(40, seed=9))
except TraceBudgetError as error:
    print(error)

section("the decorator form, with a static argument given by number")


@bounded_jit(max_traces=1, static_argnums=(1,))
def power(x, n):
    return x**n


print(power(jnp.full(2, 3.0), 2))
try:
    power(jnp.full(2, 3.0), 3)
except TraceBudgetError as error:
    print(error)
