"""A training script's view of tinax: logging, a warn mode, per-trace facts, the registry.

Run with:  python examples/long_runs.py
Its output is pasted into docs/long-runs.md (a test keeps the two equal, timings aside).
"""

import logging
import os
import sys
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp

from tinax.jit import bounded_jit, budgets, exceed_policy


def section(title):
    print(f"\n=== {title}")


def loss(params, batch):
    prediction = batch["x"] @ params["w"] + params["b"]
    return jnp.mean((prediction - batch["y"]) ** 2)


def update(params, batch, lr):
    grads = jax.grad(loss)(params, batch)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def make_batch(size):
    return {"x": jnp.ones((size, 3)), "y": jnp.zeros(size)}


params = {"w": jnp.zeros(3), "b": jnp.zeros(())}

section("logging: one record per trace")
# Off by default, like any library's logger. DEBUG shows first traces too; INFO,
# retraces with their cause; WARNING, traces over budget.
logging.basicConfig(stream=sys.stdout, format="%(levelname)s %(name)s: %(message)s")
logging.getLogger("tinax").setLevel(logging.DEBUG)

evaluate = bounded_jit(loss, max_traces=2)
evaluate(params, make_batch(32))
evaluate(params, make_batch(20))

section("warn mode: an overrun is reported, and the run goes on")
train_step = bounded_jit(update, max_traces=1)
with warnings.catch_warnings(record=True) as caught, exceed_policy("warn"):
    warnings.simplefilter("always")
    for size in (32, 32, 32, 20):  # the last batch is partial
        params = train_step(params, make_batch(size), 0.1)
for warning in caught:
    print(f"{warning.category.__name__}: {warning.message}")
print(f"traces_used={train_step.traces_used}, max_traces={train_step.max_traces}")

section("per-trace facts: where each trace was called from, what it cost")
print(train_step.traced_signatures)
last = train_step.traced_signatures[-1]
print(f"{last.call_site}: {last.trace_seconds * 1e3:.1f} ms, {last.compile_seconds * 1e3:.1f} ms")

section("a wrapper rebuilt in a loop")
logging.getLogger("tinax").setLevel(logging.WARNING)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(5):
        step = bounded_jit(update, max_traces=1)  # a new object, a new trace, each time
        params = step(params, make_batch(32), 0.1)
for warning in caught:
    print(f"{warning.category.__name__}: {warning.message}")

section("the registry, at the end of the run")
print(budgets())
