"""Ending a multi-process JAX job promptly when one process fails: `fail_fast`.

Without it, an uncaught exception on one process of a ``jax.distributed`` job
leaves that process waiting in JAX's shutdown barrier (``shutdown_timeout_seconds``,
300 s by default) while the others wait in their next collective; then every
process dies with SIGABRT, and only the failing one ever printed the reason.

`fail_fast` uses what JAX's Python client offers, its coordination service's
key-value store: a failing process prints its error, writes it into every
other process's inbox key (``tinax/fail_fast/inbox/<process>``), and exits;
one watcher thread per process long-polls its own inbox
(``blocking_key_value_get``, which releases the GIL), prints what arrives and
exits with ``os._exit``, which works while the main thread is blocked in a
collective. The first failure wins the key ``tinax/fail_fast/error``, so a job
where several processes fail at once is ended once, by the first. A process that
ends through ``sys.exit`` with a non-zero status ends the job as a failure does
(`_ExitWatch`); ``sys.exit(0)``, ``sys.exit()`` and the end of the program are clean
exits. A clean exit
wakes its own watcher through its inbox before JAX's own exit handler shuts the
client down, so nothing waits on the store.

Everything here is process-wide, as `sys.excepthook` is. Nothing runs on a
compiled function's call path; at trace time the budget error and the trace
agreement (`trace_agreement`) read one module attribute, `armed`.
"""

from __future__ import annotations

import atexit
import math
import os
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from tinax._src import private
from tinax._src.core.validation import message

_API = "fail_fast"
_PREFIX = "tinax/fail_fast/"
ERROR_KEY = _PREFIX + "error"
_STOP = "\x00stop"  # what a process writes into its own inbox to end its watcher cleanly
_POLL_MS = 60_000  # a long poll: one request a minute per idle watcher
_ACK_TIMEOUT_S = 3.0  # how long a process that ends waits for the others to read the failure
_GONE_TIMEOUT_S = 1.0  # then how long the process hosting the service waits for them to exit
_GONE_GRACE_S = 0.1
_EXIT_STATUS = 1

armed = False  # True while a job of more than one process is watched: read at trace time


def inbox(process: int) -> str:
    """The key a process's watcher waits on."""
    return f"{_PREFIX}inbox/{process}"


def _ack(process: int) -> str:
    return f"{_PREFIX}ack/{process}"


def _gone(process: int) -> str:
    return f"{_PREFIX}gone/{process}"


class Job:
    """One watched ``jax.distributed`` job, as seen from this process."""

    def __init__(self, client: Any, index: int, count: int, trace_timeout: float) -> None:
        self.client = client
        self.index = index
        self.count = count
        self.trace_timeout = trace_timeout
        self.ending = threading.Lock()  # taken by the one thread that ends this process
        self.stopping = False
        self.watcher = threading.Thread(
            target=_watch, args=(self,), name="tinax-fail-fast-watcher", daemon=True
        )

    def current(self) -> bool:
        """Whether JAX's client is still the one this job was armed with."""
        return _distributed_client() is self.client


_job: Job | None = None
_arming = threading.Lock()
_previous_excepthook: Any = sys.excepthook  # what the hooks hand on to when no job is armed
_previous_thread_excepthook: Any = threading.excepthook
_previous_exit: Callable[..., object] = sys.exit
_NO_STATUS = object()  # sys.exit() called without an argument


def current_job() -> Job | None:
    """The armed job, if its client is still JAX's current one."""
    job = _job
    if job is None or not armed or not job.current():
        return None
    return job


def _distributed_client() -> Any:
    return private.distributed_state().client


def check_trace_timeout(value: object) -> float:
    """``value`` as a float number of seconds: positive and finite. Python and NumPy
    integers and floats are accepted; booleans are refused."""
    expected = "a positive, finite number of seconds (int or float; bool is not accepted)"
    kind = type(value)
    if issubclass(kind, bool | np.bool_) or not issubclass(
        kind, int | float | np.integer | np.floating
    ):
        raise TypeError(message(_API, "trace_timeout", expected, value))
    seconds = float(value)  # pyright: ignore[reportArgumentType]
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(message(_API, "trace_timeout", expected, value))
    return seconds


def fail_fast(*, trace_timeout: float = 30.0) -> None:
    """Makes a failure on any process of a ``jax.distributed`` job end every process.

    In a multi-process job an uncaught exception on one process leaves the
    others blocked in their next collective until JAX's timeouts expire
    (minutes), and the reason is printed only where it happened. Call this once,
    right after `jax.distributed.initialize`, on every process. From then on:

    - an uncaught exception in any thread of any process (`sys.excepthook`,
      `threading.excepthook`), or a `TraceBudgetError` (even one the program
      would catch: a process that skips a step while the others run it hangs
      their collectives), ends every process of the job within seconds. Each
      prints one block to stderr naming the failing process, the exception's
      type and message (for a budget error, its whole diagnosis), and exits
      with status 1. The failing process prints the traceback too. Overruns
      under ``on_exceed="warn"`` or ``"log"`` do not raise, so do not end the job.
    - ``sys.exit`` with a status other than 0 on the main thread of any process
      (``sys.exit(3)``, ``sys.exit("message")``) ends every process likewise: each
      prints a block naming the process and its exit status; that process exits
      with its status, the others with 1. A `SystemExit` the program catches,
      ``sys.exit()`` and ``sys.exit(0)`` end nothing; a ``raise SystemExit(3)``
      written out is not seen.
    - every trace of a `BoundedJit` or `BatchedJit` whose mesh (bound, or
      ambient during the trace) has devices of more than one process is checked
      across those processes: if one process traces a signature that the others
      do not trace within ``trace_timeout`` seconds, or they trace different
      signatures, every process prints one message naming the processes that
      traced, those that did not, and the differences, then exits with status 1.
      Objects whose mesh lies on one process's devices are never checked.

    Processes that all finish normally exit as before, and
    `jax.distributed.shutdown` still works. Objects are matched across
    processes by the wrapped function's qualified name, the file name and line
    where the object was built, and the order in which objects were built there.
    Uses JAX's coordination service (its key-value store) through JAX's own
    client, and one watcher thread per process; nothing runs on a compiled
    function's call path.

    Args:
        trace_timeout: Seconds a process that traces a multi-process object
            waits for the other processes of its mesh to trace the same object
            (default 30). Make it longer than the largest lag between processes
            reaching the same step; a later call changes it.

    Raises:
        TypeError: If `trace_timeout` is not an int or float (bool is refused).
        ValueError: If `trace_timeout` is not positive and finite.
        RuntimeError: If `jax.distributed.initialize` has not been called.

    Examples:
        >>> from tinax.parallel import fail_fast
        >>> try:
        ...     fail_fast(trace_timeout=0)
        ... except ValueError as error:
        ...     print(str(error).partition(" must ")[0])
        fail_fast: trace_timeout
    """
    global _job, armed, _previous_excepthook, _previous_thread_excepthook, _previous_exit
    seconds = check_trace_timeout(trace_timeout)
    state = private.distributed_state()
    client = state.client
    if client is None:
        raise RuntimeError(
            "fail_fast: the JAX distributed client is not initialized; call "
            "jax.distributed.initialize(...) first, then fail_fast(), on every process."
        )
    count = int(state.num_processes)
    if count < 2:
        return  # one process: nothing to end, nothing to agree with
    with _arming:
        job = _job
        if job is not None and job.client is client:
            job.trace_timeout = seconds
            return
        if job is not None:  # a job shut down and initialized again: its watcher has ended
            job.stopping = True
        job = Job(client, int(state.process_id), count, seconds)
        if _job is None:
            _previous_excepthook, _previous_thread_excepthook = sys.excepthook, threading.excepthook
            _previous_exit = sys.exit
            sys.excepthook = _excepthook
            threading.excepthook = _thread_excepthook
            sys.exit = _exit_hook
            atexit.register(_stop_watching)  # runs before JAX's own exit handler (registered first)
        _job = job
        armed = True
        job.watcher.start()


# --- the blocks printed ---------------------------------------------------------------------


def _heading(index: int, count: int, what: str) -> str:
    return f"tinax.parallel.fail_fast: process {index} of {count} {what}; ending every process."


def _exception_text(kind: type[BaseException], value: BaseException | None) -> str:
    try:
        return "".join(traceback.format_exception_only(kind, value)).rstrip("\n")
    except Exception:
        return kind.__qualname__


def _traceback_text(
    kind: type[BaseException], value: BaseException | None, tb: types.TracebackType | None
) -> str:
    try:
        return "".join(traceback.format_exception(kind, value, tb)).rstrip("\n")
    except Exception:
        return _exception_text(kind, value)


def _in_thread(thread: threading.Thread | None) -> str:
    if thread is None or thread is threading.main_thread():
        return ""
    return f" in thread {thread.name!r}"


def _print(text: str) -> None:
    try:
        sys.stdout.flush()
    except Exception:
        pass
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except Exception:
        pass


# --- ending the job -------------------------------------------------------------------------


def _exit(status: int = _EXIT_STATUS) -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)  # pyright: ignore[reportPrivateUsage]


def _wait_forever() -> None:
    """Another thread of this process is ending it."""
    threading.Event().wait()


def _publish(job: Job, text: str) -> str | None:
    """Writes ``text`` as the job's failure and into every other process's inbox.

    Returns ``None`` when this process's failure is the first, else the first
    failure's text (which that process delivers).
    """
    client = job.client
    try:
        client.key_value_set(ERROR_KEY, text)
    except Exception:  # another process failed first (or the service is gone)
        try:
            return client.key_value_try_get(ERROR_KEY)
        except Exception:
            return None
    for process in range(job.count):
        if process != job.index:
            try:
                client.key_value_set(inbox(process), text, allow_overwrite=True)
            except Exception:
                pass
    return None


def _wait_for(job: Job, key: Callable[[int], str], seconds: float) -> None:
    """Waits until every other process has written ``key(process)``, or ``seconds`` passed."""
    deadline = time.monotonic() + seconds
    for process in range(job.count):
        if process == job.index:
            continue
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            return
        try:
            job.client.blocking_key_value_get(key(process), left_ms)
        except Exception:
            pass


def _leave(job: Job, status: int = _EXIT_STATUS) -> None:
    """Exits this process once every process has read the failure (or a few seconds
    passed): a process that leaves a collective early can abort its peers before they
    print, and the process hosting the coordination service leaves last, since the
    others' JAX clients abort their process when the service goes away."""
    try:
        job.client.key_value_set(_ack(job.index), "read", allow_overwrite=True)
        _wait_for(job, _ack, _ACK_TIMEOUT_S)
        if private.distributed_state().service is None:
            job.client.key_value_set(_gone(job.index), "gone", allow_overwrite=True)
        else:
            _wait_for(job, _gone, _GONE_TIMEOUT_S)
            time.sleep(_GONE_GRACE_S)  # from their last word to their exit
    except Exception:
        pass
    finally:
        _exit(status)


def fail(job: Job, local_text: str, shared_text: str, status: int = _EXIT_STATUS) -> None:
    """Ends the job for a failure on this process: prints ``local_text`` here, sends
    ``shared_text`` to every other process, and exits with ``status``. Never returns."""
    if not job.ending.acquire(blocking=False):
        _wait_forever()
    try:
        _print(local_text)
        _publish(job, shared_text)
    finally:
        _leave(job, status)


def fail_agreed(job: Job, text: str) -> None:
    """Ends the job for a failure every process must report alike (traces that
    disagree): the first report wins, and is what this process prints. Never returns."""
    if not job.ending.acquire(blocking=False):
        _wait_forever()
    try:
        first = _publish(job, text)
        _print(text if first is None else first)
    finally:
        _leave(job)


def _failure_texts(
    job: Job,
    kind: type[BaseException],
    value: BaseException | None,
    tb: types.TracebackType | None,
    thread: threading.Thread | None,
) -> tuple[str, str]:
    heading = _heading(job.index, job.count, f"failed{_in_thread(thread)}")
    return (
        f"{heading}\n{_traceback_text(kind, value, tb)}",
        f"{heading}\n{_exception_text(kind, value)}",
    )


def budget_error(error: BaseException) -> None:
    """Ends the job for a trace refused by its budget (called before it is raised)."""
    job = current_job()
    if job is None:
        return
    heading = _heading(job.index, job.count, f"failed{_in_thread(threading.current_thread())}")
    text = f"{heading}\n{_exception_text(type(error), error)}"
    fail(job, text, text)


def _excepthook(
    kind: type[BaseException], value: BaseException, tb: types.TracebackType | None
) -> None:
    job = current_job()
    if job is None:
        _previous_excepthook(kind, value, tb)
        return
    fail(job, *_failure_texts(job, kind, value, tb, threading.main_thread()))


def _thread_excepthook(args: threading.ExceptHookArgs) -> None:
    job = current_job()
    if job is None or issubclass(args.exc_type, SystemExit):
        _previous_thread_excepthook(args)
        return
    fail(job, *_failure_texts(job, args.exc_type, args.exc_value, args.exc_traceback, args.thread))


# --- sys.exit with a failure status ---------------------------------------------------------


def exit_status(code: object) -> int:
    """The status a process exits with when ``SystemExit(code)`` ends it, as CPython
    computes it and the operating system reports it: ``None`` is 0, an int is itself
    (on POSIX, its low 8 bits), anything else is 1 (Python prints it)."""
    if code is None:
        return 0
    if not isinstance(code, int):
        return 1
    bits = 64 if os.name == "posix" else 32  # CPython reads a C long; -1 past its range
    status = code if -(2 ** (bits - 1)) <= code < 2 ** (bits - 1) else -1
    if os.name == "posix":
        return status & 0xFF
    return (status + 2**31) % 2**32 - 2**31  # the C int that long is cast to


class _ExitWatch:
    """Rides on the `SystemExit` of ``sys.exit(code)`` with a failure status, in its
    ``__dict__``, and ends the job when the interpreter discards that exception at the
    top of the main thread, that is when the exception ends the program.

    An uncaught `SystemExit` never reaches ``sys.excepthook``, and nothing tells an
    ``atexit`` handler the status, so the moment it is discarded is the one sign:
    the interpreter drops it with no Python frame left on the main thread, before the
    threads are joined and the ``atexit`` handlers (JAX's shutdown barrier among them)
    run. A `SystemExit` the program catches is dropped inside the program's frames
    (or kept), and ends nothing.
    """

    __slots__ = ("status", "text")

    def __init__(self, status: int, text: str) -> None:
        self.status = status
        self.text = text

    def __del__(self) -> None:
        try:
            frame = sys._getframe(0)  # pyright: ignore[reportPrivateUsage]
        except Exception:
            return
        if frame.f_back is not None or threading.current_thread() is not threading.main_thread():
            return
        job = current_job()
        if job is None:
            return
        heading = _heading(job.index, job.count, f"exited with status {self.status}")
        text = f"{heading}\n{self.text}"
        fail(job, text, text, self.status)


def _exit_hook(status: object = _NO_STATUS, /) -> None:
    """``sys.exit`` while `fail_fast` is armed: as before, and its `SystemExit` carries
    an `_ExitWatch` when its status is a failure."""
    try:
        if status is _NO_STATUS:
            _previous_exit()
        else:
            _previous_exit(status)
    except SystemExit as error:
        code = error.code
        failed = exit_status(code)
        if failed != 0 and current_job() is not None:
            watch = _ExitWatch(failed, _exception_text(SystemExit, error))
            error.__dict__["_tinax_fail_fast"] = watch
        raise


# --- the watcher ----------------------------------------------------------------------------


def _watch(job: Job) -> None:
    """Waits for a failure elsewhere; prints it and ends this process."""
    key = inbox(job.index)
    while True:
        try:
            text = job.client.blocking_key_value_get(key, _POLL_MS)
        except Exception as error:  # a timeout, or the client was shut down
            if job.stopping or not job.current():
                return
            if "DEADLINE_EXCEEDED" not in str(error):
                time.sleep(0.5)  # the client is shutting down, or the service is unreachable
                if job.stopping or not job.current():
                    return
            continue
        if text == _STOP:
            return
        if not job.ending.acquire(blocking=False):
            return  # this process is already ending itself
        try:
            _print(text)
        finally:
            _leave(job)


def _stop_watching() -> None:
    """At a clean exit: wakes this process's watcher and lets it end, before JAX shuts
    its client down (a thread blocked in the client at interpreter exit aborts it)."""
    global armed
    job = _job
    armed = False
    if job is None or not job.watcher.is_alive():
        return
    job.stopping = True
    if job.current():
        try:
            job.client.key_value_set(inbox(job.index), _STOP, allow_overwrite=True)
        except Exception:
            return
    job.watcher.join(timeout=5.0)
