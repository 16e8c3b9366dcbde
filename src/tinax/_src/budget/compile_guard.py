"""The scope of `tinax.testing.no_new_compiles`: nothing new is traced or compiled in it.

Inside the scope, a budgeted object refuses every trace (the counted function
asks `refusing` before the body runs) and every compile (a `jax.monitoring`
listener of the compile's start, before XLA runs), with the budget error's
diagnosis (`report.scope_trace_error`, `report.scope_compile_error`). Every
other compile JAX reports in the scope (a plain `jax.jit`, an eager operation on
a new shape, an executable loaded from JAX's persistent cache) is noted, with
the function, the types of its arguments and the user's line that called it,
and the scope raises at its end, listing them (`failure`).

A scope holds for the thread (and asyncio task) that entered it, as JAX's own
configuration context managers do: JAX compiles in the thread that calls, so a
compile in another thread (a data loader's, a background precompile's) is not
the scope's, and is neither refused nor reported by it.

The listeners are installed while a scope is open, in any thread, and removed
with the last one: outside every scope nothing here runs. Inside one, a cached
call reaches none of it either: JAX records no event for a call it answers from
its caches, whether or not it takes JAX's C++ fast path (a function with a host
callback never does, jax#39289, and is still no compile).
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
import types
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import jax
import jax.monitoring

from tinax._src import private
from tinax._src.budget import compiles
from tinax._src.diagnosis import elide, record, report, reuse
from tinax._src.diagnosis.errors import TraceBudgetError
from tinax._src.observe import compile_events, sites

if TYPE_CHECKING:
    from tinax._src.diagnosis.record import TracedSignature
    from tinax._src.objects.handle import Handle
    from tinax._src.objects.ledger import Ledger

F = TypeVar("F", bound=Callable[..., Any])

_MAX_LISTED = 12
_MAX_SIGNATURE = 120

# --- the scopes open in this thread --------------------------------------------------------


class Seen(NamedTuple):
    """One compile seen inside a scope."""

    function: str  # as JAX names the compiled module: jit(step), jit(add)
    signature: str | None  # (x: f32[3], y: weak-typed i32[]); None where not known
    site: str | None  # file:line of the user's code that called it
    loaded: bool  # loaded from JAX's persistent compilation cache, not compiled


class Scope:
    """One entry into ``no_new_compiles``: where, and the compiles seen inside it."""

    __slots__ = ("seen", "where")

    def __init__(self, where: str) -> None:
        self.where = where  # "entered at file:line", "around test_step (file:line)"
        self.seen: list[Seen] = []


_SCOPES: contextvars.ContextVar[tuple[Scope, ...]] = contextvars.ContextVar(
    "tinax_no_new_compiles", default=()
)
_installed_lock = threading.Lock()
_open = 0  # scopes open in every thread: the listeners are installed while positive


def refusing() -> bool:
    """Whether a scope is open in this thread (asked at trace time only)."""
    return bool(_SCOPES.get())


def enter(where: str) -> tuple[Scope, contextvars.Token[tuple[Scope, ...]]]:
    """Opens a scope in this thread (inside the ones open already)."""
    global _open
    scope = Scope(where)
    token = _SCOPES.set((*_SCOPES.get(), scope))
    with _installed_lock:
        _open += 1
        if _open == 1:
            jax.monitoring.register_scalar_listener(_on_start)
            jax.monitoring.register_event_duration_secs_listener(_on_end)
    return scope, token


def leave(token: contextvars.Token[tuple[Scope, ...]]) -> None:
    """Closes the scope ``token`` opened; the last scope open removes the listeners."""
    global _open
    try:
        _SCOPES.reset(token)
    finally:
        with _installed_lock:
            _open -= 1
            if _open == 0:
                jax.monitoring.unregister_scalar_listener(_on_start)
                jax.monitoring.unregister_event_duration_listener(_on_end)


# --- budgeted objects: refused ---------------------------------------------------------------


def refused_trace(
    function: Callable[..., Any], max_traces: int, ledger: Ledger, call: TracedSignature
) -> TraceBudgetError:
    """The error for a trace of a budgeted object inside a scope (``call``, unnumbered)."""
    history, used, attempt, _ = ledger.snapshot()
    return report.scope_trace_error(function, max_traces, used, attempt, history, call)


def _on_start(event: str, value: float, **metadata: object) -> None:
    """At the start of a compile: a budgeted object's compile in a scope is refused."""
    if event != private.COMPILE_EVENT or not _SCOPES.get():
        return
    try:
        error = _refusal(sys._getframe(1))  # pyright: ignore[reportPrivateUsage]
    except Exception:  # a fault of ours must never break a compile
        return
    if error is not None:
        raise error  # out of the call, before XLA compiles (`private.COMPILE_EVENT`)


def _refusal(frame: types.FrameType) -> TraceBudgetError | None:
    found = compiles.owner_of(frame)
    if found is None:
        return None  # not a budgeted object's compile: noted at its end
    handle = found.handle
    if handle.public() is None:  # the object is gone: nothing to refuse in its name
        return None
    ledger = handle.ledger
    history, used, _, _ = ledger.snapshot()
    site = sites.site_of(frame)
    compiled = compiles.compiled_trace(found)
    number = found.number
    if number is None:
        number = compiles.trace_number(handle, found.jaxpr, consume=False)
    reused = [entry for entry in history if entry.number == number]
    if not reused and not found.transformed:  # a jaxpr no compile has shown: by signature
        reused = _reusing(handle, found, history, site)
    alone = ""  # for a trace never compiled for a call: why (made inside a transform?)
    if compiled is None and reused:
        alone = compiles.would_compile(handle, reused[0].number, None)
    if found.transformed:  # a jaxpr an eager transform made from a trace (its JVP...)
        if not reused and len(history) == 1:  # a backward pass: of the only trace there is
            reused = list(history)
        if not reused:
            return report.scope_compile_error(
                handle.function,
                handle.max_traces,
                used,
                history,
                history[-1].numbered(0, call_site=site),
                compiles.transform_cause(None),
                reusing=False,
            )
        reason = compiles.transform_cause(reused[0].number)
        call = reused[0].numbered(0, call_site=site)
    elif alone.startswith(report.COMPILES_AGAIN):  # compiled only inside a transform
        reason = alone
        call = reused[0].numbered(0, call_site=site)
    elif compiled is not None and reused:  # compiled before, again for inputs placed otherwise
        placed = found.placed
        if placed is None:
            placed = compiles.placements(found.arg_names, found.flat_args)
        reason = compiles.would_compile(handle, compiled, placed) or (
            "XLA compiles it again; the cause is not visible."
        )
        call = reused[0].numbered(0, call_site=site)
    else:  # a trace made without its compile (lower, trace, eval_shape)
        reason = (
            "Its trace was made without a compile (by lower, trace or eval_shape): compile it "
            "before the scope (precompile, or a first call)."
        )
        call = reused[0].numbered(0, call_site=site) if reused else None
        if call is None:
            call = _recorded(handle, found.args, found.kwargs, site)
        if call is None:
            if not history:
                return None
            call = history[-1].numbered(0, call_site=site)
    return report.scope_compile_error(
        handle.function, handle.max_traces, used, history, call, reason
    )


def _reusing(
    handle: Handle, found: compiles.Compiling, history: Sequence[TracedSignature], site: str | None
) -> list[TracedSignature]:
    """The trace a call compiles, found by its signature where its jaxpr was never seen
    compiled (a trace staged into another, or made by lower), or the only trace."""
    call = _recorded(handle, found.args, found.kwargs, site)
    match = None if call is None else reuse.reused(history, call, handle.ledger.cleared)
    if match is not None:
        return [match]
    return list(history) if len(history) == 1 else []


def _recorded(
    handle: Handle, args: Sequence[Any], kwargs: Any, site: str | None
) -> TracedSignature | None:
    """The call's signature as the object records it; ``None`` where it cannot be read
    (its calling convention does not read `jax.jit`'s arguments back: `Handle.user_arguments`)."""
    arguments = handle.user_arguments(tuple(args), dict(kwargs))
    if arguments is None:
        return None
    try:
        call = record.record(handle.signature.get(), handle.statics, *arguments)
    except Exception:
        return None
    return call.numbered(0, call_site=site)


# --- every other compile: noted, reported at the scope's end ---------------------------------


def _on_end(event: str, duration_secs: float, **metadata: object) -> None:
    """At the end of a compile (or load): noted in every scope open in this thread."""
    if event != private.COMPILE_EVENT:
        return
    scopes = _SCOPES.get()
    if not scopes:
        return
    try:
        seen = _seen(sys._getframe(1), metadata.get("fun_name"))  # pyright: ignore[reportPrivateUsage]
    except Exception:  # a fault of ours must never break a compile
        return
    for scope in scopes:
        scope.seen.append(seen)


def _seen(frame: types.FrameType, fun_name: object) -> Seen:
    found = private.jit_call(frame)
    if isinstance(fun_name, str):
        name = fun_name
    elif found is not None:
        name = f"jit({report.function_name(found.function)})"
    else:
        name = "a function JAX does not name"
    signature = None if found is None else _signature(found.arg_names, found.flat_args)
    return Seen(name, signature, sites.site_of(frame), compile_events.loaded())


def _signature(names: Sequence[str], args: Sequence[Any]) -> str:
    """``(x: f32[3], y: weak-typed i32[])``: the flat arguments' abstract values."""
    entries = [(name, _type_text(arg), False) for name, arg in zip(names, args, strict=False)]
    return f"({elide.items(entries, _MAX_SIGNATURE)})"


def _type_text(value: object) -> str:
    try:
        return record.array_leaf("", "", jax.typeof(value)).text
    except Exception:
        return type(value).__name__


def _seen_line(seen: Seen) -> str:
    signature = seen.signature or " (arguments not known: compiled outside a call)"
    where = f"called from {seen.site}" if seen.site else "called from an unknown place"
    text = f"  {seen.function}{signature}, {where}"
    if seen.loaded:
        text += "; loaded from JAX's persistent cache (traced and lowered again, not compiled)"
    return report.fit(text)


def failure(scope: Scope) -> AssertionError | None:
    """The error a scope raises at its end: every compile seen inside it; ``None`` if none."""
    seen = scope.seen
    if not seen:
        return None
    count = f"{len(seen)} JAX compile{'s' if len(seen) > 1 else ''}"
    lines = [report.fit(f"{count} inside no_new_compiles, {scope.where}:")]
    lines.extend(_seen_line(entry) for entry in seen[:_MAX_LISTED])
    if len(seen) > _MAX_LISTED:
        lines.append(f"  ... and {len(seen) - _MAX_LISTED} more")
    lines.append(
        "Each new abstract signature of a jitted function, and each eager jax.numpy "
        "operation on a new shape or dtype, compiles: run these once before the scope "
        "(or precompile them), or move them out of it."
    )
    return AssertionError("\n".join(lines))


# --- the context manager and decorator -------------------------------------------------------


class NoNewCompiles(contextlib.ContextDecorator):
    """What `no_new_compiles` returns: a context manager, and a decorator whose every
    call of the decorated function is a scope of its own. Re-entrant."""

    def __init__(self, where: str | None = None) -> None:
        self._where = where
        self._entered: list[tuple[Scope, contextvars.Token[tuple[Scope, ...]]]] = []

    def __call__(self, func: F) -> F:  # pyright: ignore[reportIncompatibleMethodOverride]
        location = report.function_location(func)
        where = f"around {report.function_name(func)}" + (f" ({location})" if location else "")
        decorate: Any = contextlib.ContextDecorator.__call__
        return decorate(NoNewCompiles(where), func)  # self stays as it was, for other uses

    def _recreate_cm(self) -> NoNewCompiles:
        return NoNewCompiles(self._where)  # one scope per call of a decorated function

    def __enter__(self) -> None:
        where = self._where
        if where is None:
            site = sites.site_of(sys._getframe(1))  # pyright: ignore[reportPrivateUsage]
            where = f"entered at {site}" if site else "entered at an unknown place"
        self._entered.append(enter(where))

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        scope, token = self._entered.pop()
        leave(token)
        if kind is not None:
            return  # an exception raised inside the scope passes through unchanged
        found = failure(scope)
        if found is not None:
            raise found

    def __repr__(self) -> str:
        return "no_new_compiles()"
