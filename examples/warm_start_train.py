"""A small training program that starts warm: `examples/warm_start.py` runs it.

    python examples/warm_start_train.py SIGNATURES CACHE_DIR [--batch N] [--results FILE]

Two budgeted steps, built at module level; the loading (the parameters on the device,
then one second standing for reading data) starts JAX's backend, and warm start
compiles meanwhile what the last run's calls ran. With ``--results`` it saves the
parameters after the first step and the eval loss (``np.savez``), so that runs can be
compared bit for bit.
"""

import argparse
import logging
import sys
import time

started = time.perf_counter()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import tinax  # noqa: E402
from tinax.jit import bounded_jit  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("signatures")
parser.add_argument("cache_dir")
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--results")
args = parser.parse_args()

logging.basicConfig(stream=sys.stdout, format="%(levelname)s %(name)s: %(message)s")
logging.getLogger("tinax").setLevel(logging.INFO)
jax.config.update("jax_compilation_cache_dir", args.cache_dir)  # JAX's persistent cache
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
tinax.warm_start(args.signatures)


def mlp(params, x):
    for w in params:
        x = jnp.tanh(x @ w)
    return x


def loss(params, batch):
    return jnp.mean((mlp(params, batch["x"]) - batch["y"]) ** 2)


def train_step(params, batch):
    grads = jax.grad(loss)(params, batch)
    return [w - 0.01 * g for w, g in zip(params, grads, strict=True)]


def eval_step(params, batch):
    return loss(params, batch)


train = bounded_jit(train_step, max_traces=1)
evaluate = bounded_jit(eval_step, max_traces=1)

key = jax.random.key(0)  # loading: the parameters on the device start JAX's backend
params = [jax.random.normal(key, (32, 32)) / 6 for _ in range(8)]
time.sleep(1.0)  # reading data: warm start compiles meanwhile
batch = {"x": jnp.ones((args.batch, 32)), "y": jnp.zeros((args.batch, 32))}
params = train(params, batch)
print(f"first step done {time.perf_counter() - started:.1f} s after start")
eval_loss = evaluate(params, batch)
print(f"eval loss {float(eval_loss):.4f}")
for name, step in (("train", train), ("eval", evaluate)):
    print(
        f"{name}: traces_used={step.traces_used}, compiles_used={step.compiles_used}, "
        f"cache_loads={step.cache_loads}"
    )
if args.results:
    np.savez(args.results, *map(np.asarray, params), np.asarray(eval_loss))
