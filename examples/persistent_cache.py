"""JAX's persistent compilation cache under tinax: the second run loads what the first compiled.

Run with:  python examples/persistent_cache.py
It runs the same small training program twice, each time in a fresh process, with one
cache directory (a temporary one, removed at the end). docs/long-runs.md shows its output
(a test keeps the two equal, timings aside).
"""

import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp

from tinax.jit import bounded_jit, budgets


def loss(params, batch):
    prediction = batch["x"] @ params["w"] + params["b"]
    return jnp.mean((prediction - batch["y"]) ** 2)


def update(params, batch, lr):
    grads = jax.grad(loss)(params, batch)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def program(cache_dir):
    """One run of the training program, with JAX's persistent cache in ``cache_dir``."""
    started = time.perf_counter()
    # Before the first compile of the process:
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)  # default: 1 s
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)  # any size

    params = {"w": jnp.zeros(3), "b": jnp.zeros(())}
    batch = {"x": jnp.ones((32, 3)), "y": jnp.zeros(32)}
    train_step = bounded_jit(update, max_traces=1)
    evaluate = bounded_jit(loss, max_traces=1)
    params = jax.block_until_ready(train_step(params, batch, 0.1))
    print(f"first step done {time.perf_counter() - started:.2f} s after the start")
    for _ in range(3):
        params = train_step(params, batch, 0.1)
    evaluate(params, batch)

    for step in (train_step, evaluate):
        seconds = step.traced_signatures[-1].compile_seconds
        compiled = "-" if seconds is None else f"{seconds * 1e3:.1f} ms"
        print(
            f"{step.__name__}: traces_used={step.traces_used}, "
            f"compiles_used={step.compiles_used}, cache_loads={step.cache_loads}, "
            f"compile_seconds: {compiled}"
        )
    print(budgets())


def main():
    with tempfile.TemporaryDirectory() as cache_dir:
        for title in ("first run: nothing cached yet", "second run: a new process, same cache"):
            print(f"\n=== {title}", flush=True)
            subprocess.run([sys.executable, __file__, cache_dir], check=True)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        program(sys.argv[1])
    else:
        main()
