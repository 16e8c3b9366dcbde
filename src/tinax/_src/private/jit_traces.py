"""Every trace `jax.jit` makes, heard from outside any object: the one function JAX calls
once per trace, the events that time its lowering and compile, and the user's call inside
an `equinox.filter_jit`."""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar

import jax
from jax._src import core as _jax_core
from jax._src import pjit as _pjit

R = TypeVar("R")

TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
"""The event JAX records once per top-level trace of a `jax.jit` (``dispatch.JAXPR_TRACE_EVENT``,
around ``pe.trace_to_jaxpr`` in ``_trace_for_jit``), with the metadata ``fun_name``; a trace
nested in another one records none. Read on jax 0.9.2, 0.10.2 and 0.12.1."""

LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
"""The event of one lowering to a StableHLO module (``dispatch.JAXPR_TO_MLIR_MODULE_EVENT``,
``pxla.lower_sharding_computation``), ``fun_name`` the module's name (``jit_<name>``).
Read on jax 0.9.2, 0.10.2 and 0.12.1."""

_JAX_DIRECTORY = os.path.dirname(jax.__file__) + os.sep
_EQUINOX_JIT = os.path.join("equinox", "_jit.py")


class JitTrace(NamedTuple):
    """One trace `jax.jit` is about to make: what ``_trace_for_jit`` is given."""

    function: Callable[..., Any]  # the function jax.jit wraps
    source: str  # PjitInfo.fun_sourceinfo: "name at file:line"
    signature: inspect.Signature | None  # PjitInfo.fun_signature
    static_argnums: tuple[int, ...]
    static_argnames: tuple[str, ...]
    args: tuple[Any, ...]  # the call's arguments: arrays at top level, tracers nested
    kwargs: Mapping[str, Any]
    nested: bool  # traced inside another trace: inlined there, never compiled alone


Listener = Callable[[JitTrace, Callable[[], Any]], Any]
"""Given a trace and the thunk that makes it; returns what the thunk returns."""


class _Hook:
    """The listeners of every open audit and the one wrapper that calls them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.listeners: tuple[Listener, ...] = ()
        self.original: Any = None


_HOOK = _Hook()


def _traced(fun: Any, ji: Any, ctx_mesh: Any, dbg: Any, avals: Any, args: Any, kwargs: Any) -> Any:
    original = _HOOK.original
    listeners = _HOOK.listeners

    def run() -> Any:
        return original(fun, ji, ctx_mesh, dbg, avals, args, kwargs)

    if not listeners:  # the last audit closed while this trace was starting
        return run()
    core: Any = _jax_core
    call = JitTrace(
        fun,
        ji.fun_sourceinfo,
        ji.fun_signature,
        tuple(ji.static_argnums),
        tuple(ji.static_argnames),
        tuple(args),
        dict(kwargs),
        not core.trace_state_clean(),
    )
    thunk = run
    for listener in reversed(listeners):
        thunk = _bound(listener, call, thunk)
    return thunk()


def _bound(listener: Listener, call: JitTrace, thunk: Callable[[], Any]) -> Callable[[], Any]:
    return lambda: listener(call, thunk)


def hook_traces(listener: Listener) -> Callable[[], None]:
    """Calls ``listener`` for every trace of every `jax.jit` until the returned function is
    called, which removes it; with the last listener removed, JAX is as it was.

    No public API hears a trace. ``_infer_params`` in ``jax/_src/pjit.py`` calls the
    module's ``_trace_for_jit`` by its global name exactly when its trace cache misses
    (a call, ``trace``, ``lower`` or ``eval_shape``, at top level or nested), with the
    `PjitInfo` (``fun_sourceinfo``, ``fun_signature``, ``static_argnums``,
    ``static_argnames``) and the call's ``args`` and ``kwargs``; JAX's own cache-miss
    explanation runs inside it. The module attribute is replaced while a listener is
    installed and put back after. Read on jax 0.9.2, 0.10.2 and 0.12.1; where a JAX
    renames it, `AuditUnavailable` is raised when an audit opens.
    """
    with _HOOK.lock:
        if not _HOOK.listeners:
            original = getattr(_pjit, "_trace_for_jit", None)
            if original is None or not callable(original):
                raise AuditUnavailable(
                    f"tinax.audit cannot hear traces on jax {jax.__version__}: "
                    "jax._src.pjit._trace_for_jit is gone (read on jax 0.9.2 to 0.12.1)."
                )
            _HOOK.original = original
            _pjit._trace_for_jit = _traced  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
        _HOOK.listeners = (*_HOOK.listeners, listener)

    def remove() -> None:
        with _HOOK.lock:
            listeners = list(_HOOK.listeners)
            if listener in listeners:
                listeners.remove(listener)
            _HOOK.listeners = tuple(listeners)
            if not listeners and _HOOK.original is not None:
                _pjit._trace_for_jit = _HOOK.original  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
                _HOOK.original = None

    return remove


def trace_entry() -> Any:
    """What ``jax._src.pjit._trace_for_jit`` is now (JAX's own function outside audits)."""
    return getattr(_pjit, "_trace_for_jit", None)


class AuditUnavailable(RuntimeError):
    """This JAX release moved the internal an audit hears traces through."""


def jax_internal(function: Callable[..., Any]) -> bool:
    """Whether ``function``'s code is JAX's own (``jax.numpy``'s and the other internal
    jits), which JAX's cache-miss explanation leaves out as not the user's."""
    code: Any = getattr(inspect.unwrap(function), "__code__", None)
    filename = getattr(code, "co_filename", "")
    return isinstance(filename, str) and filename.startswith(_JAX_DIRECTORY)


def equinox_call(
    call: JitTrace,
) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None:
    """``(function, args, kwargs)`` of the user's call inside an `equinox.filter_jit` trace,
    or ``None`` for any other trace.

    `equinox.filter_jit` gives one `jax.jit` per function name (``_filter_jit_cache``) the
    function ``fun_wrapped(dynamic_donate, dynamic_nodonate, static)`` of
    ``equinox/_jit.py``: the arrays of the function, the first argument and the rest
    (``"fun"``, ``"first"``, ``"rest"``), and their static parts, each put back by
    ``equinox._compile_utils.hashable_combine``. Read on equinox 0.13.8; where it
    changes, the trace is recorded as `jax.jit` sees it.
    """
    code: Any = getattr(call.function, "__code__", None)
    if code is None or not code.co_filename.endswith(_EQUINOX_JIT):
        return None
    if code.co_name != "fun_wrapped" or len(call.args) != 3:
        return None
    try:
        from equinox import _compile_utils  # pyright: ignore[reportMissingImports]

        utils: Any = _compile_utils
        hashable_combine: Callable[[Any, Any], Any] = utils.hashable_combine

        donate, nodonate, static = call.args
        dynamic: dict[str, Any] = {**donate, **nodonate}
        static_fun, static_first, static_rest = static
        function: Any = hashable_combine(dynamic["fun"], static_fun)
        first: Any = hashable_combine(dynamic["first"], static_first)
        rest: Any = hashable_combine(dynamic["rest"], static_rest)
        rest_args: tuple[Any, ...] = rest[0]
        kwargs: dict[str, Any] = rest[1]
        args: tuple[Any, ...] = (first, *rest_args)[:-1]  # equinox's trailing None
    except Exception:  # another equinox: record what jax.jit sees
        return None
    return function, args, dict(kwargs)


def unwrapped(function: Callable[..., Any]) -> Callable[..., Any]:
    """The function a wrapper stands for (``__wrapped__``, as JAX names it)."""
    try:
        return inspect.unwrap(function)
    except ValueError:  # a cycle of __wrapped__
        return function
