"""The ledger: the count of a budgeted object (traces committed and in flight, history),
shared by the counted function, the observers and the
introspection. Other layers keep their own state for the object on its `handle`."""

from __future__ import annotations

import threading

from tinax._src.diagnosis.record import TracedSignature


class Ledger:
    """The mutable part of a budgeted object: count, in-flight traces, history.

    A trace reserves its slot before the body runs and commits it after the
    body returns, all under one lock, so concurrent traces from several threads
    never exceed the budget, and a trace whose body raises gives its slot back.
    """

    __slots__ = (
        "__weakref__",
        "cleared",
        "given_back",
        "history",
        "in_flight",
        "lock",
        "threaded",
        "used",
    )

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.used = 0  # traces committed: the number of the latest
        self.in_flight = 0
        self.history: list[TracedSignature] = []
        self.cleared = 0  # traces #1..#cleared are no longer in JAX's cache (clear_cache)
        self.given_back = 0  # traces whose compile failed, out of the budget (`give_back`)
        self.threaded = False  # compiles ran at once in threads (precompile_buckets)

    @property
    def counted(self) -> int:
        """The traces that count against the budget: every trace but those given back."""
        return self.used - self.given_back

    def give_back(self, number: int) -> None:
        """Trace ``number``, whose compile failed (``precompile_buckets``), no longer
        counts against the budget; it stays in the history, as the trace it was."""
        with self.lock:
            if any(entry.number == number for entry in self.history):
                self.given_back += 1

    def snapshot(self) -> tuple[tuple[TracedSignature, ...], int, int, int]:
        """``(history, traces counted in the budget, the count the next trace would make,
        traces cleared from JAX's cache)``, read at once."""
        with self.lock:
            counted = self.used - self.given_back
            attempt = counted + self.in_flight + 1
            return tuple(self.history), counted, attempt, self.cleared

    def clear(self) -> None:
        """Notes that JAX's cache of this object was emptied: no trace so far can be
        reused, and ``explain`` must say so."""
        with self.lock:
            self.cleared = self.used

    def add_compile_seconds(self, entry: TracedSignature, seconds: float) -> TracedSignature | None:
        """Adds compile time to ``entry`` of the history (replaced: signatures are
        frozen); returns the new entry, or ``None`` if ``entry`` is no longer there."""
        with self.lock:
            history = self.history
            for index in range(len(history) - 1, -1, -1):
                if history[index] is entry:
                    total = (entry.compile_seconds or 0.0) + seconds
                    history[index] = entry.numbered(entry.number, compile_seconds=total)
                    return history[index]
        return None
