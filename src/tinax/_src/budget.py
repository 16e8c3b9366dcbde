"""The ledger behind a trace budget: count, lock, history; the error and ``explain``.

Everything here runs at trace time only. The per-call hot path never enters
this module: JAX's compilation cache answers a repeated call before the counted
function below is reached.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import attrs

from tinax._src import diff, private
from tinax._src.errors import TraceBudgetError
from tinax._src.signature import TracedSignature, record, unrecorded
from tinax._src.validation import LazySignature

P = ParamSpec("P")
R = TypeVar("R")

# --- the error -----------------------------------------------------------------------------


def function_name(function: Callable[..., Any]) -> str:
    """A readable name for any callable: qualified name, or what it wraps."""
    if isinstance(function, functools.partial):
        return f"partial({function_name(function.func)})"  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    if isinstance(name, str):
        return name
    return f"{type(function).__qualname__} instance"


def function_location(function: Callable[..., Any]) -> str | None:
    """``file:line`` of the code behind ``function``, where Python knows it."""
    try:
        return _location(function)
    except Exception:  # an odd callable must not turn the budget error into another error
        return None


def _location(function: Callable[..., Any]) -> str | None:
    seen = 0
    target: Any = function
    while seen < 32:  # unwrap partials, bound methods, decorators and callable instances
        seen += 1
        if isinstance(target, functools.partial):
            target = target.func  # pyright: ignore[reportUnknownMemberType]
        elif inspect.ismethod(target):
            target = target.__func__
        elif hasattr(target, "__wrapped__"):
            target = target.__wrapped__
        elif not hasattr(target, "__code__") and not isinstance(target, type):
            call = getattr(type(target), "__call__", None)  # noqa: B004  # pyright: ignore[reportUnknownArgumentType]
            if call is None or call is target:
                break
            target = call
        else:
            break
    code = getattr(target, "__code__", None)
    if code is None:
        return None
    filename: str = code.co_filename
    try:
        relative = os.path.relpath(filename)
    except ValueError:
        relative = filename
    if not relative.startswith(".."):
        filename = relative
    return f"{filename}:{code.co_firstlineno}"


def _where(function: Callable[..., Any]) -> tuple[str, str | None, str]:
    name = function_name(function)
    location = function_location(function)
    return name, location, _heading(name, location)


def _heading(name: str, location: str | None) -> str:
    """``name (file:line)``, or the name alone where the location is unknown."""
    return f"{name} ({location})" if location else name


def budget_error(
    function: Callable[..., Any],
    max_traces: int,
    used: int,
    attempt: int,
    history: Sequence[TracedSignature],
    signature: TracedSignature,
) -> TraceBudgetError:
    """Builds the error for a refused trace: headline, location, differences, fixes."""
    name, location, where = _where(function)
    best, found = diff.closest(history, signature)
    lines = [
        f"{where} exceeded its trace budget: max_traces={max_traces}, traces_used={used}; "
        f"this call would be trace {attempt}.",
        "JAX traces and compiles again for every new abstract signature; this call was refused "
        "before tracing, and calls that match an earlier trace still run.",
        *diff.explanation_lines(best, found, signature),
    ]
    return TraceBudgetError(
        "\n".join(lines),
        function_name=name,
        location=location,
        max_traces=max_traces,
        traces_used=used,
        signature=signature,
        closest=best,
        differences=found,
    )


@attrs.frozen
class Explanation:
    """What a call would do, worked out without tracing; see ``explain``.

    Prints as a short report: the trace the call would reuse, or the trace it
    would make, the differences from the closest earlier trace and their fixes.

    Attributes:
        function_name: Qualified name of the wrapped function.
        location: ``file:line`` where the wrapped function is defined, if known.
        signature: Abstract signature of the call.
        retraces: Whether the call would trace: no earlier trace has its signature.
        reuses: The earlier trace the call would run from, or ``None``.
        exceeds_budget: Whether the call would be trace ``max_traces + 1`` (refused
            with `TraceBudgetError` while chex assertions are on).
        traces_used: Traces made so far.
        attempt: The number the call's trace would have (traces made or in
            flight, plus one); meaningful when ``retraces``.
        max_traces: The budget.
        closest: The earlier trace that differs least from the call, or ``None``.
        differences: What differs between ``closest`` and the call.
    """

    function_name: str
    location: str | None
    signature: TracedSignature
    retraces: bool
    reuses: TracedSignature | None
    exceeds_budget: bool
    traces_used: int
    max_traces: int
    closest: TracedSignature | None
    differences: tuple[diff.Difference, ...]
    attempt: int

    def __str__(self) -> str:
        where = _heading(self.function_name, self.location)
        budget = f"max_traces={self.max_traces}, traces_used={self.traces_used}"
        if self.reuses is not None:
            return f"{where}: this call would reuse trace #{self.reuses.number}; {budget}."
        if self.exceeds_budget:
            head = f"{where}: this call would exceed the trace budget: {budget}; it would be"
        else:
            head = f"{where}: this call would trace again: {budget}; it would be"
        lines = [f"{head} trace {self.attempt}."]
        lines.extend(diff.explanation_lines(self.closest, self.differences, self.signature))
        return "\n".join(lines)


def explain(
    function: Callable[..., Any],
    ledger: Ledger,
    max_traces: int,
    signature: TracedSignature,
) -> Explanation:
    """Whether ``signature`` would reuse an earlier trace of ``ledger``, and why not."""
    with ledger.lock:
        history = tuple(ledger.history)
        used = ledger.used
        attempt = used + ledger.in_flight + 1
    name, location, _ = _where(function)
    best, found = diff.closest(history, signature)
    reuses = best if best is not None and not found else None
    return Explanation(
        function_name=name,
        location=location,
        signature=signature,
        retraces=reuses is None,
        reuses=reuses,
        exceeds_budget=reuses is None and attempt > max_traces,
        traces_used=used,
        max_traces=max_traces,
        closest=best,
        differences=found,
        attempt=attempt,
    )


# --- the count -----------------------------------------------------------------------------


class Ledger:
    """The mutable part of a budgeted object: count, in-flight traces, history.

    A trace reserves its slot before the body runs and commits it after the
    body returns, all under one lock, so concurrent traces from several threads
    never exceed the budget, and a trace whose body raises gives its slot back.
    """

    __slots__ = ("history", "in_flight", "lock", "used")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.used = 0
        self.in_flight = 0
        self.history: list[TracedSignature] = []


def counted(
    function: Callable[P, R],
    ledger: Ledger,
    max_traces: int,
    signature: LazySignature,
    static_argnames: tuple[str, ...],
    reported: Callable[..., Any],
) -> Callable[P, R]:
    """Wraps ``function`` so that each run by JAX's tracing is counted in ``ledger``.

    ``reported`` is the user's function, named in the error (``function`` may be
    a `jax.vmap` of it).
    """

    def traced(*args: P.args, **kwargs: P.kwargs) -> R:
        if private.jit_disabled() and not private.tracing_to_jaxpr():
            return function(*args, **kwargs)  # run eagerly: not a trace
        call = _record_or_placeholder(signature.get(), static_argnames, args, kwargs)
        with ledger.lock:
            used = ledger.used
            attempt = used + ledger.in_flight + 1
            refuse = attempt > max_traces and private.chex_asserts_enabled()
            if not refuse:
                ledger.in_flight += 1
            history = tuple(ledger.history)
        if refuse:
            raise budget_error(reported, max_traces, used, attempt, history, call)
        try:
            out = function(*args, **kwargs)
        except BaseException:
            with ledger.lock:
                ledger.in_flight -= 1
            raise
        valid = private.valid_output(out)  # else JAX raises next and will trace again
        with ledger.lock:
            ledger.in_flight -= 1
            if not valid:
                return out
            ledger.used += 1
            ledger.history.append(call.numbered(ledger.used))
        return out

    _present_as(traced, reported, signature)
    return traced


def _record_or_placeholder(
    signature: inspect.Signature | None,
    static_argnames: tuple[str, ...],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> TracedSignature:
    """The call's abstract signature; recording must never break the user's trace."""
    try:
        return record(signature, static_argnames, args, kwargs)
    except Exception as error:  # an exotic leaf: keep counting, explain less
        return unrecorded(error)


_ANY_ARGUMENTS = inspect.Signature(
    [
        inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
        inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
    ]
)


def _plain_function(function: Callable[..., Any]) -> bool:
    """A ``def`` or ``lambda`` whose signature nothing overrides: JAX can read it safely."""
    if type(function) is not types.FunctionType:
        return False
    own = function.__dict__
    return "__signature__" not in own and "__wrapped__" not in own


def _present_as(
    traced: Callable[..., Any], function: Callable[..., Any], signature: LazySignature
) -> None:
    """Makes JAX see ``traced`` as ``function``: signature, name, source location.

    Unlike `functools.wraps`, nothing here can fail on an odd callable. A
    signature computed at wrap time (to check argnames) is handed to JAX;
    otherwise JAX finds it through ``__wrapped__``, once, as for the function.
    """
    wrapper: Any = traced
    if not signature.known and not _plain_function(function):
        signature.get()  # odd callables: computed here, guarded, and handed to JAX
    if signature.known:
        known = signature.get()
        wrapper.__signature__ = known if known is not None else _ANY_ARGUMENTS
    for name in ("__name__", "__qualname__"):
        try:
            value = getattr(function, name)
        except Exception:
            continue
        if isinstance(value, str):
            setattr(wrapper, name, value)
    try:  # JAX unwraps for the source location in its own messages
        inspect.unwrap(function)
    except Exception:
        return
    wrapper.__wrapped__ = function
