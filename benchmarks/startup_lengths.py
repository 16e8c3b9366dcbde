"""A first call that waits only for its own signature, for the warm-start rows of
`benchmarks/run.py`.

    python benchmarks/startup_lengths.py [--signatures PATH] [--record | --every]
        [--length L] [--lengths N]

One budgeted function of about 300 operations over ``f32[L, 64]``, for the 6 lengths
``L`` of 16 to 512 (``--lengths``: the first N), declared as its buckets
(``max_traces=6``), as a serving program's step is. The program loads (puts the
weights on the device, which starts JAX's backend), builds the object in ``main()``,
and calls it once, with one length (``--length``, by default the last recorded,
512), at once: the first call's latency is the time from building the object to that
call's result. ``--record`` calls every length instead (the run that records them,
with ``--signatures``); ``--every`` compiles every length first
(``precompile_buckets``, in threads), as a start-up that waited for all of them would.
With ``--signatures`` it starts warm (`tinax.warm_start`).

Prints ``first_call F`` (seconds), and what JAX's compile events measured in the main
thread during it: ``trace``, ``lower`` and ``compile`` (XLA's compile, or warm start's
answer: the wait for the executable compiled ahead), and ``compiles_used``.
"""

import argparse
import os
import threading
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp

import tinax
from tinax.jit import bounded_jit

LENGTHS = (16, 32, 64, 128, 256, 512)
LAYERS = 100  # three operations each: ~300 (a matmul every tenth layer)
EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}


def layer_stack(x, w):
    for layer in range(LAYERS):
        y = x @ w if layer % 10 == 0 else x * 0.99
        x = jnp.tanh(y + layer * 1e-3)
    return x


def _listened() -> dict[str, float]:
    parts = dict.fromkeys(EVENTS.values(), 0.0)
    parts["on"] = 0.0
    main = threading.main_thread()

    def listener(event, duration, **_):
        part = EVENTS.get(event)
        if part is not None and parts["on"] and threading.current_thread() is main:
            parts[part] += duration

    jax.monitoring.register_event_duration_secs_listener(listener)
    return parts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--signatures")
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--every", action="store_true")
    parser.add_argument("--length", type=int)
    parser.add_argument("--lengths", type=int, default=len(LENGTHS))
    parser.add_argument("--workers", type=int)
    options = parser.parse_args()
    lengths = LENGTHS[: options.lengths]
    length = options.length or lengths[-1]
    parts = _listened()
    if options.signatures:
        tinax.warm_start(options.signatures, workers=options.workers)

    w = jnp.eye(64) * 0.5  # loading: the weights on the device (starts the backend)
    batches = {n: jnp.ones((n, 64)) for n in lengths}
    jax.block_until_ready((w, batches))

    parts["on"] = 1.0
    started = time.perf_counter()
    step = bounded_jit(layer_stack, max_traces=len(lengths), buckets={"x": {0: lengths}})
    if options.record:
        jax.block_until_ready([step(batches[n], w) for n in lengths])
    else:
        if options.every:
            step.precompile_buckets(batches[length], w)
        jax.block_until_ready(step(batches[length], w))
    first_call = time.perf_counter() - started
    parts["on"] = 0.0
    print(
        "first_call {:.4f} trace {trace:.4f} lower {lower:.4f} compile {compile:.4f}"
        " compiles_used {}".format(first_call, step.compiles_used, **parts),
        flush=True,
    )
    if not options.record:
        # Ends the process without finalizing the interpreter: a warm run's compiles ahead
        # of the other lengths are still running in warm start's daemon threads, and
        # CPython 3.11 aborts (SIGABRT) when its finalization meets a thread inside XLA.
        os._exit(0)


if __name__ == "__main__":
    main()
