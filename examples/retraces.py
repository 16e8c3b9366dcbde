"""The retrace diagnostics of tinax.jit, on the usual causes of retracing.

Run with:  python examples/retraces.py
Its output is pasted into docs/debugging-retraces.md (a test keeps the two equal).
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp

from tinax.jit import TraceBudgetError, bounded_jit


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

section("a Python float became an array")
step = bounded_jit(update, max_traces=1, static_argnames="mode")
params = step(params, make_batch(32), 0.1)
refused(lambda: step(params, make_batch(32), jnp.float32(0.1)))

section("several changes at once, against the closest of several traces")
step = bounded_jit(update, max_traces=2, static_argnames="mode")
params = step(params, make_batch(32), 0.1)
step(params, make_batch(32), 0.1, mode="eval")
refused(lambda: step({**params, "extra": jnp.zeros(2)}, make_batch(32), 0.1, mode="debug"))

section("explain: will this call trace, and why?")
step = bounded_jit(update, max_traces=4, static_argnames="mode")
params = step(params, make_batch(32), 0.1)
print(step.explain(params, make_batch(32), 0.2))
print(step.explain(params, make_batch(32), lr=0.1))

section("the history, as a debugger shows step.traced_signatures")
step(params, make_batch(32), 0.1, mode="eval")
step(params, make_batch(16), 0.1, mode="eval")
print(step.traced_signatures)
