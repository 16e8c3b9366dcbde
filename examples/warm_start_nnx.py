"""A flax.nnx training program that starts warm: `examples/warm_start_models.py` runs it.

    python examples/warm_start_nnx.py SIGNATURES CACHE_DIR [--inline-optimizer]
        [--results FILE]

One in-place training step (``nnx.Optimizer`` with `optax.adamw`) under
``bounded_jit(..., propagate_updates=True)``. It says which thread traced the step (the
first call, warm or cold) and what the step's first call compiled (``compiles_used``,
``cache_loads``: both 0 where its compile ran the executable warm start compiled
ahead); with ``--results`` it saves the model's and optimizer's state and the loss
after the step (``np.savez``). Its optax transformation is bound to a
module-level name, ``TX``, so that the step is recorded: optax transformations are
closures, and JAX keys a trace on the optimizer's transformation itself, so only a
module-level one can be found again next run. ``--inline-optimizer`` builds it in
place instead (``optax.adamw(1e-2)`` in the call), to show the log line that says
the step is not recorded.
"""

import argparse
import logging
import sys
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import tinax
from tinax.jit import bounded_jit

parser = argparse.ArgumentParser()
parser.add_argument("signatures")
parser.add_argument("cache_dir")
parser.add_argument("--inline-optimizer", action="store_true")
parser.add_argument("--results")
args = parser.parse_args()

logging.basicConfig(stream=sys.stdout, format="%(levelname)s %(name)s: %(message)s")
logging.getLogger("tinax").setLevel(logging.INFO)
jax.config.update("jax_compilation_cache_dir", args.cache_dir)  # JAX's persistent cache
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
tinax.warm_start(args.signatures)

TX = optax.adamw(1e-2)  # module-level: recorded by its name, found again next run
traced_by = []  # which thread traced the step (appended at trace time only)


class Model(nnx.Module):
    def __init__(self, rngs):
        self.hidden = nnx.Linear(4, 32, rngs=rngs)
        self.out = nnx.Linear(32, 1, rngs=rngs)

    def __call__(self, x):
        return self.out(jax.nn.relu(self.hidden(x)))


def train_step(model, optimizer, x, y):
    traced_by.append(
        "the first call"
        if threading.current_thread() is threading.main_thread()
        else "another thread"
    )

    def loss_of(model):
        return jnp.mean((model(x) - y) ** 2)

    loss, grads = nnx.value_and_grad(loss_of)(model)
    optimizer.update(model, grads)  # in place
    return loss


step = bounded_jit(train_step, max_traces=1, propagate_updates=True)

model = Model(nnx.Rngs(0))  # loading: the model (starts JAX's backend), optimizer, data
optimizer = nnx.Optimizer(model, optax.adamw(1e-2) if args.inline_optimizer else TX, wrt=nnx.Param)
x = jax.random.normal(jax.random.key(1), (64, 4))
y = x.sum(axis=1, keepdims=True)
time.sleep(0.5)  # reading the data

loss = step(model, optimizer, x, y)
print(f"step {int(optimizer.step[...])}: loss {float(loss):.4f}; traced by {traced_by[0]}")
print(
    f"traces_used={step.traces_used}, compiles_used={step.compiles_used}, "
    f"cache_loads={step.cache_loads}"
)
if args.results:
    leaves = jax.tree.leaves((nnx.state(model), nnx.state(optimizer), loss))
    np.savez(args.results, *map(np.asarray, leaves))
