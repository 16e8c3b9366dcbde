"""`tinax.parallel.fail_fast`: real multi-process JAX jobs (gloo on CPU) that fail fast.

Each multi-process test starts ``programs/fail_fast_worker.py`` once per process, all
joined through ``jax.distributed.initialize`` on 127.0.0.1, and checks how and
when they end. The failing process prints ``FAILING AT <time>`` just before
its failure; exit times are taken by polling the processes here.
"""

import math
import os
import pickle
import re
import sys
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from helpers.pages import text_blocks, untimed
from helpers.processes import (
    PROGRAMS,
    ROOT,
    STDOUT,
    free_port,
    run_example,
    run_program,
    start_program,
)
from tinax._src import private
from tinax._src.diagnosis import compare, reuse
from tinax._src.parallel import job_failure, trace_agreement
from tinax.jit import bounded_jit
from tinax.parallel import fail_fast

WORKER = PROGRAMS / "fail_fast_worker.py"
# Generous, for a loaded 2-core machine: a scenario takes a few seconds.
TIMEOUT_S = 120
# How soon after the failure the last process has exited: promptly, not at JAX's timeouts.
PROMPT_S = 5.0
HEADING = "tinax.parallel.fail_fast: "


class Job:
    """What a finished job left: per process, its exit status, exit time and output."""

    def __init__(self, codes, exit_times, outputs):
        self.codes = codes
        self.exit_times = exit_times
        self.outputs = outputs

    def failed_at(self):
        """When the failing process announced its failure (the earliest, if several)."""
        found = [float(t) for out in self.outputs for t in re.findall(r"FAILING AT (\S+)", out)]
        assert found, f"no process announced a failure:{self}"
        return min(found)

    def __str__(self):
        return "".join(
            f"\n--- process {i} (exit code {code}) ---\n{out}"
            for i, (code, out) in enumerate(zip(self.codes, self.outputs, strict=True))
        )


def run_job(tmp_path, scenario, processes=2, extra=()):
    """Runs one scenario on ``processes`` processes to completion (killing any left after
    `TIMEOUT_S`)."""
    port = free_port()
    workers, logs = [], []
    try:
        for index in range(processes):
            log_path = tmp_path / f"process{index}.log"
            logs.append(log_path)
            arguments = [
                f"--process-id={index}",
                f"--num-processes={processes}",
                f"--port={port}",
                f"--scenario={scenario}",
                *extra,
            ]
            with open(log_path, "wb") as log:
                workers.append(
                    start_program(
                        WORKER, *arguments, cwd=ROOT, devices=None, stdout=log, stderr=STDOUT
                    )
                )
        exit_times = [None] * processes
        deadline = time.monotonic() + TIMEOUT_S
        while None in exit_times and time.monotonic() < deadline:
            for index, worker in enumerate(workers):
                if exit_times[index] is None and worker.poll() is not None:
                    exit_times[index] = time.time()
            time.sleep(0.01)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
            worker.wait()
    outputs = [path.read_text(errors="replace") for path in logs]
    job = Job([worker.returncode for worker in workers], exit_times, outputs)
    assert None not in exit_times, f"processes still running after {TIMEOUT_S} s:{job}"
    return job


def blocks(output):
    """The fail_fast blocks in one process's output (each starts with the heading)."""
    return [line for line in output.splitlines() if line.startswith(HEADING)]


class TestFailure:
    @pytest.mark.parametrize("in_thread", [False, True], ids=["main thread", "other thread"])
    def test_every_process_ends_promptly_with_the_message_when_one_raises(
        self, tmp_path, in_thread
    ):
        extra = ["--in-thread"] if in_thread else []
        job = run_job(tmp_path, "raise", extra=extra)
        assert job.codes == [1, 1], str(job)
        assert max(job.exit_times) - job.failed_at() < PROMPT_S, str(job)
        thread = " in thread 'loader'" if in_thread else ""
        heading = f"{HEADING}process 1 of 2 failed{thread}; ending every process."
        for output in job.outputs:
            assert blocks(output) == [heading], str(job)
            assert "ValueError: the data loader of process 1 ran dry" in output, str(job)
        assert "Traceback (most recent call last)" in job.outputs[1]  # where it failed
        assert "Traceback" not in job.outputs[0]

    @pytest.mark.parametrize("processes", [2, 4])
    def test_a_budget_overrun_on_one_process_ends_every_process_with_the_diagnosis(
        self, tmp_path, processes
    ):
        job = run_job(tmp_path, "overrun", processes=processes)
        assert job.codes == [1] * processes, str(job)
        assert max(job.exit_times) - job.failed_at() < PROMPT_S, str(job)
        last = processes - 1
        for output in job.outputs:
            assert blocks(output) == [
                f"{HEADING}process {last} of {processes} failed; ending every process."
            ], str(job)
            assert "tinax.jit.TraceBudgetError: scenario_overrun.<locals>.local_step" in output
            assert "  x: f32[3] -> f32[4] (shape)" in output  # the whole diagnosis
            assert "How to fix:" in output
        assert "CAUGHT" not in job.outputs[last]  # ended at the refusal, though caught


class TestExitStatus:
    @pytest.mark.parametrize(
        ("code", "status", "text"),
        [("3", 3, "SystemExit: 3"), ("the loader ran dry", 1, "SystemExit: the loader ran dry")],
        ids=["number", "message"],
    )
    def test_a_failure_status_on_one_process_ends_every_process_naming_it(
        self, tmp_path, code, status, text
    ):
        job = run_job(tmp_path, "exit", extra=[f"--exit-code={code}"])
        assert job.codes == [1, status], str(job)
        assert max(job.exit_times) - job.failed_at() < PROMPT_S, str(job)
        heading = f"{HEADING}process 1 of 2 exited with status {status}; ending every process."
        for output in job.outputs:
            assert blocks(output) == [heading], str(job)
            assert f"{heading}\n{text}\n" in output.replace("\r\n", "\n"), str(job)
        assert "CAUGHT EXIT" in job.outputs[1]  # the caught sys.exit(4) ended nothing

    @pytest.mark.parametrize(
        ("code", "status"),
        [(None, 0), (0, 0), (False, 0), (3, 3), (True, 1), ("message", 1), (1.5, 1), ((), 1)],
        ids=repr,
    )
    def test_the_status_is_the_one_python_exits_with(self, code, status):
        assert job_failure.exit_status(code) == status

    @pytest.mark.skipif(os.name != "posix", reason="POSIX keeps a status's low 8 bits")
    @pytest.mark.parametrize(
        ("code", "status"),
        [(256, 0), (257, 1), (-1, 255), (2**40, 0), (2**63, 255), (-(2**63), 0), (-(2**70), 255)],
        ids=repr,
    )
    def test_the_status_is_the_one_the_system_reports(self, code, status):
        result = run_program(f"import sys; sys.exit({code})", returncode=status, capture=False)
        assert result.returncode == status == job_failure.exit_status(code)

    def test_sys_exit_is_unchanged_without_a_job(self):
        assert job_failure.current_job() is None
        for args, code in [((), None), ((0,), 0), ((3,), 3), (("message",), "message")]:
            with pytest.raises(SystemExit) as info:
                job_failure._exit_hook(*args)
            assert type(info.value) is SystemExit
            assert info.value.code == code and info.value.args == args
            assert "_tinax_fail_fast" not in info.value.__dict__


class TestTraceAgreement:
    TRACE_TIMEOUT = 2.0

    def test_a_short_batch_on_one_process_ends_the_job_naming_it(self, tmp_path):
        job = run_job(tmp_path, "short-batch", extra=[f"--trace-timeout={self.TRACE_TIMEOUT}"])
        assert job.codes == [1, 1], str(job)
        assert max(job.exit_times) - job.failed_at() < self.TRACE_TIMEOUT + PROMPT_S, str(job)
        for output in job.outputs:
            assert len(blocks(output)) == 1, str(job)
            assert "Trace 2 was made by process 1 but not by process 0 within" in output
            assert "trace_timeout=2 s." in output
            assert "Differences from trace #1, which every process made:" in output
            assert "  batch['x']: f32[16@x,3] -> f32[8@x,3] (shape) on process 1" in output
        assert "second" not in job.outputs[1]  # process 1 never ran its different program

    def test_processes_that_trace_different_signatures_print_one_same_message(self, tmp_path):
        job = run_job(tmp_path, "diverge", extra=[f"--trace-timeout={self.TRACE_TIMEOUT}"])
        assert job.codes == [1, 1], str(job)
        messages = [output[output.index(HEADING) :] for output in job.outputs]
        assert messages[0] == messages[1], str(job)
        assert "Trace 2 has 2 different signatures: process 0; process 1." in messages[0]
        assert "Differences from the signature of process 0:" in messages[0]
        assert "  batch['x']: f32[24@x,3] -> f32[8@x,3] (shape) on process 1" in messages[0]

    def test_a_process_local_object_traced_on_one_process_ends_normally(self, tmp_path):
        job = run_job(tmp_path, "local", extra=[f"--trace-timeout={self.TRACE_TIMEOUT}"])
        assert job.codes == [0, 0], str(job)
        for output in job.outputs:
            assert HEADING not in output, str(job)
            assert "CLEAN END" in output
        assert "local 4.0 6.0" in job.outputs[1]


class TestSingleProcess:
    def test_fail_fast_does_nothing_in_a_one_process_job(self, tmp_path):
        job = run_job(tmp_path, "single", processes=1, extra=["--raise-after"])
        assert job.codes == [1], str(job)
        output = job.outputs[0]
        assert HEADING not in output
        assert "RuntimeError: an ordinary failure" in output  # Python's own excepthook
        assert "threads: 1\n" in output or "threads: 1\r\n" in output  # no watcher


# --- in this process: arguments, and a client that is not there ----------------------------


class TestArguments:
    def test_raises_runtime_error_when_the_distributed_client_is_not_initialized(self):
        assert not jax.distributed.is_initialized()
        with pytest.raises(RuntimeError, match=r"^fail_fast: the JAX distributed client is not"):
            fail_fast()
        assert sys.excepthook is not job_failure._excepthook

    @pytest.mark.parametrize(
        "value", [True, False, np.bool_(True), "1", None, 1j, [1.0], np.ones(1)], ids=repr
    )
    def test_raises_type_error_for_a_non_number(self, value):
        with pytest.raises(TypeError, match=r"^fail_fast: trace_timeout must be a positive"):
            fail_fast(trace_timeout=value)

    @pytest.mark.parametrize("value", [0, 0.0, -1, -0.5, math.inf, math.nan], ids=repr)
    def test_raises_value_error_for_a_number_that_is_not_a_positive_finite_time(self, value):
        with pytest.raises(ValueError, match=rf"^fail_fast: trace_timeout .* got {value!r} "):
            fail_fast(trace_timeout=value)

    @given(
        st.one_of(
            st.floats(min_value=1e-9, allow_infinity=False),
            st.integers(min_value=1),
            st.floats(min_value=1e-6, max_value=1e30).map(np.float32),
            st.integers(min_value=1, max_value=2**62).map(np.int64),
        )
    )
    def test_accepts_any_positive_finite_time(self, value):
        with pytest.raises(RuntimeError):  # the check after the argument's: no client here
            fail_fast(trace_timeout=value)

    @given(st.one_of(st.floats(max_value=0.0), st.integers(max_value=0)))
    def test_refuses_every_time_that_is_not_positive(self, value):
        with pytest.raises(ValueError, match="trace_timeout"):
            fail_fast(trace_timeout=value)

    @given(st.one_of(st.text(), st.booleans(), st.none(), st.lists(st.floats())))
    def test_refuses_every_value_that_is_not_a_number(self, value):
        with pytest.raises(TypeError, match="trace_timeout"):
            fail_fast(trace_timeout=value)

    def test_is_keyword_only(self):
        with pytest.raises(TypeError):
            fail_fast(30.0)  # type: ignore[misc]

    def test_nothing_is_armed_without_a_job(self):
        assert job_failure.armed is False
        assert job_failure.current_job() is None
        assert threading.excepthook is not job_failure._thread_excepthook


# --- the agreement message, from signatures recorded here ----------------------------------


def _signatures():
    """Two traces of one function: x as f32[32,64], then f32[20,64]."""

    def step(batch):
        return batch["x"].sum()

    wrapped = bounded_jit(step, max_traces=2)
    wrapped({"x": jnp.ones((32, 64))})
    wrapped({"x": jnp.ones((20, 64))})
    return step, wrapped.traced_signatures


def _seen(signature):
    return (str(signature).partition(": ")[2], signature)


class TestSignaturesCrossProcesses:
    """What one process sends another compares by value on every JAX: jax 0.11+ interns
    abstract values and compares them by identity (a plain unpickled copy is unequal)."""

    def _sharded_signature(self, mesh):
        step = bounded_jit(lambda batch: batch["x"].sum(), max_traces=1)
        with jax.set_mesh(mesh):
            step({"x": jax.device_put(jnp.ones((16, 3)), P("x")), "t": jax.lax.create_token()})
        return step.traced_signatures[0]

    @pytest.mark.parametrize("kind", [AxisType.Explicit, AxisType.Auto], ids=str)
    def test_a_sent_signature_matches_the_one_it_was_made_from(self, kind):
        mesh = jax.make_mesh((4,), ("x",), axis_types=(kind,), devices=jax.devices()[:4])
        signature = self._sharded_signature(mesh)
        received = pickle.loads(private.portable_dumps(signature))
        assert reuse.matches(signature, received)
        assert reuse.matches(received, pickle.loads(private.portable_dumps(signature)))
        assert list(compare.differences(signature, received)) == []

    def test_a_sent_signature_with_another_shape_still_differs(self):
        _, (first, second) = _signatures()
        received = pickle.loads(private.portable_dumps(second))
        assert not reuse.matches(first, received)
        [difference] = compare.differences(first, received)
        assert (difference.path, difference.kinds) == ("batch['x']", ("shape",))


class TestAgreementMessage:
    def test_names_who_traced_who_did_not_and_the_differences_from_the_shared_trace(self):
        step, (first, second) = _signatures()
        text = trace_agreement.disagreement(
            step, (0, 1, 2), 2, {1: _seen(second), 2: _seen(second)}, [0], [first], 3.0
        )
        lines = text.splitlines()
        assert lines[0].endswith(
            ": the processes of its mesh (0, 1, 2) no longer trace it alike, so their "
            "collectives would hang."
        )
        assert lines[1] == (
            "Trace 2 was made by processes 1, 2 but not by process 0 within trace_timeout=3 s."
        )
        assert lines[2] == "Differences from trace #1, which every process made:"
        assert lines[3] == "  batch['x']: f32[32,64] -> f32[20,64] (shape) on processes 1, 2"
        assert lines[4] == "How to fix:"

    def test_compares_different_signatures_with_the_lowest_process(self):
        step, (first, second) = _signatures()
        seen = {0: _seen(first), 1: _seen(second), 2: _seen(first)}
        text = trace_agreement.disagreement(step, (0, 1, 2), 2, seen, [], [], 3.0)
        lines = text.splitlines()
        assert "within" not in text  # nobody is missing
        assert lines[1] == "Trace 2 has 2 different signatures: processes 0, 2; process 1."
        assert lines[2] == "Differences from the signature of processes 0, 2:"
        assert lines[3] == "  batch['x']: f32[32,64] -> f32[20,64] (shape) on process 1"

    def test_a_first_trace_missing_elsewhere_shows_the_signature(self):
        step, (first, _) = _signatures()
        text = trace_agreement.disagreement(step, (0, 1), 1, {1: _seen(first)}, [0], [], 3.0)
        assert "No earlier trace to compare with; this trace:" in text
        assert "  batch['x']: f32[32,64] on process 1" in text

    def test_signatures_that_do_not_pickle_are_compared_as_text(self):
        step, (first, second) = _signatures()
        seen = {0: (_seen(first)[0], None), 1: (_seen(second)[0], None)}
        text = trace_agreement.disagreement(step, (0, 1), 2, seen, [], [], 3.0)
        assert "Trace 2 has 2 different signatures: process 0; process 1." in text
        assert "  batch['x']: f32[20,64] on process 1" in text


# --- the guide's multi-host section shows the example's real output ------------------------


def test_the_guide_shows_the_real_output_of_the_example():
    """Each job the example runs is the next ``text`` block of the guide's multi-host
    section, verbatim but for times (``TINAX_REGENERATE_DOCS=1`` writes them in)."""
    out = run_example("fail_fast.py")
    path = ROOT / "docs" / "migrating-from-pmap.md"
    page = path.read_text()
    section = page.index("## Many hosts: fail fast")
    jobs = [job.partition("\n") for job in out.split("=== ")[1:]]
    blocks = [(start, end) for start, end in text_blocks(page) if start > section]
    assert len(jobs) == len(blocks) == 4
    if os.environ.get("TINAX_REGENERATE_DOCS") == "1":
        for (start, end), (_, _, body) in reversed(list(zip(blocks, jobs, strict=True))):
            page = page[:start] + body.rstrip() + page[end:]
        path.write_text(page)
        blocks = [(start, end) for start, end in text_blocks(page) if start > section]
    for (start, end), (title, _, body) in zip(blocks, jobs, strict=True):
        if title.strip() == "max_traces=2, without fail_fast" and _hung(body):
            continue  # the guide's other, timing-dependent outcome, which it names
        assert untimed(page[start:end]) == untimed(body.rstrip()), f"{title!r} is out of date"
    assert "--- process 0 (exit status 1)\nstep 0" in out  # with fail_fast: both fail
    assert "  batch['x']: f32[64@data,64] -> f32[40@data,64] (shape) on process 1" in out


class TestAmbientMesh:
    """The private JAX read the trace agreement relies on (`private.ambient_concrete_mesh`)."""

    def test_is_the_mesh_of_jax_set_mesh_also_inside_a_trace(self):
        from tinax._src import private

        mesh = jax.make_mesh((8,), ("x",))
        seen = []

        @jax.jit
        def body(x):
            seen.append(private.ambient_concrete_mesh())
            return x

        assert private.ambient_concrete_mesh() is None
        with jax.set_mesh(mesh):
            assert private.ambient_concrete_mesh() is mesh
            body(jnp.ones(8))
        assert seen == [mesh]

    def test_is_the_bound_mesh_during_a_bound_objects_trace(self):
        from tinax._src import private

        mesh = jax.make_mesh((8,), ("x",))
        seen = []

        def body(x):
            seen.append(private.ambient_concrete_mesh())
            return x

        bounded_jit(body, max_traces=1, mesh=mesh)(jnp.ones(8))
        assert seen == [mesh]


def _hung(body):
    """Both processes ran steps 0 and 1, then hung in mismatched collectives until the
    launcher killed them: the outcome the guide names beside the one it shows."""
    lines = untimed(body.rstrip()).splitlines()
    killed = [f"--- process {index} (exit status -9)" for index in (0, 1)]
    return (
        all(line in lines for line in killed)
        and lines.count("step 1: loss 0.4096") == 2
        and lines[-1].startswith("--- killed by the launcher")
    )
