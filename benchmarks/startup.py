"""A program's start-up, for the warm-start rows of `benchmarks/run.py`.

    python benchmarks/startup.py [--signatures PATH] [--cache DIR] [--measure-recording]

Eight budgeted functions of about 300 operations each, about one second of other
start-up work (``time.sleep``: loading data), then one step that calls all eight.
With ``--signatures`` it starts warm (`tinax.warm_start`); with ``--cache`` it uses
JAX's persistent compilation cache in that folder.

Prints one line of phases, in seconds: ``import I loading L first_step F total T``,
where ``first_step`` is everything that is neither import nor loading (building
the functions, the first step done) and ``total`` runs from the program's first line.
With ``--signatures`` and ``--measure-recording`` it adds ``recording R``: the CPU
time that recording took before the first step was done, in whichever thread
(each trace's encoding, at trace time; the background writes), read with
`time.thread_time` around tinax's two recording entry points.
"""

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402
import os  # noqa: E402

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import tinax  # noqa: E402
from tinax.jit import bounded_jit  # noqa: E402

IMPORTED = time.perf_counter()

FUNCTIONS = 8
LAYERS = 100  # three operations each: ~300 per function (a matmul every tenth layer)
START_UP_WORK_S = 1.0


def make_function(index: int):
    def layer_stack(x, w):
        for layer in range(LAYERS):
            y = x @ w if layer % 10 == 0 else x * 0.99
            x = jnp.tanh(y + (index * LAYERS + layer) * 1e-3)
        return x

    layer_stack.__qualname__ = f"layer_stack_{index}"
    return layer_stack


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--signatures")
    parser.add_argument("--cache")
    parser.add_argument("--measure-recording", action="store_true")
    options = parser.parse_args()
    recording = _measured_recording() if options.measure_recording else None
    if options.cache:
        jax.config.update("jax_compilation_cache_dir", options.cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    if options.signatures:
        tinax.warm_start(options.signatures)
    steps = [bounded_jit(make_function(index), max_traces=1) for index in range(FUNCTIONS)]
    loading = time.perf_counter()
    time.sleep(START_UP_WORK_S)  # the other start-up work: loading data
    loaded = time.perf_counter()
    x, w = jnp.ones((16, 64)), jnp.eye(64) * 0.5
    out = [step(x, w) for step in steps]
    jax.block_until_ready(out)
    total = time.perf_counter() - STARTED
    phases = (IMPORTED - STARTED, loaded - loading)
    line = "import {:.4f} loading {:.4f} first_step {:.4f} total {:.4f}".format(
        *phases, total - sum(phases), total
    )
    print(line if recording is None else f"{line} recording {sum(recording):.4f}")


def _measured_recording() -> list[float]:
    """Wraps recording's two entry points (a trace committed; a background write) to
    sum the CPU time of their thread while they run; returns the list they add to."""
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

    session.WarmStart.traced = timed(session.WarmStart.traced)
    session.WarmStart._write_in_background = timed(session.WarmStart._write_in_background)
    return spent


if __name__ == "__main__":
    main()
