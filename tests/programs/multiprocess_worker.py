"""One process of the two-process `batched_jit` test in ``test_multiprocess.py``.

Run as::

    python tests/programs/multiprocess_worker.py --process-id I --port P --out FILE

Each of the two processes owns 4 CPU devices; together they form one 8-device
mesh. Each process supplies only its own half of a global batch, runs the same
`batched_jit` callable on it twice, gathers the full result, and writes it with
its view of the topology to FILE as JSON.

Importing this module does nothing: JAX must not be imported before the
environment is set up, so JAX is imported only inside the functions `main` calls. The data and
the per-example function are plain NumPy-compatible code, so the test can
compute the expected result without JAX.
"""

import argparse
import json
import os
import re

import numpy as np

NUM_PROCESSES = 2
LOCAL_DEVICES = 4
BATCH_SIZE = 16
FEATURES = 3

# Seconds each worker waits for its peer before giving up with an error, so a
# dead or stuck peer fails the run instead of hanging it. Below the test's own timeout.
INITIALIZATION_TIMEOUT_S = 60
SHUTDOWN_TIMEOUT_S = 30


def make_params():
    """The (replicated) parameters: a 3x2 weight matrix and a bias."""
    w = np.array([[1.0, -2.0], [0.5, 0.25], [-1.5, 3.0]], dtype=np.float32)
    b = np.array([0.1, -0.2], dtype=np.float32)
    return {"w": w, "b": b}


def make_batch():
    """The global batch, shape (16, 3); each process supplies only the rows its devices hold."""
    return (np.arange(BATCH_SIZE * FEATURES).reshape(BATCH_SIZE, FEATURES) / 10).astype(np.float32)


def per_example_loss(params, x):
    """Squared-error loss of one example (shape (3,)) under a linear layer: a scalar."""
    return ((x @ params["w"] + params["b"]) ** 2).sum()


def parse_args(argv=None):
    """Parses ``--process-id``, ``--port`` and ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--process-id", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", required=True)
    return parser.parse_args(argv)


def use_local_cpu_devices():
    """Makes JAX see exactly 4 CPU devices in this process; must run before JAX is imported."""
    flags = os.environ.get("XLA_FLAGS", "")
    flags = re.sub(r"--xla_force_host_platform_device_count=\S*", "", flags)
    count_flag = f"--xla_force_host_platform_device_count={LOCAL_DEVICES}"
    os.environ["XLA_FLAGS"] = f"{flags} {count_flag}".strip()
    os.environ["JAX_PLATFORMS"] = "cpu"
    # JAX_NUM_CPU_DEVICES, if set, would override the XLA flag.
    os.environ.pop("JAX_NUM_CPU_DEVICES", None)


def connect(process_id, port):
    """Joins the two-process JAX cluster, with gloo for cross-process CPU collectives."""
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        num_processes=NUM_PROCESSES,
        process_id=process_id,
        initialization_timeout=INITIALIZATION_TIMEOUT_S,
        shutdown_timeout_seconds=SHUTDOWN_TIMEOUT_S,
        # Only process 0 binds; loopback only (the default is every interface).
        coordinator_bind_address=f"127.0.0.1:{port}",
    )


def sharded_batch(mesh, batch, rows_supplied):
    """``batch`` as one global array sharded over "x"; this process supplies only its own rows.

    ``jax.make_array_from_callback`` asks each process only for the slices its
    own devices hold; the indices of the rows supplied are added to ``rows_supplied``.
    """
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    def local_slice(index):
        rows = range(BATCH_SIZE)[index[0]]
        rows_supplied.update(rows)
        return batch[index]

    return jax.make_array_from_callback(batch.shape, NamedSharding(mesh, P("x")), local_slice)


def run(out_path):
    """Runs the batched loss twice over the global batch and writes what every process saw."""
    import jax
    from jax.experimental import multihost_utils
    from jax.sharding import AxisType

    from tinax.jit import batched_jit

    mesh = jax.make_mesh((jax.device_count(),), ("x",), axis_types=(AxisType.Auto,))
    params = make_params()
    batch = make_batch()
    rows_supplied = set()
    losses = batched_jit(per_example_loss, in_axes=(None, 0), max_traces=1, mesh=mesh)
    first = losses(params, sharded_batch(mesh, batch, rows_supplied))
    # Same shapes, new values: must reuse the compiled function, not retrace.
    second = losses(params, sharded_batch(mesh, -batch, rows_supplied))
    report = {
        "first": multihost_utils.process_allgather(first, tiled=True).tolist(),
        "second": multihost_utils.process_allgather(second, tiled=True).tolist(),
        "traces_used": losses.traces_used,
        "rows_supplied": sorted(rows_supplied),
        "output_fully_addressable": first.is_fully_addressable,
        "process_count": jax.process_count(),
        "device_count": jax.device_count(),
        "local_device_count": jax.local_device_count(),
    }
    with open(out_path, "w") as f:
        json.dump(report, f)


def main(argv=None):
    """Sets up the environment, joins the cluster, runs, and leaves the cluster."""
    args = parse_args(argv)
    use_local_cpu_devices()
    import jax

    connect(args.process_id, args.port)
    run(args.out)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
