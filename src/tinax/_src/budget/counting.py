"""The ledger behind a trace budget: count, lock, history; the counted function.

Everything here runs at trace time only. The per-call hot path never enters
this module: JAX's compilation cache answers a repeated call before the counted
function below is reached.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import threading
import time
import types
from collections.abc import Callable, Generator, Mapping
from typing import Any, ParamSpec, TypeVar, cast

from tinax._src import private
from tinax._src.buckets import declared, outside
from tinax._src.budget import compile_guard, compiles
from tinax._src.budget.rejections import check_in_trace, raise_if_misplaced
from tinax._src.core.statics import Statics
from tinax._src.core.validation import LazySignature
from tinax._src.diagnosis.record import TracedSignature, placed, record, unrecorded
from tinax._src.objects.handle import Handle
from tinax._src.observe import rebuilt, sites, trace_reports
from tinax._src.observe.policy import resolve
from tinax._src.parallel import job_failure, trace_agreement

P = ParamSpec("P")
R = TypeVar("R")


class _Local(threading.local):
    made: list[tuple[object, int]] | None = None  # `collecting`: (ledger, number) per trace


_local = _Local()


@contextlib.contextmanager
def collecting() -> Generator[list[tuple[object, int]]]:
    """The traces this thread commits in the block, as ``(ledger, number)``: those it
    made, not another thread's (``precompile_buckets``' count of new signatures)."""
    earlier = _local.made
    made: list[tuple[object, int]] = []
    _local.made = made
    try:
        yield made
    finally:
        _local.made = earlier


# --- the count -----------------------------------------------------------------------------


def counted(
    function: Callable[P, R],
    handle: Handle,
    *,
    names: tuple[str, str] | None = None,
    rejects: Callable[..., Any] | None = None,
) -> Callable[P, R]:
    """Wraps ``function`` so that each run by JAX's tracing is counted in the ledger of
    ``handle``'s object.

    ``handle.function`` is the user's function, named in the error (``function`` may
    be a `jax.vmap` of it); ``names`` are its `jax_names`, if read already.
    ``rejects`` (`rejections.stand_in` through the same `jax.vmap`) raises the
    error a call would raise anyway: a call over budget that cannot succeed
    raises that error, never a budget error. Each trace
    records its call site and wall time (`observe`); a trace over budget is
    refused, warned about or logged as the object's overrun policy says; inside
    `no_new_compiles` (`compile_guard`) every trace is refused.
    """

    ledger, max_traces, reported = handle.ledger, handle.max_traces, handle.function
    signature, statics = handle.signature, handle.statics

    def traced(*args: P.args, **kwargs: P.kwargs) -> R:
        if not private.tracing_to_jaxpr():  # eager
            return function(*args, **kwargs)  # run eagerly (disable_jit)
        # a call placed against in_shardings: JAX's error now, not after a counted trace
        raise_if_misplaced(sys._getframe(1), lowering_only=True)  # pyright: ignore[reportPrivateUsage]
        call = _record_or_placeholder(signature.get(), statics, args, kwargs)
        call = _placed(call, signature.get(), statics, sys._getframe(1))  # pyright: ignore[reportPrivateUsage]
        site = sites.call_site()
        if compile_guard.refusing():  # inside no_new_compiles: no trace, within budget or not
            if rejects is not None:
                check_in_trace(rejects, args, kwargs)  # the call's own error first
            raise compile_guard.refused_trace(
                reported, max_traces, ledger, call.numbered(0, call_site=site)
            )
        missed = False  # a size on a declared axis that is no bucket, warned about
        if handle.buckets is not None:
            attempted = call.numbered(0, call_site=site)
            missed = _check_buckets(handle, attempted, rejects, args, kwargs)
        if not handle.first_traced:  # is this object one of many rebuilt alike?
            rebuilt.check_rebuilt(handle, call)
        with ledger.lock:
            used = ledger.counted
            attempt = used + ledger.in_flight + 1
            over = attempt > max_traces
            policy = None
            if over and private.chex_asserts_enabled():
                policy = resolve(handle.on_exceed)
            if policy != "raise":
                ledger.in_flight += 1
            history = tuple(ledger.history)
        if over:
            attempted = call.numbered(0, call_site=site)
            if policy == "raise":
                if rejects is not None:
                    check_in_trace(rejects, args, kwargs)  # the call's own error first
                raise trace_reports.refused(
                    reported, max_traces, used, attempt, history, attempted, handle.buckets
                )
            try:
                if rejects is not None:
                    check_in_trace(rejects, args, kwargs)
                if not missed:  # outside the buckets: reported once, by _check_buckets
                    trace_reports.overrun(
                        reported,
                        max_traces,
                        used,
                        attempt,
                        history,
                        attempted,
                        policy,
                        handle.buckets,
                    )
            except BaseException:  # the warning, raised as an error by a warnings filter
                with ledger.lock:
                    ledger.in_flight -= 1
                raise
        if job_failure.armed:  # fail_fast: the processes of a multi-process mesh trace alike
            trace_agreement.check(handle, call, history)
        started = time.perf_counter()
        try:
            out = function(*args, **kwargs)
        except BaseException:
            with ledger.lock:
                ledger.in_flight -= 1
            raise
        seconds = time.perf_counter() - started
        valid = private.valid_output(out)  # else JAX raises next and will trace again
        with ledger.lock:
            ledger.in_flight -= 1
            if not valid:
                return out
            ledger.used += 1
            entry = call.numbered(ledger.used, call_site=site, trace_seconds=seconds)
            ledger.history.append(entry)
        if _local.made is not None:  # inside `collecting`, in this thread
            _local.made.append((ledger, entry.number))
        nested = private.staged_out()  # inlined into an outer trace: never compiled alone
        if not nested:  # its jaxpr, when JAX hands it over, is this trace's (compiles)
            compiles.note_trace(handle, entry.number)
        else:  # compiled, if at all, with the trace it is staged into
            compiles.note_staged(handle, entry.number)
        trace_reports.committed(handle, jax_name, entry, history, nested, over or missed)
        return out

    _present_as(traced, reported, signature, jax_names(reported) if names is None else names)
    # The name JAX compiles it under, read here: a reference to ``traced`` from its own
    # body would be a reference cycle, and every dropped object would wait for the GC.
    jax_name: str = cast("Any", traced).__name__
    return traced


def _check_buckets(
    handle: Handle,
    call: TracedSignature,
    rejects: Callable[..., Any] | None,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> bool:
    """Refuses, warns about or logs (as the overrun policy says) a trace whose size on an
    axis the object's ``buckets`` declare is no bucket, before it is counted or run;
    returns whether it was reported (and runs).
    A call JAX would reject raises its own error first; a declaration the call shows
    wrong (an axis beyond an array's rank) raises `ValueError`, whatever the policy."""
    buckets = cast("declared.Declared", handle.buckets)
    try:
        misses = outside.misses(handle.api, buckets, call)
    except ValueError:
        if rejects is not None:
            check_in_trace(rejects, args, kwargs)
        raise
    if not misses:
        return False
    if rejects is not None:
        check_in_trace(rejects, args, kwargs)
    ledger = handle.ledger
    with ledger.lock:
        used = ledger.counted
        attempt = used + ledger.in_flight + 1
    policy = resolve(handle.on_exceed) if private.chex_asserts_enabled() else None
    error = trace_reports.outside_buckets(
        handle.function, handle.max_traces, used, attempt, call, misses, policy
    )
    if error is not None:
        raise error
    return True


def _record_or_placeholder(
    signature: inspect.Signature | None,
    statics: Statics,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> TracedSignature:
    """The call's abstract signature; recording must never break the user's trace."""
    try:
        return record(signature, statics, args, kwargs)
    except Exception as error:  # an exotic leaf: keep counting, explain less
        return unrecorded(error)


def _placed(
    call: TracedSignature,
    signature: inspect.Signature | None,
    statics: Statics,
    frame: types.FrameType,
) -> TracedSignature:
    """``call`` with the placements of the traced call's own arrays (`record.placed`),
    read from JAX's frames above ``frame``: what warm start compiles for."""
    if call.abstract_mesh.empty:  # no mesh: nothing to place (and no frames read)
        return call
    args, kwargs = private.traced_arguments(frame)
    return placed(call, signature, statics, args, kwargs)


_ANY_ARGUMENTS = inspect.Signature(
    [
        inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
        inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
    ]
)


def _plain_function(function: object) -> bool:
    """A ``def`` or ``lambda`` whose signature nothing overrides: JAX can read it safely."""
    if type(function) is not types.FunctionType:
        return False
    own = function.__dict__
    return "__signature__" not in own and "__wrapped__" not in own


_UNNAMED = "<unnamed function>"


def _plain_str(value: object) -> str | None:
    """``value`` as a plain ``str`` (no subclass hooks), or ``None`` if it is not one."""
    return str.__str__(value) if issubclass(type(value), str) else None  # pyright: ignore[reportArgumentType]


def _inner(function: object) -> object:
    """``function`` with `functools.partial` layers removed, as JAX removes them."""
    for _ in range(64):
        if not issubclass(type(function), functools.partial):
            break
        function = cast("Any", function).func
    return function


def jax_names(function: Callable[..., Any]) -> tuple[str, str]:
    """``(__name__, __qualname__)`` as `jax.jit` gives them to its object and its module.

    The name is ``jax._src.util.fun_name``'s: the callable's ``__name__``, else
    that of the function inside `functools.partial` layers, else
    ``<unnamed function>`` (a callable instance); the compiled module is
    ``jit_<name>``. The qualified name is ``__qualname__``, else the name, as
    JAX's ``wraps`` sets it. Where JAX would fail (an attribute that raises, or
    is not a ``str``), the name is ``<unnamed function>``.
    """
    if type(function) is types.FunctionType:  # a def or lambda: its own names, both str
        name, qualname = function.__name__, function.__qualname__
        if type(name) is str and type(qualname) is str:
            return name, qualname
    name: str | None = None
    target: object = function
    try:
        for _ in range(64):
            value = getattr(target, "__name__", None)
            if value is not None:
                name = _plain_str(value)
                break
            if not issubclass(type(target), functools.partial):
                break
            target = cast("Any", target).func
    except Exception:
        name = None
    name = _UNNAMED if name is None else name
    try:
        qualname = _plain_str(getattr(function, "__qualname__", name))
    except Exception:
        qualname = None
    return name, name if qualname is None else qualname


def _present_as(
    traced: Callable[..., Any],
    function: Callable[..., Any],
    signature: LazySignature,
    names: tuple[str, str],
) -> None:
    """Makes JAX see ``traced`` as ``function``: signature, name, source location.

    Unlike `functools.wraps`, nothing here can fail on an odd callable. The
    signature is computed here (or found, for a plain function wrapped before)
    and handed to JAX, which then does not compute it again. The names are
    those `jax.jit` would give ``function`` (`jax_names`), so compiled modules,
    logs and profiles read ``jit_<name>``, never ``jit_traced``.
    """
    wrapper: Any = traced
    known = signature.get()  # guarded, remembered for plain functions, handed to JAX
    wrapper.__signature__ = known if known is not None else _ANY_ARGUMENTS
    wrapper.__name__, wrapper.__qualname__ = names
    # JAX unwraps partials, then ``__wrapped__``, for the source location in its
    # messages ("g at file.py:3"); partials are removed here, since JAX does not
    # look through a partial reached from ``__wrapped__``.
    inner = function if type(function) is types.FunctionType else _inner(function)
    if not _plain_function(inner):  # a plain function has no __wrapped__ chain to check
        try:
            inspect.unwrap(cast("Callable[..., Any]", inner))
        except Exception:
            return
    wrapper.__wrapped__ = inner
