"""What an audit hears while it is open: every trace of every user's jitted function, with
the abstract signature tinax's diagnosis compares, its call site and the seconds its trace,
lowering and compile took. Nothing is compared or written here: that waits for a reader."""

from __future__ import annotations

import inspect
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs
import jax

from tinax._src import private
from tinax._src.core.statics import Statics
from tinax._src.diagnosis import names
from tinax._src.diagnosis.record import TracedSignature, record
from tinax._src.observe import sites

_TINAX_SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

JAX_JIT, EQUINOX, NNX, TINAX = "jax.jit", "equinox.filter_jit", "nnx.jit", "tinax"


@attrs.define(eq=False)
class Span:
    """One timed step of a trace: ``kind`` is ``trace``, ``lower`` or ``compile``;
    ``start`` is seconds from the audit's opening."""

    kind: str
    start: float
    seconds: float


@attrs.define(eq=False)
class Trace:
    """One trace as heard (mutable until the audit closes)."""

    number: int
    signature: TracedSignature | None  # None: the arguments could not be read
    function_id: int  # the function object jax.jit traced (a new one retraces)
    called_at: str
    nested: bool
    thread: int
    spans: list[Span] = attrs.Factory(list[Span])
    compiles: int = 0
    failed: bool = False

    def seconds(self, kind: str | None = None) -> float:
        return sum(span.seconds for span in self.spans if kind is None or span.kind == kind)


@attrs.define(eq=False)
class Book:
    """Every trace of one function (its name and where it is defined)."""

    name: str
    defined_at: str
    kind: str  # JAX_JIT, EQUINOX, NNX or TINAX
    statics: Statics
    traces: list[Trace] = attrs.Factory(list[Trace])
    ids: set[int] = attrs.Factory(set[int])  # the jitted function objects of its traces


class _Current(threading.local):
    trace: Trace | None = None
    name: str = ""


class Recorder:
    """The listener an audit installs: one `Book` per user function, in first-trace order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.books: dict[tuple[str, str, str, Statics], Book] = {}
        self.by_function: dict[int, Book] = {}  # id of the function jax.jit traces
        self.opened = time.perf_counter()
        self.closed: float | None = None
        self.unattributed = 0.0  # lowering and compile seconds of no recorded function
        # the functions traced, held while the audit is open so that no id is reused
        self._held: dict[int, object] = {}
        self._current = _Current()
        self._remove: Callable[[], None] | None = None

    # --- installing ---------------------------------------------------------------------

    def open(self) -> None:
        self._remove = private.hook_traces(self.on_trace)
        monitoring: Any = jax.monitoring
        monitoring.register_event_duration_secs_listener(self.on_duration)

    def close(self) -> None:
        monitoring: Any = jax.monitoring
        try:
            monitoring.unregister_event_duration_listener(self.on_duration)
        except (AssertionError, ValueError):  # already gone (jax.monitoring cleared)
            pass
        if self._remove is not None:
            self._remove()
            self._remove = None
        self.closed = time.perf_counter()
        with self.lock:
            self._held.clear()
            self.by_function.clear()

    # --- hearing ------------------------------------------------------------------------

    def on_trace(self, call: private.JitTrace, run: Callable[[], Any]) -> Any:
        if private.jax_internal(call.function):
            return run()
        try:
            trace = self._begin(call)
        except Exception:  # a program the audit cannot read runs as it would
            return run()
        start = time.perf_counter()
        try:
            return run()
        except BaseException:
            trace.failed = True
            raise
        finally:
            end = time.perf_counter()
            trace.spans.append(Span("trace", start - self.opened, end - start))

    def _begin(self, call: private.JitTrace) -> Trace:
        unpacked = private.equinox_call(call)
        if unpacked is not None:
            function, args, kwargs = unpacked
            kind = EQUINOX
            signature = _signature(function)
            statics = Statics((), (), nonarrays=True)
        else:
            function = private.unwrapped(call.function)
            args, kwargs = call.args, call.kwargs
            kind = _kind(call.function)
            signature = call.signature
            statics = Statics(call.static_argnums, call.static_argnames)
        name, defined_at, _ = names.where(function)
        key = (name, defined_at or "?", kind, statics)
        called_at = sites.site_of(sys._getframe(1)) or "?"  # pyright: ignore[reportPrivateUsage]
        try:
            traced: TracedSignature | None = record(signature, statics, args, kwargs)
        except Exception:  # arguments tinax cannot read: the trace still counts
            traced = None
        with self.lock:
            book = self.books.get(key)
            if book is None:
                book = self.books[key] = Book(name, key[1], kind, statics)
            number = len(book.traces) + 1
            if traced is not None:
                traced = traced.numbered(number, call_site=called_at)
            trace = Trace(
                number,
                traced,
                id(call.function),
                called_at,
                call.nested,
                threading.get_ident(),
            )
            book.traces.append(trace)
            book.ids.add(id(call.function))
            self.by_function[id(call.function)] = book
            self._held[id(call.function)] = call.function
        if not call.nested:
            self._current.trace = trace
            self._current.name = call.source.partition(" at ")[0]
        return trace

    def on_duration(self, event: str, duration: float, **metadata: Any) -> None:
        if event == private.LOWER_EVENT:
            kind = "lower"
        elif event == private.COMPILE_EVENT:
            kind = "compile"
        else:
            return
        end = time.perf_counter() - self.opened
        trace = self._attributed(str(metadata.get("fun_name", "")))
        if trace is None:
            with self.lock:
                self.unattributed += duration
            return
        with self.lock:
            trace.spans.append(Span(kind, end - duration, duration))
            if kind == "compile":
                trace.compiles += 1

    def _attributed(self, event_name: str) -> Trace | None:
        """The trace a lowering or compile belongs to: the latest of the function whose
        `jax.jit` call missed its cache, else this thread's latest trace where the
        event names its function."""
        call = private.jit_call(sys._getframe(2))  # pyright: ignore[reportPrivateUsage]
        if call is not None and call.function is not None:
            with self.lock:
                book = self.by_function.get(id(call.function))
            if book is not None:
                mine = [t for t in book.traces if t.function_id == id(call.function)]
                return mine[-1] if mine else book.traces[-1]
            if private.jax_internal(call.function):
                return None
        current = self._current.trace
        if current is not None and self._current.name and self._current.name in event_name:
            return current
        return None


def _signature(function: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return None


def _kind(function: Callable[..., Any]) -> str:
    module = getattr(type(function), "__module__", "") or ""
    if module.startswith("flax"):
        return NNX
    if module.startswith("tinax."):  # the counted function, as jax.jit is given it
        return TINAX
    code: Any = getattr(function, "__code__", None)
    filename = getattr(code, "co_filename", "")
    if isinstance(filename, str) and filename.startswith(_TINAX_SRC):
        return TINAX
    return JAX_JIT
