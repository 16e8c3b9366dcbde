"""`batched_jit` across two JAX processes: multi-controller JAX on CPU, gloo collectives.

The work is done by two subprocesses running ``programs/multiprocess_worker.py``; each
writes a JSON report, checked here against a single-process NumPy computation.
"""

import json
import time

import numpy as np

from helpers.processes import PROGRAMS, ROOT, STDOUT, TimeoutExpired, free_port, start_program
from programs.multiprocess_worker import make_batch, make_params, per_example_loss

WORKER = PROGRAMS / "multiprocess_worker.py"
NUM_PROCESSES = 2
# For both workers together; generous, for a loaded 2-core machine (a run takes seconds).
TIMEOUT_S = 180
# What each worker must report, besides the results.
EXPECTED_SEEN = {
    "process_count": 2,
    "device_count": 8,
    "local_device_count": 4,
    "traces_used": 1,
    "output_fully_addressable": False,
}


def start_worker(process_id, port, tmp_path):
    """Starts one worker; its stdout and stderr both go to ``worker<process_id>.log``."""
    arguments = [
        f"--process-id={process_id}",
        f"--port={port}",
        f"--out={tmp_path / f'report{process_id}.json'}",
    ]
    with open(tmp_path / f"worker{process_id}.log", "wb") as log:
        # The child keeps its own copy of the log's file descriptor; the workers choose
        # their own device count.
        return start_program(WORKER, *arguments, cwd=ROOT, devices=None, stdout=log, stderr=STDOUT)


def wait_for(workers, timeout_s):
    """Waits for every worker to exit; returns False if they did not all exit in time."""
    deadline = time.monotonic() + timeout_s
    try:
        for worker in workers:
            worker.wait(timeout=max(0.0, deadline - time.monotonic()))
    except TimeoutExpired:
        return False
    return True


def run_workers(tmp_path):
    """Runs the two workers to completion and returns their reports; fails the test if any fails.

    A worker still running at the end (time ran out, or this function was
    interrupted) is killed, so no process outlives the test.
    """
    port = free_port()
    workers = []
    try:
        workers = [start_worker(i, port, tmp_path) for i in range(NUM_PROCESSES)]
        finished = wait_for(workers, TIMEOUT_S)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
            worker.wait()
    output = "".join(
        f"\n--- worker {i} (exit code {worker.returncode}) ---\n"
        + (tmp_path / f"worker{i}.log").read_text(errors="replace")
        for i, worker in enumerate(workers)
    )
    assert finished, f"workers did not finish within {TIMEOUT_S} s, so were killed:{output}"
    assert all(worker.returncode == 0 for worker in workers), f"a worker failed:{output}"
    return [json.loads((tmp_path / f"report{i}.json").read_text()) for i in range(NUM_PROCESSES)]


def test_batched_jit_runs_unchanged_across_two_processes(tmp_path):
    """Proves `batched_jit` works, unchanged, on a mesh spanning two processes.

    Two processes with 4 CPU devices each form one 8-device mesh. Each supplies
    only its own rows of a (16, 3) batch sharded over the mesh, and calls the
    same ``batched_jit(per_example_loss, in_axes=(None, 0), max_traces=1,
    mesh=mesh)`` twice (the second time with new values). Both processes must
    see the whole cluster, trace once between the two calls, get an output that
    really spans both processes, and gather exactly what a single NumPy process
    computes, example by example, for the same function on the full batch.
    """
    reports = run_workers(tmp_path)

    params, batch = make_params(), make_batch()
    expected_first = np.array([per_example_loss(params, x) for x in batch])
    expected_second = np.array([per_example_loss(params, x) for x in -batch])
    for report in reports:
        seen = {key: report[key] for key in EXPECTED_SEEN}
        assert seen == EXPECTED_SEEN
        assert len(report["rows_supplied"]) == len(batch) // NUM_PROCESSES
        np.testing.assert_allclose(report["first"], expected_first, rtol=1e-5)
        np.testing.assert_allclose(report["second"], expected_second, rtol=1e-5)
    all_rows = sorted(reports[0]["rows_supplied"] + reports[1]["rows_supplied"])
    assert all_rows == list(range(len(batch)))
