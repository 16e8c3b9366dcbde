"""One process of the multi-process `fail_fast` tests in ``test_fail_fast.py``.

Run as::

    python tests/programs/fail_fast_worker.py --process-id I --num-processes N --port P --scenario S

Each process owns 2 CPU devices and joins an N-process JAX job (gloo collectives),
calls `tinax.parallel.fail_fast`, and plays one scenario:

- ``raise``: the last process raises a ``ValueError`` (in the main thread, or with
  ``--in-thread`` in another thread) while the others wait in a collective.
- ``overrun``: the last process exceeds the trace budget of a process-local
  object, and catches the `TraceBudgetError`, while the others wait in a collective.
- ``short-batch``: an object whose mesh spans every process; on its second call
  process 1 feeds a shorter batch, the others the same batch as before.
- ``local``: process 1 alone traces an object whose mesh lies on its own
  devices, twice; everyone ends normally (process 1 without calling
  `jax.distributed.shutdown`: JAX's exit handler does it).
- ``diverge``: as ``short-batch``, but process 0 feeds a longer batch: both
  processes trace, with different signatures.
- ``exit``: the last process catches a ``sys.exit(4)`` of its own (a caught exit
  ends nothing), then calls ``sys.exit(--exit-code)`` while the others wait in a
  collective (``--exit-code`` is a number, or else a message).
- ``single``: a one-process job; then ``--raise-after`` raises as usual.

Before the failure, the failing process prints ``FAILING AT <time.time()>``.
"""

import argparse
import os
import re
import sys
import threading
import time

LOCAL_DEVICES = 2
INITIALIZATION_TIMEOUT_S = 60
SHUTDOWN_TIMEOUT_S = 30
BATCH, SHORT_BATCH, LONG_BATCH, FEATURES = 16, 8, 24, 3


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--process-id", type=int, required=True)
    parser.add_argument("--num-processes", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--trace-timeout", type=float, default=30.0)
    parser.add_argument("--in-thread", action="store_true")
    parser.add_argument("--raise-after", action="store_true")
    parser.add_argument("--exit-code", default="3")
    return parser.parse_args(argv)


def use_local_cpu_devices():
    """Makes JAX see exactly 2 CPU devices in this process; must run before JAX is imported."""
    flags = os.environ.get("XLA_FLAGS", "")
    flags = re.sub(r"--xla_force_host_platform_device_count=\S*", "", flags)
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={LOCAL_DEVICES}"
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ.pop("JAX_NUM_CPU_DEVICES", None)


def connect(args):
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{args.port}",
        num_processes=args.num_processes,
        process_id=args.process_id,
        initialization_timeout=INITIALIZATION_TIMEOUT_S,
        shutdown_timeout_seconds=SHUTDOWN_TIMEOUT_S,
        coordinator_bind_address=f"127.0.0.1:{args.port}",
    )


def failing_now():
    print(f"FAILING AT {time.time()!r}", flush=True)


def wait_in_collective():
    """Blocks in a collective over every device of the job until every process joins."""
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices("fail_fast_worker")


def scenario_raise(args):
    last = args.process_id == args.num_processes - 1
    if not last:
        wait_in_collective()
        return

    def fail():
        failing_now()
        raise ValueError(f"the data loader of process {args.process_id} ran dry")

    if args.in_thread:
        threading.Thread(target=fail, name="loader").start()
        wait_in_collective()
    else:
        fail()


def scenario_overrun(args):
    import jax.numpy as jnp

    from tinax.jit import TraceBudgetError, bounded_jit

    def local_step(x):
        return x * 2

    step = bounded_jit(local_step, max_traces=1)
    step(jnp.ones(3))
    if args.process_id == args.num_processes - 1:
        failing_now()
        try:
            step(jnp.ones(4))  # trace 2 of max_traces=1 on this process only
        except TraceBudgetError:
            print("CAUGHT", flush=True)  # too late: fail_fast ends the job at the refusal
    wait_in_collective()


def scenario_short_batch(args, second_rows=None):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from tinax.jit import bounded_jit

    mesh = jax.make_mesh((jax.device_count(),), ("x",))

    def global_loss(batch):
        return jnp.sum(batch["x"] ** 2)

    step = bounded_jit(global_loss, max_traces=2, mesh=mesh)

    def batch_of(rows):
        data = np.ones((rows, FEATURES), np.float32)
        sharding = NamedSharding(mesh, P("x"))
        return {"x": jax.make_array_from_callback(data.shape, sharding, lambda i: data[i])}

    wait_in_collective()  # start together: a lag over trace_timeout would read as divergence
    print("first", float(step(batch_of(BATCH))), flush=True)
    if second_rows is None:
        second_rows = SHORT_BATCH if args.process_id == 1 else BATCH
    if second_rows != BATCH:
        failing_now()
    print("second", float(step(batch_of(second_rows))), flush=True)


def scenario_diverge(args):
    """Like ``short-batch``, but process 0 feeds a longer batch: both trace, differently."""
    rows = {0: LONG_BATCH, 1: SHORT_BATCH}
    scenario_short_batch(args, second_rows=rows.get(args.process_id, BATCH))


def scenario_local(args):
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh

    from tinax.jit import bounded_jit

    mesh = Mesh(jax.local_devices(), ("x",))

    def local_eval(x):
        return jnp.sum(x)

    evaluate = bounded_jit(local_eval, max_traces=2, mesh=mesh)
    if args.process_id == 1:
        print("local", float(evaluate(jnp.ones(4))), float(evaluate(jnp.ones(6))), flush=True)
    wait_in_collective()
    print("CLEAN END", flush=True)
    if args.process_id == 1:
        sys.exit(0)  # leaves through JAX's exit handler, not jax.distributed.shutdown


def scenario_exit(args):
    if args.process_id != args.num_processes - 1:
        wait_in_collective()
        return
    try:
        sys.exit(4)
    except SystemExit:
        print("CAUGHT EXIT", flush=True)
    code = int(args.exit_code) if args.exit_code.lstrip("-").isdigit() else args.exit_code
    failing_now()
    sys.exit(code)


SCENARIOS = {
    "raise": scenario_raise,
    "overrun": scenario_overrun,
    "short-batch": scenario_short_batch,
    "local": scenario_local,
    "diverge": scenario_diverge,
    "exit": scenario_exit,
    "single": lambda args: None,
}


def main(argv=None):
    args = parse_args(argv)
    use_local_cpu_devices()
    import jax

    from tinax.parallel import fail_fast

    connect(args)
    fail_fast(trace_timeout=args.trace_timeout)
    fail_fast(trace_timeout=args.trace_timeout)  # idempotent
    SCENARIOS[args.scenario](args)
    if args.raise_after:
        print(f"threads: {threading.active_count()}", flush=True)
        raise RuntimeError("an ordinary failure")
    jax.distributed.shutdown()


if __name__ == "__main__":
    sys.exit(main())
