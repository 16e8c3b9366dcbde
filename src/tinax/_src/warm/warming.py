"""One object's warm compiles, and its call until they are confirmed (`Warming`): the
object's call waits for them, and each warm trace is checked at the first call that would
run from it, through the object's seams (`objects.handle.Seams`)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from tinax._src import private
from tinax._src.observe.log import logger
from tinax._src.warm import same

if TYPE_CHECKING:
    from tinax._src.objects.handle import Handle

_WATCHED_CALLS = 16  # calls that may confirm warm traces before the call is the jax.jit's
thread_state = threading.local()  # ``warming``: this thread runs a warm compile


# A warm trace: its arguments, its JAX stage, the mesh it was made under (or None)
Made = tuple[tuple[Any, ...], dict[str, Any], Any, Any]


def _no_call(*args: Any, **kwargs: Any) -> Any:
    """A warm start's call before it gates the object's (never run: `Warming.install`
    gates at once, and an object gone by then has no call left to run)."""
    raise ReferenceError("the budgeted object is gone")


class Warming:
    """The warm compiles of one object, and its call until they are confirmed.

    While a warm compile runs, the object's call is `call`, which waits for them
    all (a call never traces what a warm compile is tracing). Each warm trace is
    checked at the first call that would run from it (`_check`): the function is
    traced again, now, outside JAX's caches and not counted, and the two are
    compared (`same.same_stage`); where they differ (the program set what the
    function reads after the warm trace), the warm trace is dropped (`_drop`) and
    the call traces and compiles as without warm start. Each warm trace is
    lent to the budget (`Ledger.lend`) until a call runs from it: a call that
    makes no trace is matched, as ``explain`` matches it, to the trace it ran from.
    Once none is provisional, or after `_WATCHED_CALLS` calls, the original call (the
    `jax.jit` object) is put back, so cached calls cost what they cost without warm
    start; warm traces no call has checked by then are dropped. A provisional trace
    gives its place in the budget to a call's trace that would exceed it
    (`budget.counting`): a stale manifest never refuses a call.
    """

    __slots__ = (
        "__weakref__",
        "_calls",
        "_checking",
        "_done",
        "_handle",
        "_ledger",
        "_left",
        "_lock",
        "_name",
        "_original",
        "_unchecked",
        "_used",
    )

    def __init__(self, handle: Handle, count: int, used: Callable[[], None], name: str) -> None:
        self._handle = handle
        self._used = used  # a call ran from a warm trace: the manifest has news
        self._ledger = handle.ledger
        self._name = name
        self._original: Callable[..., Any] = _no_call  # the object's call, once gated
        self._left = count
        self._calls = 0
        self._lock = threading.Lock()
        self._checking = threading.Lock()  # one check at a time; calls wait for it
        self._done = threading.Event()
        # warm traces no call has checked: number -> (its arguments, its JAX stage)
        self._unchecked: dict[int, Made] = {}

    def install(self) -> None:
        """Makes `call` the object's call, and `check` its stages' (`Seams.gate`: the
        object's own call is built now, in the building thread, if not yet)."""
        handle = self._handle
        original = handle.seams.gate(handle, self.call, self.check)
        if original is not None:
            self._original = original

    def check(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """``lower``, ``trace``, ``precompile`` and ``eval_shape`` check the warm trace
        they would use as a call does (not in a warm compile's own thread)."""
        if getattr(thread_state, "warming", False):
            return
        self._done.wait()
        if self._unchecked:
            self._check(args, kwargs)

    def call(self, *args: Any, **kwargs: Any) -> Any:
        self._done.wait()
        if self._unchecked:
            self._check(args, kwargs)
        ledger = self._ledger
        before = ledger.used
        out = self._original(*args, **kwargs)
        self._confirm(args, kwargs, traced=ledger.used != before)
        return out

    def _check(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Before a call runs from a warm trace: the function traced again now, and
        compared; a warm trace that differs is dropped. Where the call's signature
        cannot be matched to a trace, every unchecked warm trace is dropped."""
        with self._checking:
            handle = self._handle
            if handle.public() is None or not self._unchecked:
                return
            seams = handle.seams
            try:
                number = seams.reused(handle, args, kwargs)
            except Exception:  # not known which trace it runs from: none unchecked
                for found in list(self._unchecked):
                    self._drop(found, None, "a call's signature could not be read")
                return
            if number is None or number not in self._unchecked:
                return
            warm = self._unchecked[number][2]
            fresh: Any = None
            try:
                fresh = seams.fresh_stage(handle, args, kwargs)
                equal = same.same_stage(warm, fresh)
            except Exception:  # the call raises it, or JAX moved: traced as it would be
                equal = False
            if equal:
                del self._unchecked[number]
                return
            if fresh is not None:  # what the step calls through JAX's caches traces anew too
                private.forget_nested(fresh)
            self._drop(
                number,
                (args, kwargs),
                "what the function reads changed between the warm trace and its first call, "
                "or may have (the program set a global, an attribute or a static it reads "
                "after the warm trace, or can fill a NumPy array it reads in place)",
            )

    def _drop(
        self,
        number: int,
        call: tuple[tuple[Any, ...], dict[str, Any]] | None,
        why: str,
    ) -> None:
        """Warm trace ``number`` leaves JAX's caches, the budget, the history and the
        compile count: the next call of its signature traces as without warm start."""
        args, kwargs, stage, mesh = self._unchecked.pop(number)
        if call is not None:  # in the call's context, with its arguments: the call's key
            args, kwargs, mesh = *call, None
        given_back = self._ledger.gave_back(number)  # its place was given, and said
        handle = self._handle
        with ambient(mesh) if mesh is not None else contextlib.nullcontext():  # the warm key
            handle.seams.forget_trace(handle, args, kwargs, stage.jaxpr, number)
        logger.log(
            logging.DEBUG if given_back else logging.INFO,
            "tinax warm start: %s: trace %d, made ahead as the object was built, is dropped "
            "unused: %s; a call of its signature traces and compiles then, as without "
            "warm start",
            self._name,
            number,
            why,
        )

    def _confirm(self, args: tuple[Any, ...], kwargs: dict[str, Any], *, traced: bool) -> None:
        ledger = self._ledger
        with self._lock:
            self._calls += 1
            calls = self._calls
        if ledger.lent and not traced:
            handle = self._handle
            try:
                alive = handle.public() is not None
                reused = handle.seams.reused(handle, args, kwargs) if alive else None
            except Exception:  # donated arrays, odd leaves: left provisional
                reused = None
            if reused is not None and ledger.confirm(reused):
                self._used()
        if not ledger.lent or calls >= _WATCHED_CALLS:
            self._restore()

    def _restore(self) -> None:
        handle = self._handle
        seams = handle.seams
        if not seams.gated(handle, self.call):
            return
        with self._checking:  # unchecked: never run unchecked, by a call of the jax.jit
            for number in list(self._unchecked):
                self._drop(number, None, "no call ran from it in the object's first calls")
        seams.ungate(handle, self._original)

    def finished_one(self, number: int | None, made: Made | None) -> None:
        """A warm compile ended: ``number`` is the trace it made (``made``: its arguments
        and JAX stage), ``None`` if it failed or made none."""
        ledger = self._ledger
        if number is not None and made is not None:
            with self._checking:
                self._unchecked[number] = made
            ledger.lend(number)
        with self._lock:
            self._left -= 1
            last = self._left == 0
        if last:
            if not ledger.lent:  # nothing to confirm: the jax.jit object at once
                self._restore()
            self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)


@contextlib.contextmanager
def ambient(mesh: Any) -> Generator[None]:
    previous = private.enter_mesh(mesh)
    try:
        yield
    finally:
        private.restore_mesh(previous)
