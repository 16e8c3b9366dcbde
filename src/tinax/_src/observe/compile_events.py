"""JAX's compile events (`jax.monitoring`), read for the trace that caused them: loads from
JAX's persistent compilation cache told apart from compiles, and XLA compile time.

**Loads.** JAX reports a load from its persistent cache (``jax_compilation_cache_dir``)
with the same event as an XLA compile (`private.COMPILE_EVENT`): both end the
same ``compile_or_get_cached`` call. A load records one more event, in the same
thread, before the compile event ends (`private.CACHE_HIT_EVENT`). This module
keeps, per thread, whether the compile in progress was answered that way:
`loaded` is what every listener of the compile's end asks (``cache_loads`` counts
them). The mark is cleared when the next compile in the thread starts (or, on a JAX
that does not record a compile's start, at its next request to the persistent cache),
so listeners may ask in any order, as often as they like.

**Compile time.** XLA compile durations are attributed to the trace that caused them
(`await_compile` after a trace is counted); loads are not compile time.

Nothing here runs on a cached call: JAX records these events only when it
compiles (or loads).
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

import jax
import jax.monitoring

from tinax._src import private

if TYPE_CHECKING:
    from tinax._src.diagnosis.record import TracedSignature
    from tinax._src.objects.ledger import Ledger

# --- loads from the persistent cache ------------------------------------------------------


class _Loaded(threading.local):
    loaded: bool = False  # the compile in progress in this thread was a cache load
    ahead: bool = False  # it was answered by an executable warm start compiled ahead


_loaded = _Loaded()


def _on_event(event: str, **metadata: object) -> None:
    if event == private.CACHE_HIT_EVENT:
        _loaded.loaded = True
    elif event == private.CACHE_REQUEST_EVENT:
        _loaded.loaded = False


def _on_start(event: str, value: float, **metadata: object) -> None:
    if event == private.COMPILE_EVENT:
        _loaded.loaded = False
        _loaded.ahead = False


def note_ahead() -> None:
    """The compile in progress in this thread is answered by an executable warm start
    compiled ahead: the call compiles (and loads) nothing (`ahead`)."""
    _loaded.ahead = True
    _loaded.loaded = False


def ahead() -> bool:
    """Whether the compile that ends now, in this thread, was answered by an executable
    compiled ahead by warm start (no XLA compile and no load at the call)."""
    return _loaded.ahead


def loaded() -> bool:
    """Whether the compile that ends now, in this thread, was a load from JAX's persistent
    compilation cache (ask from a listener of `private.COMPILE_EVENT`'s duration)."""
    return _loaded.loaded


jax.monitoring.register_event_listener(_on_event)
jax.monitoring.register_scalar_listener(_on_start)


# --- compile time ----------------------------------------------------------------------

_TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
_COMPILE_EVENT = private.COMPILE_EVENT


class _Pending(threading.local):
    """Per thread: ``(ledger, trace, name, own trace event seen)`` awaiting its compile,
    the ledger and the trace held weakly: an object dropped before its compile (traced
    by ``eval_shape``, say) leaves nothing here."""

    pending: tuple[weakref.ref[Ledger], weakref.ref[TracedSignature], str, bool] | None = None


_local = _Pending()


def _compiled_as(event_name: object, name: str) -> bool:
    """Whether a compile event's ``fun_name`` (``jit(step)``, ``jit_step``) names ``name``."""
    if not isinstance(event_name, str):
        return True  # a JAX that does not name it: the thread's last trace it is
    return event_name == name or event_name.endswith(f"({name})") or event_name == f"jit_{name}"


def _on_duration(event: str, duration_secs: float, **metadata: str | int) -> None:
    """Adds XLA compile time to the trace that caused it: the last trace counted in
    this thread, when the compiled module carries its name. A load from JAX's
    persistent compilation cache (`loaded`) is no compile: it adds nothing.

    After the trace, JAX reports at most one trace event, for the trace itself
    (none when it ran under `jax.grad` or `jax.vmap`); a further trace event,
    for any function, means the program has moved on, and ends the attribution.
    """
    try:
        pending = _local.pending
        if pending is None:
            return
        ledger_ref, entry_ref, name, own_event_seen = pending
        if event == _TRACE_EVENT:
            if own_event_seen or metadata.get("fun_name") != name:
                _local.pending = None
            else:
                _local.pending = (ledger_ref, entry_ref, name, True)
            return
        if event != _COMPILE_EVENT or not _compiled_as(metadata.get("fun_name"), name):
            return
        if loaded() or ahead():  # a load, or warm start's executable: no compile time
            return
        ledger, entry = ledger_ref(), entry_ref()
        if ledger is None or entry is None:  # the object is gone: nothing to attribute
            _local.pending = None
            return
        updated = ledger.add_compile_seconds(entry, duration_secs)
        _local.pending = (
            None if updated is None else (ledger_ref, weakref.ref(updated), name, own_event_seen)
        )
    except Exception:  # a listener must never break a compile
        _local.pending = None


jax.monitoring.register_event_duration_secs_listener(_on_duration)


def await_compile(ledger: Ledger, entry: TracedSignature, name: str, nested: bool) -> None:
    """After a trace is counted: the next compiles of ``name`` in this thread are for this
    trace. A trace that is staged out is compiled with the outer one, never alone.
    Nothing is held: dropping the object frees its ledger and its traces."""
    _local.pending = None if nested else (weakref.ref(ledger), weakref.ref(entry), name, False)
