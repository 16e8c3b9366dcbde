"""An equinox training program that starts warm: `examples/warm_start_models.py` and
`examples/warm_start_preempted.py` run it.

    python examples/warm_start_equinox.py SIGNATURES CACHE_DIR [--until-stopped]
        [--results FILE]

One training step of an `eqx.nn.MLP` with `optax.adamw`, under
``bounded_jit(..., static_nonarrays=True)``. It says which thread traced the step (the
first call, warm or cold: warm start runs nothing of the program ahead) and what the
step's first call compiled (``compiles_used``, ``cache_loads``: both 0 where its
compile ran the executable warm start compiled ahead). With ``--results`` it saves the
model, the optimizer state and the loss after the first step (``np.savez``), so that
runs can be compared bit for bit. With ``--until-stopped`` it goes on training until
it is stopped.
"""

import argparse
import logging
import sys
import threading
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import tinax
from tinax.jit import bounded_jit

parser = argparse.ArgumentParser()
parser.add_argument("signatures")
parser.add_argument("cache_dir")
parser.add_argument("--until-stopped", action="store_true")
parser.add_argument("--results")
args = parser.parse_args()

logging.basicConfig(stream=sys.stdout, format="%(levelname)s %(name)s: %(message)s")
logging.getLogger("tinax").setLevel(logging.INFO)
jax.config.update("jax_compilation_cache_dir", args.cache_dir)  # JAX's persistent cache
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
tinax.warm_start(args.signatures)

OPTIMIZER = optax.adamw(1e-2)
traced_by = []  # which thread traced the step (appended at trace time only)


def train_step(model, opt_state, x, y):
    traced_by.append(
        "the first call"
        if threading.current_thread() is threading.main_thread()
        else "another thread"
    )

    def loss_of(model):
        return jnp.mean((jax.vmap(model)(x) - y) ** 2)

    loss, grads = eqx.filter_value_and_grad(loss_of)(model)
    updates, opt_state = OPTIMIZER.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss


step = bounded_jit(train_step, max_traces=1, static_nonarrays=True)

# loading: the model (its activation, jax.nn.relu, is recorded by its name), the data;
# building the model starts JAX's backend, and warm start compiles meanwhile
model = eqx.nn.MLP(4, 1, 32, 2, activation=jax.nn.relu, key=jax.random.key(0))
opt_state = OPTIMIZER.init(eqx.filter(model, eqx.is_array))
x = jax.random.normal(jax.random.key(1), (64, 4))
y = x.sum(axis=1, keepdims=True)
time.sleep(0.5)  # reading the data

model, opt_state, loss = step(model, opt_state, x, y)
if args.results:  # saved before the lines below: a reader of them finds the file whole
    leaves = jax.tree.leaves(eqx.filter((model, opt_state, loss), eqx.is_array))
    np.savez(args.results, *map(np.asarray, leaves))
print(f"step 1: loss {float(loss):.4f}; traced by {traced_by[0]}")
print(
    f"traces_used={step.traces_used}, compiles_used={step.compiles_used}, "
    f"cache_loads={step.cache_loads}",
    flush=True,
)
while args.until_stopped:
    model, opt_state, loss = step(model, opt_state, x, y)
    time.sleep(0.01)
