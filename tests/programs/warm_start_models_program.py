"""Models that start warm: run twice by `tests/test_warm_start.py` in fresh processes.

    python warm_start_models_program.py MANIFEST

Builds one object per model (equinox under ``static_nonarrays=True``, flax.nnx under
``propagate_updates=True``), waits for the compiles ahead, calls each once and prints
one JSON line: per object, the traces, compiles and cache loads its call made, and its
results' bytes (outputs, and for nnx the objects' state after the update) as a digest.
Log records of the ``tinax`` logger go to stderr.
"""

import enum
import hashlib
import json
import logging
import sys
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import tinax
from programs.warm_start_program import await_compiles_ahead
from tinax.jit import bounded_jit

SOFT = lambda x: x / (1 + jnp.abs(x))  # noqa: E731  (a lambda bound to a module-level name)
TX = optax.adamw(1e-2)  # closures inside: recorded by its module-level name


class Mode(enum.Enum):
    TRAIN = 1
    EVAL = 2


class Named(eqx.Module):
    """An equinox module with a str field (equinox's MISSING rides in its aux data)."""

    w: jax.Array
    name: str = "named"


class Net(nnx.Module):
    def __init__(self, rngs):
        self.linear = nnx.Linear(3, 4, rngs=rngs)
        self.norm = nnx.BatchNorm(4, rngs=rngs)

    def __call__(self, x):
        return self.norm(self.linear(x))


def mlp_step(model, x):
    return model(x)


def conv_step(conv, norm, state, x):
    y = jax.vmap(conv)(x)
    return jax.vmap(norm, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(y, state)


def named_step(module, x, mode):
    return module.w * x if mode is Mode.TRAIN else module.w - x


def nnx_step(model, optimizer, metrics, rngs, x):
    noise = jax.random.normal(rngs(), x.shape)

    def loss_of(model):
        return ((model(x + noise)) ** 2).mean()

    loss, grads = nnx.value_and_grad(loss_of)(model)
    optimizer.update(model, grads)
    metrics.update(loss=loss)
    return loss


def closure_step(model, x):
    return model(x)


def scaled(factor):
    return lambda x: x * factor  # a closure's lambda: cannot be recorded


def digest(tree):
    """The bytes of every leaf, as one hex digest: equal iff bit-identical."""
    found = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(tree):
        if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        found.update(np.asarray(leaf).tobytes())
    return found.hexdigest()


def main():
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
    logging.getLogger("jax").setLevel(logging.WARNING)
    warnings.simplefilter("ignore")  # equinox's BatchNorm mode default
    tinax.warm_start(sys.argv[1])
    key = jax.random.PRNGKey(0)

    mlp = eqx.nn.MLP(3, 2, 8, 2, activation=jax.nn.relu, final_activation=SOFT, key=key)
    conv = eqx.nn.Conv2d(1, 2, 3, key=key)
    norm, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(2, "batch")
    named = Named(jnp.arange(3.0))
    net = Net(nnx.Rngs(0))
    optimizer = nnx.Optimizer(net, TX, wrt=nnx.Param)
    metrics = nnx.MultiMetric(loss=nnx.metrics.Average("loss"))
    rngs = nnx.Rngs(1)
    closure = eqx.nn.MLP(3, 2, 4, 1, activation=scaled(2.0), key=key)

    objects = {
        "mlp": bounded_jit(mlp_step, max_traces=1, static_nonarrays=True),
        "conv": bounded_jit(conv_step, max_traces=1, static_nonarrays=True),
        "named": bounded_jit(named_step, max_traces=1, static_nonarrays=True),
        "nnx": bounded_jit(nnx_step, max_traces=1, propagate_updates=True),
        "closure": bounded_jit(closure_step, max_traces=1, static_nonarrays=True),
    }
    calls = {
        "mlp": lambda f: f(mlp, jnp.ones(3)),
        "conv": lambda f: f(conv, norm, state, jnp.ones((4, 1, 5, 5))),
        "named": lambda f: f(named, jnp.ones(3), Mode.TRAIN),
        "nnx": lambda f: (f(net, optimizer, metrics, rngs, jnp.ones((2, 3))), nnx.state(optimizer)),
        "closure": lambda f: f(closure, jnp.ones(3)),
    }
    await_compiles_ahead()
    out = {}
    for name, obj in objects.items():
        result = calls[name](obj)
        out[name] = {
            "call": [obj.traces_used, obj.compiles_used, obj.cache_loads],
            "result": digest(result),
        }
    out["nnx"]["metrics"] = digest(nnx.state(metrics))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
