"""A program's start-up, for the warm-start rows of `benchmarks/run.py`.

    python benchmarks/startup.py [--signatures PATH] [--cache DIR] [--build import|main]
        [--functions N] [--loading S] [--measure-recording]

Eight budgeted functions of about 300 operations each (``--functions``), about one
second of loading, then one step that calls them all. The loading puts the weights and
a batch on the device, which starts JAX's backend as a program's loading does (warm
start's compiles ahead wait for it), then spends ``--loading`` seconds (1.0) on other
work (``time.sleep``: reading data). With ``--build import`` (the default) the functions
are built at module level, during the program's import, as a module-level
``step = bounded_jit(...)`` is; with ``--build main`` they are built in ``main()`` after
the loading. With ``--signatures`` it starts warm (`tinax.warm_start`, called before the
functions are built); with ``--cache`` it uses JAX's persistent compilation cache in that
folder.

Prints one line of phases, in seconds: ``import I loading L first_step F total T``,
where ``first_step`` is everything that is neither import nor loading (building the
functions where they are built in ``main()``, the first step done) and ``total`` runs
from the program's first line. Then what JAX's compile events (`jax.monitoring`)
measured in the main thread during the first step: ``trace`` (tracing the functions to
jaxprs), ``lower`` (jaxprs to StableHLO) and ``compile`` (XLA's compile, a load from the
persistent cache, or warm start's answer: the wait for the executable compiled ahead);
and the functions' ``compiles_used`` and ``cache_loads``, summed (both 0 where every
call's compile ran an executable warm start compiled ahead).
With ``--signatures`` and ``--measure-recording`` it adds ``recording R``: the CPU time
that recording took before the first step was done, in whichever thread (each trace's
encoding, each compile's module, options and devices, the background writes), read
with `time.thread_time` around tinax's recording entry points.
"""

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import tinax  # noqa: E402
from tinax.jit import bounded_jit  # noqa: E402

IMPORTED = time.perf_counter()

COUNTS = ("compiles_used", "cache_loads")
LAYERS = 100  # three operations each: ~300 per function (a matmul every tenth layer)
EVENTS = {  # JAX's own compile events, one per stage of each call's first use
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}

parser = argparse.ArgumentParser()
parser.add_argument("--signatures")
parser.add_argument("--cache")
parser.add_argument("--build", choices=("import", "main"), default="import")
parser.add_argument("--functions", type=int, default=8)
parser.add_argument("--loading", type=float, default=1.0)
parser.add_argument("--measure-recording", action="store_true")
OPTIONS = parser.parse_args()


def make_function(index: int):
    def layer_stack(x, w):
        for layer in range(LAYERS):
            y = x @ w if layer % 10 == 0 else x * 0.99
            x = jnp.tanh(y + (index * LAYERS + layer) * 1e-3)
        return x

    layer_stack.__qualname__ = f"layer_stack_{index}"
    return layer_stack


def build():
    return [bounded_jit(make_function(i), max_traces=1) for i in range(OPTIONS.functions)]


def _listened() -> dict[str, float]:
    """The seconds of each stage JAX's events report in the main thread while
    ``parts["on"]`` is set (the first step)."""
    parts = dict.fromkeys(EVENTS.values(), 0.0)
    parts["on"] = 0.0
    main = threading.main_thread()

    def listener(event, duration, **_):
        part = EVENTS.get(event)
        if part is not None and parts["on"] and threading.current_thread() is main:
            parts[part] += duration

    jax.monitoring.register_event_duration_secs_listener(listener)
    return parts


def _measured_recording() -> list[float]:
    """Wraps recording's entry points (a trace committed; a compile recorded; a
    background write) to sum the CPU time of their thread while they run; returns the
    list they add to."""
    from tinax._src.warm import session  # a benchmark's look inside: not an API

    spent: list[float] = []

    def timed(function):
        def wrapper(*args, **kwargs):
            start = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent.append(time.thread_time() - start)

        return wrapper

    for name in ("traced", "_compiled", "_write_in_background"):
        setattr(session.WarmStart, name, timed(getattr(session.WarmStart, name)))
    return spent


PARTS = _listened()
RECORDING = _measured_recording() if OPTIONS.measure_recording else None
if OPTIONS.cache:
    jax.config.update("jax_compilation_cache_dir", OPTIONS.cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
if OPTIONS.signatures:
    tinax.warm_start(OPTIONS.signatures)  # before the functions are built
STEPS = build() if OPTIONS.build == "import" else None  # module level: at import


def main() -> None:
    loading = time.perf_counter()
    w = jnp.eye(64) * 0.5  # the weights and a batch, on the device: starts the backend
    x = jnp.ones((16, 64))
    jax.block_until_ready((w, x))
    time.sleep(OPTIONS.loading)  # the other start-up work: reading data
    loaded = time.perf_counter()
    PARTS["on"] = 1.0
    steps = STEPS if STEPS is not None else build()  # built in main(), after the loading
    out = [step(x, w) for step in steps]
    jax.block_until_ready(out)
    PARTS["on"] = 0.0
    total = time.perf_counter() - STARTED
    phases = (IMPORTED - STARTED, loaded - loading)
    line = "import {:.4f} loading {:.4f} first_step {:.4f} total {:.4f}".format(
        *phases, total - sum(phases), total
    )
    line += " trace {trace:.4f} lower {lower:.4f} compile {compile:.4f}".format(**PARTS)
    compiles, loads = (sum(getattr(step, count) for step in steps) for count in COUNTS)
    line += f" compiles_used {compiles} cache_loads {loads}"
    print(line if RECORDING is None else f"{line} recording {sum(RECORDING):.4f}")


if __name__ == "__main__":
    main()
