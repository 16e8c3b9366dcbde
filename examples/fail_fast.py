"""A two-process JAX job whose last batch is short on one host, with and without fail_fast.

Run ``python examples/fail_fast.py``: it starts the job four times on this machine
(two processes, two CPU devices each, gloo collectives on 127.0.0.1): with a budget
of one trace (the short batch is a budget overrun on host 1), then of two (host 1
retraces alone), each with `tinax.parallel.fail_fast` and without. It prints what
every process printed, its exit status, and the time from the short batch to the
exit of the last process.

Each process alone is ``python examples/fail_fast.py --process-id I --port P``
(``--max-traces N``; ``--without`` leaves fail_fast out).
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import time

PROCESSES = 2
LOCAL_DEVICES = 2
ROWS, SHORT_ROWS, FEATURES = 32, 20, 64  # per host; host 1's last batch is short
STEPS = 3
TRACE_TIMEOUT_S = 3.0
# Without fail_fast, JAX's own timeouts end the job; shortened here from 100 s and 300 s.
HEARTBEAT_TIMEOUT_S = 5
SHUTDOWN_TIMEOUT_S = 5
GIVE_UP_S = 60  # the launcher kills a job still running after this long


def one_process(process_id, port, use_fail_fast, max_traces):
    """One host of the job: three steps over its own rows, the last one short on host 1."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from tinax.jit import bounded_jit
    from tinax.parallel import fail_fast

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        num_processes=PROCESSES,
        process_id=process_id,
        coordinator_bind_address=f"127.0.0.1:{port}",
        heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT_S,
        shutdown_timeout_seconds=SHUTDOWN_TIMEOUT_S,
    )
    if use_fail_fast:
        fail_fast(trace_timeout=TRACE_TIMEOUT_S)

    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    rows_sharded = NamedSharding(mesh, P("data"))

    def loss(batch):
        return jnp.mean((batch["x"] @ batch["w"]) ** 2)

    step = bounded_jit(loss, max_traces=max_traces, mesh=mesh)
    w = np.full((FEATURES, 1), 0.01, np.float32)
    for index in range(STEPS):
        last = index == STEPS - 1
        rows = SHORT_ROWS if last and process_id == 1 else ROWS
        local = np.ones((rows, FEATURES), np.float32)
        if rows != ROWS:
            print(f"SHORT BATCH AT {time.time()!r}", flush=True)
        batch = {
            "x": jax.make_array_from_process_local_data(rows_sharded, local),
            "w": jax.device_put(w, NamedSharding(mesh, P())),
        }
        print(f"step {index}: loss {float(step(batch)):.4f}", flush=True)
    jax.distributed.shutdown()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(use_fail_fast, max_traces):
    """Runs the job; returns each process's (exit status, output) and the seconds from the
    short batch to the last exit."""
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")},
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={LOCAL_DEVICES}",
        "JAX_PLATFORMS": "cpu",
    }
    script = os.path.relpath(__file__)  # tracebacks show the path as given
    command = [sys.executable, script, f"--port={port}", f"--max-traces={max_traces}"]
    command += [] if use_fail_fast else ["--without"]
    workers = [
        subprocess.Popen(
            [*command, f"--process-id={index}"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for index in range(PROCESSES)
    ]
    started = time.monotonic()
    ended = [None] * PROCESSES
    while None in ended and time.monotonic() - started < GIVE_UP_S:
        for index, worker in enumerate(workers):
            if ended[index] is None and worker.poll() is not None:
                ended[index] = time.time()
        time.sleep(0.01)
    killed = None in ended
    for index, worker in enumerate(workers):
        if worker.poll() is None:
            worker.kill()
            ended[index] = time.time()
    results = [(worker.wait(), worker.stdout.read()) for worker in workers]
    short = [float(t) for _, out in results for t in re.findall(r"SHORT BATCH AT (\S+)", out)]
    return results, max(ended) - min(short), killed


# gloo's "[Gloo] Rank 0 is connected to 3 peer ranks. ... is : 3" can arrive cut in two by
# another write; its tail is dropped too, down to the bare count it ends with.
_JAX_LOG = re.compile(
    r"^(WARNING: All log messages|[IWEF]\d{4} |\[Gloo\]|\s+@ |\*\*\* |.*connected peer ranks"
    r"|.*ranks is : \d+$|\s*:?\s*\d+\s*$)"
)
# Python 3.13 marks the failing expression of a traceback line with a line of ~ and ^
# (3.11 marks fewer lines): dropped, so that every Python prints the same text.
_CARETS = re.compile(r"^\s+[~^]+\s*$")
_JAX_ABORT = ("DEADLINE_EXCEEDED", "--------------------", "Barrier result")


def kept(output):
    """A process's output less JAX's and gloo's log lines, the short-batch marker,
    Python's caret lines under a traceback line, the text of JAX's shutdown-barrier
    abort (one line says where it was), and empty lines before or after it all."""
    here = os.getcwd() + os.sep
    lines = [
        line.replace(here, "")  # paths as from the working directory
        for line in output.splitlines()
        if not _JAX_LOG.match(line)
        and not _CARETS.match(line)
        and not line.startswith("SHORT BATCH AT")
    ]
    for index, line in enumerate(lines):
        if line.startswith(_JAX_ABORT):
            # Its length differs between JAX releases (9 to 27 lines): not shown.
            lines[index:] = ["[JAX's shutdown-barrier timeout error]"]
            break
    # A log line cut in two by another write can leave an empty line before the
    # program's first: the output is what lies between its first and last text.
    return "\n".join(lines).strip("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--process-id", type=int)
    parser.add_argument("--port", type=int)
    parser.add_argument("--without", action="store_true")
    parser.add_argument("--max-traces", type=int, default=1)
    args = parser.parse_args()
    if args.process_id is not None:
        one_process(args.process_id, args.port, not args.without, args.max_traces)
        return
    for max_traces, use_fail_fast in ((1, True), (1, False), (2, True), (2, False)):
        results, seconds, killed = launch(use_fail_fast, max_traces)
        print(f"=== max_traces={max_traces}, {'with' if use_fail_fast else 'without'} fail_fast")
        for index, (status, output) in enumerate(results):
            print(f"--- process {index} (exit status {status})")
            print(kept(output))
        what = "killed by the launcher" if killed else "last process exited"
        print(f"--- {what} {seconds:.1f} s after the short batch")


if __name__ == "__main__":
    main()
