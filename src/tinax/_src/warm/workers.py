"""The background threads of a warm start: the workers that run warm compiles
(`Workers`), and the writer of the manifest (`Writer`)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

_WRITE_DELAY = 0.25  # seconds from a trace to its write: the traces of a burst, one write


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
        while True:
            self._wanted.wait()
            time.sleep(_WRITE_DELAY)
            self._wanted.clear()  # what comes from now on wakes it again
            self._write()
