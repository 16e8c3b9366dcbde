"""A program that starts warm, run more than once by `tests/test_warm_start.py`, each run
a fresh process.

    python warm_start_program.py MANIFEST [--batch N] [--batches N,M,...] [--max-traces K]
        [--static-lambda] [--wait] [--version 1|2] [--then-batch N] [--hang] [--sharded]
        [--cache FOLDER] [--hold-others] [--exit-in-flight] [--heavy] [--workers N]
        [--cpu-devices N]

Builds its objects, then (``--wait``) starts JAX's backend and waits until every
executable warm start compiles ahead is compiled (`await_compiles_ahead`), then calls
``step`` once per batch (``--batches``, else ``--batch``). Prints one JSON line of facts
at the end: the results' bytes, the body's runs (traces), the step's counts, and whether
JAX's backend was started once the objects were built (warm start starts none). Log
records of the ``tinax`` logger, DEBUG included, go to stderr.

With ``--hang`` it then sleeps until it is killed (a preempted job). With ``--sharded``
the step is bound to a mesh of 8 devices with an Auto axis (``mesh=``) and called with
``x`` split over it. ``--cache`` sets JAX's persistent compilation cache; the facts then
say where JAX's cache answered ``jit_step`` (in the calling thread, or in others).
``--hold-others`` holds every compile ahead of another batch than the first one called,
once begun, until that call has returned (at most 10 s), and waits for the called one's
before the call: the facts say how many compiles ahead were still held when it came back.
``--heavy`` calls ``heavy`` too, whose compile takes about half a second;
``--exit-in-flight`` holds the others as ``--hold-others`` does, then releases them once
the call has returned and ends at once: their compiles (``heavy``'s, if it was recorded
and is not called) are in XLA while the program exits. ``--cpu-devices`` sets
``jax_num_cpu_devices`` in ``main()`` after the objects are built, as a program does
before it starts the backend.
"""

import argparse
import json
import logging
import os
import sys
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import xla_bridge

import tinax
from tinax._src import private
from tinax._src.warm import ahead, start
from tinax.jit import bounded_jit

runs = 0  # an independent count of the body's runs (traces)


def await_compiles_ahead(timeout=120.0, done=lambda text: True):
    """Starts JAX's backend (warm start never does), then waits until every executable
    warm start was given to compile ahead is begun, and those whose signature's text
    ``done`` accepts are compiled (or failed): a call made next finds its own ready. (A
    recipe no thread has begun when its call compiles is compiled by the call, as cold:
    a race a test must not leave to chance.)"""
    active = start.active()
    if active is None:
        return
    jax.devices()
    entries = active._ahead._entries
    deadline = time.monotonic() + timeout
    while any(
        not (entry.done.is_set() if done(entry.recipe.text) else entry.started)
        for found in list(entries.values())
        for entry in found
    ):
        if time.monotonic() > deadline:
            raise TimeoutError("the compiles ahead did not finish")
        time.sleep(0.005)


class JaxCacheLog(logging.Handler):
    """JAX's own word on its persistent cache for ``jit_step``: hits and misses, in the
    calling thread and in the others."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.found = {"hits here": 0, "hits elsewhere": 0, "misses here": 0, "misses elsewhere": 0}
        self.here = threading.get_ident()

    def emit(self, record):
        text = record.getMessage()
        if "'jit_step'" not in text:
            return
        kind = "hits" if text.startswith("Persistent compilation cache hit") else "misses"
        if kind == "misses" and not text.startswith("PERSISTENT COMPILATION CACHE MISS"):
            return
        where = "here" if threading.get_ident() == self.here else "elsewhere"
        self.found[f"{kind} {where}"] += 1


def hold_others(called):
    """Compiles ahead of another batch than ``called``, once begun, wait until the returned
    event is set (or 10 s have passed) before XLA compiles them."""
    release = threading.Event()
    current = threading.local()
    compile_ahead, compile_parsed = ahead.Ahead._compile_ahead, private.compile_parsed

    def begun(self, entry):
        current.text = entry.recipe.text
        compile_ahead(self, entry)

    def held(backend, parsed, ids):
        if f"x: f32[{called},3]" not in current.text:
            release.wait(10.0)
        return compile_parsed(backend, parsed, ids)

    ahead.Ahead._compile_ahead = begun
    private.compile_parsed = held
    return release


def main():
    global runs
    parser = argparse.ArgumentParser()
    parser.add_argument("manifest")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--batches", default=None)  # several calls: "4,8,16"
    parser.add_argument("--max-traces", type=int, default=1)
    parser.add_argument("--static-lambda", action="store_true")
    parser.add_argument("--wait", action="store_true")
    parser.add_argument("--version", type=int, default=1)
    parser.add_argument("--then-batch", type=int, default=None)  # a last call, of that batch
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--sharded", action="store_true")
    parser.add_argument("--cache", default=None)
    parser.add_argument("--hold-others", action="store_true")
    parser.add_argument("--exit-in-flight", action="store_true")
    parser.add_argument("--heavy", action="store_true")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--cpu-devices", type=int, default=None)
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")] if args.batches else [args.batch]

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
    logging.getLogger("jax").setLevel(logging.WARNING)
    logging.getLogger("tinax").setLevel(logging.DEBUG)
    cache_log = None
    if args.cache is not None:
        jax.config.update("jax_compilation_cache_dir", args.cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        cache_log = JaxCacheLog()
        compiler_log = logging.getLogger("jax._src.compiler")
        compiler_log.setLevel(logging.DEBUG)
        compiler_log.propagate = False
        compiler_log.addHandler(cache_log)
    held = args.hold_others or args.exit_in_flight
    release = hold_others(batches[0]) if held else None
    tinax.warm_start(args.manifest, workers=args.workers)

    if args.version == 1:

        def step(x, scale):
            global runs
            runs += 1
            if os.environ.get("WARM_TEST_FAIL") == "1":
                raise ValueError("step refuses to trace (WARM_TEST_FAIL=1)")
            return jnp.tanh(x * scale).sum()

    else:

        def step(x, scale):
            global runs
            runs += 1
            return jnp.cos(x * scale).sum()

    def apply(x, fn):
        return fn(x)

    def heavy(x):  # 500 operations: a compile of about half a second
        for i in range(500):
            x = jnp.sin(x) * (1.0 + i * 1e-4)
        return x

    mesh = None
    if args.sharded:
        mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    step_jit = bounded_jit(step, max_traces=args.max_traces, mesh=mesh)
    apply_jit = bounded_jit(apply, max_traces=2, static_argnames="fn")
    heavy_jit = bounded_jit(heavy, max_traces=1)
    facts = {}
    if not args.sharded:
        time.sleep(0.2)  # time for warm start's threads to start a backend, were they to
        facts["backend_started_when_built"] = xla_bridge.backends_are_initialized()
    if args.cpu_devices is not None:  # raises once the backend is started
        jax.config.update("jax_num_cpu_devices", args.cpu_devices)

    def batch(size):
        x = jnp.arange(size * 3, dtype=jnp.float32).reshape(size, 3) / (size * 3)
        if mesh is not None:
            x = jax.device_put(x, jax.sharding.NamedSharding(mesh, jax.P("x")))
        return x

    if held:  # the called batch's compiled, the others begun and held
        await_compiles_ahead(done=lambda text: f"x: f32[{batches[0]},3]" in text)
    elif args.wait:
        await_compiles_ahead()
    results = []
    for size in batches:
        results.append(np.asarray(step_jit(batch(size), 2.0)).tobytes().hex())
        if release is not None and not release.is_set():
            entries = [e for found in start.active()._ahead._entries.values() for e in found]
            facts["held_at_return"] = sum(e.started and not e.done.is_set() for e in entries)
            release.set()
    if args.heavy:
        heavy_jit(jnp.ones(3)).block_until_ready()
    if args.exit_in_flight:  # the held compiles go on in XLA while the program ends
        time.sleep(0.05)
        entries = [e for found in start.active()._ahead._entries.values() for e in found]
        facts["in_flight_at_exit"] = sum(e.started and not e.done.is_set() for e in entries)
    elif release is not None:
        await_compiles_ahead()
    facts["compiles_used"] = step_jit.compiles_used  # the calls' (not explain's, nor the last)
    facts["cache_loads"] = step_jit.cache_loads
    # a trace whose call ran an executable compiled ahead is a compiled trace, for explain too
    facts["explain_lines"] = str(step_jit.explain(batch(batches[0]), 2.0)).count("\n")
    if args.static_lambda:
        apply_jit(jnp.ones(2), fn=lambda v: v * 2)
        facts["apply"] = [apply_jit.traces_used, apply_jit.compiles_used, apply_jit.cache_loads]
    if args.then_batch is not None:
        try:
            step_jit(batch(args.then_batch), 2.0)
            facts["last_call_refused"] = False
        except tinax.jit.TraceBudgetError:
            facts["last_call_refused"] = True
    if cache_log is not None:
        facts["jax_cache"] = cache_log.found
    print(
        json.dumps(
            {
                "result": results[0],
                "results": results,
                "runs": runs,
                "traces_used": step_jit.traces_used,
                "device_count": jax.device_count(),
                "jax": jax.__version__,
                **facts,
            }
        ),
        flush=True,
    )
    if args.hang:  # until a signal ends it: no exit, no exit handlers
        time.sleep(600)


if __name__ == "__main__":
    main()
