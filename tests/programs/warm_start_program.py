"""A program that starts warm, run twice by `tests/test_warm_start.py` in fresh processes.

    python warm_start_program.py MANIFEST [--batch N] [--max-traces K] [--slow S]
        [--static-lambda] [--wait] [--version 1|2] [--calls N] [--then-batch N] [--hang]
        [--sharded]

Prints one JSON line of facts at the end (traces, compiles, body runs). Log records
of the ``tinax`` logger go to stderr. With ``--hang`` it then sleeps until it is
killed (a preempted job). With ``--sharded`` the step is bound to a mesh of 8
devices with an Auto axis (``mesh=``) and called with ``x`` split over it.
"""

import argparse
import json
import logging
import os
import sys
import time

import jax
import jax.numpy as jnp

import tinax
from tinax._src.warm import start
from tinax.jit import bounded_jit

runs = 0  # an independent count of the body's runs (traces)


def main():
    global runs
    parser = argparse.ArgumentParser()
    parser.add_argument("manifest")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--max-traces", type=int, default=1)
    parser.add_argument("--slow", type=float, default=0.0)
    parser.add_argument("--static-lambda", action="store_true")
    parser.add_argument("--wait", action="store_true")
    parser.add_argument("--version", type=int, default=1)
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--then-batch", type=int, default=None)  # a last call, of that batch
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--sharded", action="store_true")
    args = parser.parse_args()

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
    logging.getLogger("jax").setLevel(logging.WARNING)
    tinax.warm_start(args.manifest)

    if args.version == 1:

        def step(x, scale):
            global runs
            runs += 1
            if os.environ.get("WARM_TEST_FAIL") == "1":
                raise ValueError("step refuses to trace (WARM_TEST_FAIL=1)")
            time.sleep(args.slow)
            return jnp.tanh(x * scale).sum()

    else:

        def step(x, scale):
            global runs
            runs += 1
            return jnp.cos(x * scale).sum()

    def apply(x, fn):
        return fn(x)

    mesh = split = None
    if args.sharded:
        mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
        split = jax.sharding.NamedSharding(mesh, jax.P("x"))
    step_jit = bounded_jit(step, max_traces=args.max_traces, mesh=mesh)

    def batch(size):
        x = jnp.ones((size, 3))
        return x if split is None else jax.device_put(x, split)

    apply_jit = bounded_jit(apply, max_traces=2, static_argnames="fn")
    built = {"traces_before_call": None}
    if args.wait:
        active = start.active()
        if active is not None:
            active.wait()
        built["traces_before_call"] = step_jit.traces_used
    compiles_before = step_jit.compiles_used
    results = []
    for _ in range(args.calls):
        results.append(float(step_jit(batch(args.batch), 2.0)))
    # a warm-compiled trace is a compiled trace, for explain too
    built["explain_lines"] = str(step_jit.explain(batch(args.batch), 2.0)).count("\n")
    if args.static_lambda:
        apply_jit(jnp.ones(2), fn=lambda v: v * 2)
    if args.then_batch is not None:
        try:
            step_jit(batch(args.then_batch), 2.0)
            built["last_call_refused"] = False
        except tinax.jit.TraceBudgetError:
            built["last_call_refused"] = True
    print(
        json.dumps(
            {
                "result": results[0],
                "runs": runs,
                "traces_used": step_jit.traces_used,
                "compiles_before_call": compiles_before,
                "compiles_used": step_jit.compiles_used,
                "jax": jax.__version__,
                **built,
            }
        ),
        flush=True,
    )
    if args.hang:  # until a signal ends it: no exit, no exit handlers
        time.sleep(600)


if __name__ == "__main__":
    main()
