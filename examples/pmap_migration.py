"""One pmap program, rewritten twice: auto-parallel with batched_jit, manual SPMD with
shard_mapped + batched_jit. All three give the same numbers on 8 CPU devices.

Run with:  python examples/pmap_migration.py
docs/migrating-from-pmap.md quotes this file (a test keeps the two equal).
"""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from tinax.jit import batched_jit, bounded_jit
from tinax.parallel import shard_mapped

DEVICES = 8
LEARNING_RATE = 0.1


def example_loss(params, x, y):
    """The loss of one example."""
    return (jnp.tanh(x @ params["w"]) @ params["v"] + params["b"] - y) ** 2


# --- (0) the pmap program --------------------------------------------------------------------
@functools.partial(jax.pmap, axis_name="devices")
def pmap_step(params, x, y):
    """One data-parallel SGD step; params: this device's replica; x, y: its examples."""

    def loss(p):
        return jnp.mean(jax.vmap(example_loss, in_axes=(None, 0, 0))(p, x, y))

    grads = jax.lax.pmean(jax.grad(loss)(params), "devices")
    return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)


# --- (a) auto-parallel: batched_jit on a mesh ------------------------------------------------
mesh = jax.make_mesh((DEVICES,), ("batch",), axis_types=(AxisType.Auto,))

example_losses = batched_jit(example_loss, in_axes=(None, 0, 0), max_traces=1, mesh=mesh)


def auto_step(params, x, y):
    """x, y: the whole batch, sharded over the mesh; XLA inserts the all-reduce."""
    grads = jax.grad(lambda p: example_losses(p, x, y).mean())(params)
    return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)


auto_train_step = bounded_jit(auto_step, max_traces=1, mesh=mesh)


# --- (b) manual SPMD: shard_mapped + batched_jit ---------------------------------------------
local_losses = batched_jit(example_loss, in_axes=(None, 0, 0), max_traces=1)


def device_step(params, x, y):
    """Runs once per device on its shard of x, y, as a pmap body does."""

    def mean_loss(p):
        return jax.lax.pmean(local_losses(p, x, y).mean(), "batch")

    grads = jax.grad(mean_loss)(params)  # the gradient of the global mean: no pmean after
    return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)


spmd_train_step = bounded_jit(
    shard_mapped(device_step, mesh=mesh, in_specs=(P(), P("batch"), P("batch")), out_specs=P()),
    max_traces=1,
)


# --- where batched_jit is not a drop-in: a data-dependent while_loop -------------------------
def newton_sqrt(a):
    """sqrt(a) by Newton's method: the number of iterations depends on a."""

    def not_converged(state):
        x, _ = state
        return jnp.abs(x * x - a) > 1e-4 * a

    def improve(state):
        x, steps = state
        return (x + a / x) / 2, steps + 1

    return jax.lax.while_loop(not_converged, improve, (a, 0))


pmap_sqrt = jax.pmap(jax.vmap(newton_sqrt))

# Under vmap the loop runs until every example of the batch has converged; with the
# batch sharded over the mesh, deciding that takes a cross-device reduction per iteration.
lockstep_sqrt = batched_jit(newton_sqrt, max_traces=1, mesh=mesh)

# Per device, as pmap does: each device loops until its own examples have converged.
local_sqrt = shard_mapped(
    batched_jit(newton_sqrt, max_traces=1), mesh=mesh, in_specs=P("batch"), out_specs=P("batch")
)
per_device_sqrt = bounded_jit(local_sqrt, max_traces=1)


def make_data(examples=64, features=3, hidden=4):
    keys = jax.random.split(jax.random.key(0), 5)
    params = {
        "w": jax.random.normal(keys[0], (features, hidden)),
        "v": jax.random.normal(keys[1], (hidden,)),
        "b": jnp.zeros(()),
    }
    x = jax.random.normal(keys[2], (examples, features))
    y = jax.random.normal(keys[3], (examples,))
    a = jax.random.uniform(keys[4], (examples,), minval=0.5, maxval=1e4)
    return params, x, y, a


def train(step, params, x, y, steps=3):
    for _ in range(steps):
        params = step(params, x, y)
    return params


def main():
    params, x, y, a = make_data()

    def on_devices(v):  # pmap's layout: a leading axis of one entry per device
        return v.reshape(DEVICES, -1, *v.shape[1:])

    def sharded(v):  # the mesh's layout: one array, split along its first axis
        return jax.device_put(v, NamedSharding(mesh, P("batch")))

    # Steps return parameters placed on the mesh; start there too, or step 2 retraces.
    on_mesh = jax.device_put(params, NamedSharding(mesh, P()))

    replicas = jax.tree.map(lambda p: jnp.broadcast_to(p, (DEVICES, *p.shape)), params)
    reference = train(pmap_step, replicas, on_devices(x), on_devices(y))
    reference = jax.tree.map(lambda leaf: leaf[0], reference)  # every replica is the same
    auto = train(auto_train_step, on_mesh, sharded(x), sharded(y))
    spmd = train(spmd_train_step, on_mesh, sharded(x), sharded(y))
    for name, result in (("batched_jit on a mesh", auto), ("shard_mapped + batched_jit", spmd)):
        for key in reference:
            np.testing.assert_allclose(result[key], reference[key], rtol=1e-5, atol=1e-6)
        print(f"{name}: same parameters as pmap after 3 steps (rtol=1e-5)")

    roots, steps = (np.asarray(out).reshape(-1) for out in pmap_sqrt(on_devices(a)))
    for name, run in (("lockstep", lockstep_sqrt), ("per device", per_device_sqrt)):
        ours_roots, ours_steps = run(sharded(a))
        np.testing.assert_allclose(ours_roots, roots, rtol=1e-6)
        np.testing.assert_array_equal(ours_steps, steps)
        compiled = run.lower(sharded(a)).compile().as_text()
        print(
            f"while_loop, {name}: same roots and iteration counts as pmap; "
            f"all-reduces in the compiled program: {compiled.count('all-reduce(')}"
        )
    print(f"iterations per example: {steps.min()} to {steps.max()}")


if __name__ == "__main__":
    main()
