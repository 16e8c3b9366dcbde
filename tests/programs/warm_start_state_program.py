"""A program whose steps read state that ``main()`` sets after they are built: run by
`tests/test_warm_start.py` in fresh processes, with warm start on and off.

    python warm_start_state_program.py MANIFEST --value V

The steps are built at module level, while the module is imported, before ``main()``
sets what they read to ``V``; ``main()`` then waits for the compiles ahead and calls
every step once. What each
reads (its kind, `STEPS`): a module global, an attribute of a module-level object, a
class attribute, a closure cell, the content of a static argument, a global that is
``None`` until ``main()`` loads it, a NumPy array that ``main()`` fills in place, a
global read by a nested ``jax.jit``, a ``lax.scan`` body or a ``custom_vjp`` function, a
global given to a derivative rule as a ``nondiff_argnums`` argument (``jax.grad`` of the
step), an equinox step whose module-level optax ``OPTIMIZER`` ``main()`` rebuilds from
the learning rate, a global read by a step called through ``precompile``, and a global
read in Python by a host callback (``jax.debug.print``, ``jax.pure_callback``).

Prints what ``jax.debug.print`` prints, then one JSON line: per kind, the result's bytes
as hex and the step's counts. Log records of the ``tinax`` logger go to stderr.
"""

import argparse
import functools
import json
import logging
import sys
import types

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import tinax
from programs.warm_start_program import await_compiles_ahead
from tinax.jit import bounded_jit

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
logging.getLogger("jax").setLevel(logging.WARNING)
logging.getLogger("tinax").setLevel(logging.DEBUG)
if __name__ == "__main__":  # not when collection imports it (--doctest-modules)
    tinax.warm_start(sys.argv[1])

SCALE = 1.0  # a module global
CONFIG = types.SimpleNamespace(scale=1.0)  # an attribute of a module-level object
TABLE = None  # loaded by main()
WEIGHTS = np.ones((4, 3), np.float32)  # filled in place by main()
OPTIMIZER = optax.sgd(1.0)  # rebuilt by main() from the learning rate


class Settings:
    scale = 1.0  # a class attribute


class Scaler:
    """A static argument, hashed by identity: main() changes what it holds."""

    def __init__(self):
        self.scale = 1.0


SCALER = Scaler()  # module-level: recorded by its name


def with_global(x):
    return jnp.tanh(x * SCALE).sum()


def with_attribute(x):
    return jnp.tanh(x * CONFIG.scale).sum()


def with_class(x):
    return jnp.tanh(x * Settings.scale).sum()


def closed(scale):
    def with_cell(x):
        return jnp.tanh(x * scale).sum()

    def set_scale(value):
        nonlocal scale
        scale = value

    return with_cell, set_scale


with_cell, set_cell = closed(1.0)


def with_static(x, scaler):
    return jnp.tanh(x * scaler.scale).sum()


def with_weights(x):
    return (x * WEIGHTS).sum()


def with_table(x):
    return (x * TABLE).sum()


@jax.jit
def scaled(x):  # a jax.jit of its own, nested in the step: JAX caches its trace apart
    return jnp.tanh(x * SCALE)


def with_nested(x):
    return scaled(x).sum()


def scan_body(carry, row):  # a lax.scan body: JAX caches its trace by the function
    return carry + jnp.tanh(row * SCALE).sum(), None


def with_scan(x):
    return jax.lax.scan(scan_body, jnp.zeros(()), x)[0]


@jax.custom_vjp
def clipped(x):  # its rules are traced only when the step is differentiated
    return jnp.tanh(x * SCALE)


def clipped_forward(x):
    return clipped(x), x


def clipped_backward(x, g):
    return (g * SCALE,)


clipped.defvjp(clipped_forward, clipped_backward)


def with_vjp(x):
    return clipped(x).sum()


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def scaled_gradient(scale, x):  # the identity, whose derivative is scaled
    return x


@scaled_gradient.defjvp
def scaled_gradient_jvp(scale, primals, tangents):
    return primals[0], tangents[0] * scale


def with_rule(x):  # SCALE reaches only the derivative rule: main() differentiates the step
    return (scaled_gradient(SCALE, x) ** 2).sum()


def train(params, opt_state, x):
    def loss_of(model):
        return ((jax.vmap(model)(x) - 1.0) ** 2).mean()

    loss, grads = eqx.filter_value_and_grad(loss_of)(params)
    updates, opt_state = OPTIMIZER.update(grads, opt_state, params)
    return eqx.apply_updates(params, updates), opt_state, loss


def with_global_precompiled(x):
    return jnp.sin(x * SCALE).sum()


def with_print(x):  # SCALE reaches the printed value, computed in the program
    jax.debug.print("printed {total}", total=(x * SCALE).sum())
    return x * 2.0


def with_callback(x):  # SCALE is read in Python, by the callback, at each call
    shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return jax.pure_callback(lambda v: np.asarray(v * SCALE, np.float32), shape, x)


STEPS = {
    "global": bounded_jit(with_global, max_traces=1),
    "attribute": bounded_jit(with_attribute, max_traces=1),
    "class": bounded_jit(with_class, max_traces=1),
    "cell": bounded_jit(with_cell, max_traces=1),
    "static": bounded_jit(with_static, max_traces=1, static_argnames="scaler"),
    "none": bounded_jit(with_table, max_traces=1),
    "numpy": bounded_jit(with_weights, max_traces=1),
    "nested": bounded_jit(with_nested, max_traces=1),
    "scan": bounded_jit(with_scan, max_traces=1),
    "vjp": bounded_jit(with_vjp, max_traces=1),
    "rule": bounded_jit(with_rule, max_traces=1),
    "optimizer": bounded_jit(train, max_traces=1, static_nonarrays=True),
    "precompile": bounded_jit(with_global_precompiled, max_traces=1),
    "print": bounded_jit(with_print, max_traces=1),
    "callback": bounded_jit(with_callback, max_traces=1),
}


def call(kind, step, value):
    x = jnp.linspace(0.0, 1.0, 12).reshape(4, 3)
    if kind == "static":
        return step(x, scaler=SCALER)
    if kind == "optimizer":
        model = eqx.nn.MLP(3, 1, 8, 1, key=jax.random.PRNGKey(0))
        opt_state = optax.sgd(value).init(eqx.filter(model, eqx.is_array))
        model, _, _ = step(model, opt_state, x)
        return step(model, opt_state, x)[2]  # the loss after one update
    if kind == "rule":
        return jax.grad(step)(x)
    if kind == "precompile":
        return step.precompile(x)(x)
    return step(x)


def main():
    global SCALE, TABLE, OPTIMIZER
    parser = argparse.ArgumentParser()
    parser.add_argument("manifest")
    parser.add_argument("--value", type=float, default=1.0)
    args = parser.parse_args()
    value = args.value
    SCALE = value
    CONFIG.scale = value
    Settings.scale = value
    set_cell(value)
    SCALER.scale = value
    TABLE = jnp.full((4, 3), value)
    WEIGHTS[:] = value
    OPTIMIZER = optax.sgd(value)
    await_compiles_ahead()  # every call finds its recorded executable ready, if it has one
    out = {}
    for kind, step in STEPS.items():
        result = call(kind, step, value)
        leaves = jax.tree_util.tree_leaves(result)
        out[kind] = {
            "result": b"".join(np.asarray(leaf).tobytes() for leaf in leaves).hex(),
            "traces_used": step.traces_used,
            "compiles_used": step.compiles_used,
            "cache_loads": step.cache_loads,
        }
    jax.effects_barrier()
    sys.stdout.flush()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
