"""tinax quickstart: a training step with a trace budget, and a batched loss on a mesh.

Run with:  python examples/quickstart.py
"""

import os
from textwrap import indent

# 8 CPU devices for the mesh in part (c); must be set before JAX is imported.
# Runs on CPU unless JAX_PLATFORMS is already set.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec

from tinax.jit import TraceBudgetError, batched_jit, bounded_jit


def loss(params, batch):
    predictions = batch["x"] @ params["w"] + params["b"]
    return jnp.mean((predictions - batch["y"]) ** 2)


def step(params, batch):
    grads = jax.grad(loss)(params, batch)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


def make_batch(key, size):
    x = jax.random.normal(key, (size, 3))
    return {"x": x, "y": x @ jnp.array([1.0, -2.0, 0.5]) + 3.0}


print("(a) A training step that may trace (and compile) exactly once")
train_step = bounded_jit(step, max_traces=1)
params = {"w": jnp.zeros(3), "b": jnp.zeros(())}
keys = jax.random.split(jax.random.key(0), 7)
held_out = make_batch(keys[6], 16)
print(f"  loss before: {loss(params, held_out):.3f}")
for key in keys[:5]:
    params = train_step(params, make_batch(key, 16))
print(f"  loss after 5 steps: {loss(params, held_out):.3f}")
print("  traces_used:", train_step.traces_used)
print("  repr:", repr(train_step))

print("\n(b) An accidental retrace: the last, partial batch has 10 examples, not 16")
partial = make_batch(keys[5], 10)
print("  Before calling, explain() says what the call would do, without tracing:")
print(indent(str(train_step.explain(params, partial)), "    "))
print("  Calling it anyway raises:")
try:
    train_step(params, partial)
except TraceBudgetError as error:
    print(indent(f"TraceBudgetError: {error}", "    "))
else:
    raise SystemExit("expected a TraceBudgetError for the partial batch")
print("  The history of traces, as a debugger shows train_step.traced_signatures:")
print(indent(str(train_step.traced_signatures), "    "))
params = train_step(params, make_batch(keys[4], 16))  # traced before: still runs, from cache
print("  another 16-example step ran; traces_used is still", train_step.traces_used)


print("\n(c) batched_jit: per-example losses on an 8-device CPU mesh")


def per_example_loss(params, x, y):
    return (x @ params["w"] + params["b"] - y) ** 2


mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
batch = make_batch(jax.random.key(1), 64)
on_mesh = NamedSharding(mesh, PartitionSpec("x"))
x, y = jax.device_put(batch["x"], on_mesh), jax.device_put(batch["y"], on_mesh)

losses_fn = batched_jit(per_example_loss, in_axes=(None, 0, 0), max_traces=1, mesh=mesh)
losses = losses_fn(params, x, y)
expected = jax.vmap(per_example_loss, in_axes=(None, 0, 0))(params, batch["x"], batch["y"])
np.testing.assert_allclose(losses, expected, rtol=1e-5, atol=1e-6)
print(f"  checked: {losses.shape[0]} per-example losses match plain jax.vmap (rtol=1e-5)")
print("  result sharding:", losses.sharding)
print("  repr:", repr(losses_fn))
