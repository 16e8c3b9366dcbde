"""The ledger: the count of a budgeted object (traces committed and in flight, history,
the traces warm start lent it), shared by the counted function, the observers and the
introspection. Other layers keep their own state for the object on its `handle`."""

from __future__ import annotations

import threading

from tinax._src.diagnosis.record import TracedSignature


class Ledger:
    """The mutable part of a budgeted object: count, in-flight traces, history.

    A trace reserves its slot before the body runs and commits it after the
    body returns, all under one lock, so concurrent traces from several threads
    never exceed the budget, and a trace whose body raises gives its slot back.

    Warm start's traces are lent to the budget (`lend`) until a call runs from one
    (`confirm`); one no call used gives its place to a call's trace that would
    exceed the budget (`repay_one`), or is dropped (`forget`).
    """

    __slots__ = (
        "__weakref__",
        "_given_back",
        "_provisional",
        "cleared",
        "history",
        "in_flight",
        "lock",
        "used",
    )

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.used = 0  # traces committed: the number of the latest
        self._given_back: set[int] = set()  # warm-start traces no call used, out of the budget
        self._provisional: set[int] = set()  # warm-start traces no call has used yet
        self.in_flight = 0
        self.history: list[TracedSignature] = []
        self.cleared = 0  # traces #1..#cleared are no longer in JAX's cache (clear_cache)

    @property
    def counted(self) -> int:
        """Traces that count in the budget: those committed, less the warm-start traces
        that gave their place back."""
        return self.used - len(self._given_back)

    @property
    def given_back_count(self) -> int:
        """How many warm-start traces gave their place in the budget back."""
        return len(self._given_back)

    @property
    def lent(self) -> bool:
        """Whether a warm-start trace no call has used yet is in the budget."""
        return bool(self._provisional)

    def lend(self, number: int) -> None:
        """Trace ``number`` is warm start's: in the budget until a call runs from it."""
        with self.lock:
            self._provisional.add(number)

    def confirm(self, number: int) -> bool:
        """A call ran from trace ``number``: whether it was a warm trace no call had used."""
        with self.lock:
            lent = number in self._provisional
            self._provisional.discard(number)
            return lent

    def repay_one(self) -> int | None:
        """The oldest warm trace no call used gives its place in the budget back; its
        number, or ``None`` if there is none. The caller holds the lock."""
        if not self._provisional:
            return None
        number = min(self._provisional)
        self._provisional.discard(number)
        self._given_back.add(number)
        return number

    def forget(self, number: int) -> None:
        """Trace ``number``, which no call ran, leaves the budget and the history."""
        with self.lock:
            self._provisional.discard(number)
            self._given_back.add(number)
            self.history[:] = [entry for entry in self.history if entry.number != number]

    def gave_back(self, number: int) -> bool:
        """Whether trace ``number`` gave its place in the budget back."""
        with self.lock:
            return number in self._given_back

    def settled(self, number: int) -> bool:
        """Whether trace ``number`` ran a call: neither lent still nor given back."""
        with self.lock:
            return number not in self._provisional and number not in self._given_back

    def snapshot(self) -> tuple[tuple[TracedSignature, ...], int, int, int]:
        """``(history, traces counted in the budget, the count the next trace would make,
        traces cleared from JAX's cache)``, read at once."""
        with self.lock:
            counted = self.counted
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
