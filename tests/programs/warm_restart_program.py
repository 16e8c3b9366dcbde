"""A program restarted with warm start on: run by `tests/test_warm_restarts.py` in fresh
processes, cold (warm start off) and warm (a recording run, then restarts).

    python warm_restart_program.py MANIFEST --kind KIND [--value V]

``MANIFEST`` is the warm start file, or ``-`` for a cold run (``tinax.warm_start`` is not
called). ``tinax.warm_start`` is called at import, before the module-level objects are
built, as a program calls it; each ``KIND`` has its own budgeted step, built at module
level, which reads one kind of state that ``main()`` configures after the objects are
built (from ``--value``, the setting a restart may change):

- ``lru``: a ``functools.lru_cache``'d helper builds a table from a setting, at trace time;
- ``nested_eval``, ``scan_body``: a module-level ``jax.jit`` helper, or a ``lax.scan`` body,
  reads a global; a plain ``jax.jit`` eval step that shares it runs first;
- ``readonly_view``, ``readonly_flip``: a NumPy table made read-only at module level, filled
  by ``main()`` through a view made before, or after flipping ``writeable`` back;
- ``readonly_reshaped``: a read-only view (``np.arange(12).reshape(3, 4)``), left alone;
- ``rng``: the step draws from NumPy's global generator at trace time; ``main()`` seeds it
  and draws once more after the step;
- ``counter``: the step counts its traces in a Python global;
- ``devices``, ``xla_flags``: ``main()`` asks for 4 CPU devices (``jax_num_cpu_devices``,
  or ``XLA_FLAGS``) before any computation; the step's input is split over all devices;
- ``argparse_global``, ``dataclass_config``, ``class_attr``, ``closure``, ``partial_kw``,
  ``environ``: the setting reaches the step through argparse's namespace in a global, a
  dataclass instance's field, a class attribute, a closure cell, a ``functools.partial``'s
  keywords, or ``os.environ``;
- ``optax_lr``: a module-level optax ``OPTIMIZER`` that ``main()`` rebuilds from the
  learning rate (pure-JAX parameters);
- ``nnx_modes``: a flax.nnx model with Dropout and BatchNorm under ``propagate_updates``,
  called once in ``train()`` mode, then once in ``eval()`` mode (``max_traces=2``);
- ``address_static``: a static argument whose repr holds its address (equal by value);
- ``sharded_no_mesh``: an array split over a 4-device mesh, given to an object built
  without ``mesh=``;
- ``committed``: an array ``jax.device_put`` to one device (the second).

Prints one JSON line: the result's bytes as hex, the step's counts after its first call
(``traces_used``, ``compiles_used``, ``cache_loads``), the counts after each call
(``calls``), and what the kind observes beside the result (``observed``). Log records of
the ``tinax`` logger go to stderr.
"""

import argparse
import dataclasses
import functools
import json
import logging
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import tinax
from tinax._src.warm import start
from tinax.jit import bounded_jit

if __name__ == "__main__":  # not when pytest's collection imports it (--doctest-modules)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
    logging.getLogger("jax").setLevel(logging.WARNING)
    if sys.argv[1] != "-":  # "-": a cold run
        tinax.warm_start(sys.argv[1])

# --- what the steps read, as the import leaves it; main() sets it from --value -------------

ARGS = argparse.Namespace(value=1.0)  # argparse_global: main() parses into it
LRU_SCALE = 1.0
NESTED_SCALE = 1.0
SCAN_SCALE = 1.0
TRACES = 0  # counter: the step's traces, counted at trace time
BUILT = []  # lru: the scales the cached helper built a table for (its misses)

VIEW_TABLE = np.ones((4, 3), np.float32)
VIEW_FILL = VIEW_TABLE[...]  # a view made before the table is read-only: still writeable
VIEW_TABLE.flags.writeable = False
FLIP_TABLE = np.ones((4, 3), np.float32)
FLIP_TABLE.flags.writeable = False  # main() flips it back, fills it, and freezes it again
RESHAPED = np.arange(12, dtype=np.float32).reshape(3, 4)  # a view of the arange
RESHAPED.flags.writeable = False

OPTIMIZER = optax.adam(1.0)  # rebuilt by main() from the learning rate


@dataclasses.dataclass
class Config:
    scale: float = 1.0
    depth: int = 2


CONFIG = Config()


class Settings:
    scale = 1.0  # a class attribute


class Scale:
    """A static argument equal and hashed by value, whose repr holds its address."""

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, Scale) and other.value == self.value

    def __hash__(self):
        return hash(("Scale", self.value))


class Net(nnx.Module):
    def __init__(self, rngs):
        self.linear = nnx.Linear(3, 4, rngs=rngs)
        self.norm = nnx.BatchNorm(4, rngs=rngs)
        self.drop = nnx.Dropout(0.5, rngs=rngs)

    def __call__(self, x):
        return self.drop(self.norm(self.linear(x)))


# --- the step bodies ------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def lru_table(scale):
    BUILT.append(scale)
    table = np.linspace(scale, 2 * scale, 12, dtype=np.float32).reshape(4, 3)
    table.flags.writeable = False
    return table


def lru_body(x):
    return jnp.tanh(x * lru_table(LRU_SCALE)).sum()


@jax.jit
def nested_scaled(x):  # a jax.jit of its own: JAX caches its trace apart
    return jnp.tanh(x * NESTED_SCALE)


def nested_train(x):
    return (nested_scaled(x) ** 2).sum()


@jax.jit
def nested_eval(x):  # a plain jax.jit eval step, run first
    return nested_scaled(x).sum()


def scan_body(carry, row):  # a lax.scan body: JAX caches its trace by the function
    return carry + jnp.tanh(row * SCAN_SCALE).sum(), None


def scan_train(x):
    return jax.lax.scan(scan_body, jnp.zeros((), x.dtype), x**2)[0]


@jax.jit
def scan_eval(x):  # a plain jax.jit eval step, run first
    return jax.lax.scan(scan_body, jnp.zeros((), x.dtype), x)[0]


def view_body(x):
    return (x * VIEW_TABLE).sum()


def flip_body(x):
    return (x * FLIP_TABLE).sum()


def reshaped_body(x):
    return (x @ RESHAPED).sum(axis=0)


def rng_body(x):
    noise = np.random.standard_normal(x.shape).astype(np.float32)  # drawn at trace time
    return (x + noise).sum()


def counted_body(x):
    global TRACES
    TRACES += 1
    return jnp.sin(x).sum()


def split_body(x):
    return (x * 2.0).sum(axis=1)


def args_body(x):
    return jnp.tanh(x * ARGS.value).sum()


def config_body(x):
    for _ in range(CONFIG.depth):
        x = jnp.tanh(x * CONFIG.scale)
    return x.sum()


def class_body(x):
    return jnp.tanh(x * Settings.scale).sum()


def closed(scale):
    def cell_body(x):
        return jnp.tanh(x * scale).sum()

    def set_scale(value):
        nonlocal scale
        scale = value

    return cell_body, set_scale


cell_body, set_cell = closed(1.0)


def keyword_body(x, *, scale):
    return jnp.tanh(x * scale).sum()


PARTIAL = functools.partial(keyword_body, scale=1.0)  # main() sets its keyword


def environ_body(x):
    return jnp.tanh(x * float(os.environ.get("WARM_RESTART_SCALE", "1.0"))).sum()


def optax_body(params, opt_state, x):
    def loss_of(params):
        return ((x @ params["w"] + params["b"] - 1.0) ** 2).mean()

    loss, grads = jax.value_and_grad(loss_of)(params)
    updates, opt_state = OPTIMIZER.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def nnx_body(model, x):
    return model(x)


def address_body(x, scale):
    return jnp.tanh(x * scale.value).sum()


def sharded_body(x):
    return jnp.tanh(x * 2.0), (x**2).sum()


def committed_body(x):
    return jnp.cos(x) * 3.0


# --- the budgeted steps, built at module level ------------------------------------------------

STEPS = {
    "lru": bounded_jit(lru_body, max_traces=1),
    "nested_eval": bounded_jit(nested_train, max_traces=1),
    "scan_body": bounded_jit(scan_train, max_traces=1),
    "readonly_view": bounded_jit(view_body, max_traces=1),
    "readonly_flip": bounded_jit(flip_body, max_traces=1),
    "readonly_reshaped": bounded_jit(reshaped_body, max_traces=1),
    "rng": bounded_jit(rng_body, max_traces=1),
    "counter": bounded_jit(counted_body, max_traces=1),
    "devices": bounded_jit(split_body, max_traces=1),
    "xla_flags": bounded_jit(split_body, max_traces=1),
    "argparse_global": bounded_jit(args_body, max_traces=1),
    "dataclass_config": bounded_jit(config_body, max_traces=1),
    "class_attr": bounded_jit(class_body, max_traces=1),
    "closure": bounded_jit(cell_body, max_traces=1),
    "partial_kw": bounded_jit(PARTIAL, max_traces=1),
    "environ": bounded_jit(environ_body, max_traces=1),
    "optax_lr": bounded_jit(optax_body, max_traces=1),
    "nnx_modes": bounded_jit(nnx_body, max_traces=2, propagate_updates=True),
    "address_static": bounded_jit(address_body, max_traces=1, static_argnames="scale"),
    "sharded_no_mesh": bounded_jit(sharded_body, max_traces=1),
    "committed": bounded_jit(committed_body, max_traces=1),
}


def leaves_hex(tree):
    """The bytes of every leaf (a PRNG key's data), as hex: equal iff bit-identical."""
    parts = []
    for leaf in jax.tree_util.tree_leaves(tree):
        if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        parts.append(np.asarray(leaf).tobytes())
    return b"".join(parts).hex()


def counts(step):
    return {
        "traces_used": step.traces_used,
        "compiles_used": step.compiles_used,
        "cache_loads": step.cache_loads,
    }


def loading(timeout=120.0):
    """Stands for the program's loading of its data, after JAX's backend started: waits
    until warm start's compiles ahead (begun once the program started the backend) have
    ended, so that the first call finds its own executable. (A call that comes before its
    compile ahead has begun compiles it itself, as cold: a race no test leaves to chance.)
    Nothing to wait for when warm start is off."""
    active = start.active()
    if active is None:
        return
    entries = active._ahead._entries
    deadline = time.monotonic() + timeout
    while any(not entry.done.is_set() for found in list(entries.values()) for entry in found):
        if time.monotonic() > deadline:
            raise TimeoutError("the compiles ahead did not end")
        time.sleep(0.005)


def main():
    global ARGS, LRU_SCALE, NESTED_SCALE, SCAN_SCALE, OPTIMIZER
    parser = argparse.ArgumentParser()
    parser.add_argument("manifest")
    parser.add_argument("--kind", required=True, choices=sorted(STEPS))
    parser.add_argument("--value", type=float, default=0.5)
    ARGS = parser.parse_args()  # argparse_global reads ARGS.value
    kind, value = ARGS.kind, ARGS.value
    if kind == "devices":  # before any computation: the backend starts with 4 devices
        jax.config.update("jax_num_cpu_devices", 4)
    elif kind == "xla_flags":
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    LRU_SCALE = value
    NESTED_SCALE = value
    SCAN_SCALE = value
    VIEW_FILL[...] = value  # through the view made before the table was read-only
    FLIP_TABLE.flags.writeable = True
    FLIP_TABLE[...] = value
    FLIP_TABLE.flags.writeable = False
    CONFIG.scale = value
    Settings.scale = value
    set_cell(value)
    PARTIAL.keywords["scale"] = value
    os.environ["WARM_RESTART_SCALE"] = repr(value)
    OPTIMIZER = optax.adam(value)
    np.random.seed(int(value * 1000))

    step = STEPS[kind]
    x = jnp.asarray(np.linspace(0.1, 1.2, 12, dtype=np.float32).reshape(4, 3))  # the backend
    loading()
    observed = {}
    calls = []
    if kind == "nested_eval":
        observed["eval"] = leaves_hex(nested_eval(x))  # the eval step runs first
    elif kind == "scan_body":
        observed["eval"] = leaves_hex(scan_eval(x))
    if kind in ("devices", "xla_flags"):
        wide = jnp.asarray(np.linspace(0.1, 2.4, 24, dtype=np.float32).reshape(8, 3))
        mesh = Mesh(np.array(jax.devices()), ("d",))
        out = step(jax.device_put(wide, NamedSharding(mesh, PartitionSpec("d"))))
        calls.append(counts(step))
        observed["devices"] = len(jax.devices())
        observed["out_devices"] = len(out.sharding.device_set)
    elif kind == "optax_lr":
        params = {"w": jnp.full((3, 1), 0.1, jnp.float32), "b": jnp.zeros((1,), jnp.float32)}
        out = step(params, OPTIMIZER.init(params), x)
        calls.append(counts(step))
    elif kind == "nnx_modes":
        model = Net(nnx.Rngs(0))
        model.train()
        trained = step(model, x)
        calls.append(counts(step))
        model.eval()
        evaluated = step(model, x)
        calls.append(counts(step))
        out = (trained, evaluated, nnx.state(model))
    elif kind == "address_static":
        out = step(x, scale=Scale(value))
        calls.append(counts(step))
    elif kind == "sharded_no_mesh":
        mesh = Mesh(np.array(jax.devices()[:4]), ("d",))
        out = step(jax.device_put(x, NamedSharding(mesh, PartitionSpec("d"))))
        calls.append(counts(step))
        observed["spec"] = str(out[0].sharding.spec)
        observed["out_devices"] = sorted(device.id for device in out[0].sharding.device_set)
    elif kind == "committed":
        out = step(jax.device_put(x, jax.devices()[1]))
        calls.append(counts(step))
        observed["out_devices"] = sorted(device.id for device in out.devices())
    else:
        out = step(x)
        calls.append(counts(step))
    if kind == "lru":
        observed["cache_info"] = lru_table.cache_info()._asdict()
        observed["built"] = BUILT
    elif kind == "rng":
        observed["draw_after"] = np.random.random()  # the global generator after the step
    elif kind == "counter":
        observed["traces"] = TRACES
    print(
        json.dumps({"result": leaves_hex(out), **calls[0], "calls": calls, "observed": observed}),
        flush=True,
    )


if __name__ == "__main__":
    main()
