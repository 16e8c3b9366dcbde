"""The background threads of a warm start: the workers that run warm compiles
(`Workers`), and the writer of the manifest (`Writer`)."""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
import time
from collections.abc import Callable

_WRITE_DELAY = 0.25  # seconds from a trace to its write: the traces of a burst, one write
_NICE = 19  # the lowest priority: a compile ahead takes only the CPU the program leaves


def background() -> None:
    """Lowers the calling thread's scheduling priority to the lowest, on Linux, where a
    thread's nice value is its own (elsewhere `setpriority` given a thread's id could
    name a process: nothing changes there). A compile ahead then runs on what the
    program leaves idle: beside a compile of the program's own it took 1.2 to 1.3 of
    that compile's time alone where at the same priority it took 1.8 to 2.2 (two
    300-op compiles ahead, 2 cores). Where the system does not allow it, nothing
    changes."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _NICE)


class Workers:
    """A few daemon threads that run warm compiles, started on the first task. Daemon:
    a program that ends before its warm compiles are done is not held up by them."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._started = False
        self._lock = threading.Lock()
        self.stopped = False

    def submit(self, task: Callable[[], None]) -> None:
        with self._lock:
            if not self._started:
                self._started = True
                for index in range(self._count):
                    thread = threading.Thread(
                        target=self._run, name=f"tinax-warm-start-{index}", daemon=True
                    )
                    thread.start()
        self._tasks.put(task)

    def _run(self) -> None:
        background()
        while True:
            task = self._tasks.get()
            if task is None or self.stopped:
                return
            task()


class Writer:
    """A daemon thread that writes the manifest `_WRITE_DELAY` seconds after it is
    woken (a trace, a warm trace a call ran from), off the call path: a trace costs a
    `threading.Event.set`, a cached call nothing. Woken again while writing, it writes
    again. Daemon: it never holds up the exit, whose own write comes last."""

    def __init__(self, write: Callable[[], None]) -> None:
        self._write = write
        self._wanted = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def wake(self) -> None:
        self._wanted.set()
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="tinax-warm-start-writer", daemon=True
                    )
                    self._thread.start()

    def _run(self) -> None:
        background()
        while True:
            self._wanted.wait()
            time.sleep(_WRITE_DELAY)
            self._wanted.clear()  # what comes from now on wakes it again
            self._write()
