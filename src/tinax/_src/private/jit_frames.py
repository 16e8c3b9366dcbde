"""The frames of a `jax.jit` call that missed its cache, read from inside it: the call,
the jaxpr it compiles, the source text that names its function, a refused leaf."""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, cast

MAX_FRAMES = 64  # how far up from a compile or a trace the jax.jit call is looked for


def _pjit_file() -> str:
    from jax._src import pjit

    return pjit.__file__


PJIT_FILE = _pjit_file()


def pjit_frame(frame: types.FrameType, name: str) -> bool:
    """Whether ``frame`` runs the function ``name`` of ``jax/_src/pjit.py``."""
    code = frame.f_code
    return code.co_name == name and code.co_filename == PJIT_FILE


class JitCall(NamedTuple):
    """What the frame of a `jax.jit` call that missed its cache holds."""

    function: Any  # the function jax.jit wraps (tinax's counted function)
    jaxpr: Any  # the closed jaxpr it compiles, or None
    arg_names: Sequence[str]  # the flat arguments' names
    flat_args: Sequence[Any]  # the flat arguments
    args: Sequence[Any]  # the call's positional arguments
    kwargs: Mapping[str, Any]  # the call's keyword arguments


def jit_call(frame: types.FrameType | None) -> JitCall | None:
    """The innermost `jax.jit` cache-miss call above ``frame``, or ``None``.

    No public API hands a compile listener (`jax.monitoring`) or a traced function
    the call that caused it. JAX's C++ dispatch calls the Python function
    ``cache_miss`` in ``jax/_src/pjit.py`` on a miss; its locals ``fun``, ``p``
    (``params['jaxpr']``, ``arg_names``), ``args_flat``, ``args`` and ``kwargs`` are
    read here. Run on jax 0.9.2, 0.10.2 and 0.12.0.1; where a JAX renames them, the
    missing ones read as empty and tinax counts no compile for the call (its traces
    are still counted), rather than failing it.
    """
    for _ in range(MAX_FRAMES):
        if frame is None:
            return None
        if pjit_frame(frame, "cache_miss"):
            local = frame.f_locals
            params: Any = local.get("p")
            inner: Any = getattr(params, "params", None)
            return JitCall(
                function=local.get("fun"),
                jaxpr=None if inner is None else inner.get("jaxpr"),
                arg_names=getattr(params, "arg_names", None) or (),
                flat_args=local.get("args_flat") or (),
                args=local.get("args", ()),
                kwargs=local.get("kwargs", {}),
            )
        frame = frame.f_back
    return None


def compiled_jaxpr(frame: types.FrameType | None) -> Any:
    """The closed jaxpr that JAX compiles now, as seen from ``frame`` (a compile event's
    listener's caller), or ``None`` (a stage's ``compile()``, or a JAX that renames it).

    Every compile of a jaxpr outside ``lower`` runs ``_pjit_call_impl_python`` in
    ``jax/_src/pjit.py`` with the jaxpr as its local ``jaxpr``: a call that missed its
    cache compiles its own trace's jaxpr there; an eager transform around a `jax.jit`
    object (`jax.grad`, `jax.vmap`, `jax.checkpoint`...) compiles a jaxpr made from that
    trace's (its JVP, its known or linear part, its transpose, its batched form).
    Run on jax 0.10.2 (the same name and local in JAX's source of 0.11.1).
    """
    for _ in range(MAX_FRAMES):
        if frame is None:
            return None
        if pjit_frame(frame, "_pjit_call_impl_python"):
            return frame.f_locals.get("jaxpr")
        frame = frame.f_back
    return None


def jit_source(jitted: object) -> str | None:
    """The text by which a `jax.jit` object names its function in every jaxpr it traces
    (``loss at file.py:3``), as that very ``str`` object, or ``None``.

    `jax.jit` computes it once, when it builds the object (``PjitInfo.fun_sourceinfo``,
    ``_jit_info`` on the object), and hands that same object to the debug information
    of each jaxpr it traces; JAX's transformations of a jaxpr (JVP, partial evaluation,
    transposition, batching) copy it into the jaxprs they make. Its identity, unlike its
    text, tells this object's jaxprs from those of another `jax.jit` of the same
    function. Run on jax 0.10.2 (the same in JAX's source of 0.11.1); missing: ``None``,
    and a compile under an eager transform outside the object's own call is not counted.
    """
    info: Any = getattr(jitted, "_jit_info", None)
    source: object = getattr(info, "fun_sourceinfo", None)
    return source if type(source) is str else None


def jaxpr_source(jaxpr: object) -> str | None:
    """The source text object in a jaxpr's debug information (`jit_source`), or ``None``:
    a closed jaxpr (jax 0.10.2) and a jaxpr (JAX's source from 0.11.1, where `jax.jit`'s
    parameter is one) both have ``debug_info``."""
    debug: Any = getattr(jaxpr, "debug_info", None)
    source: object = getattr(debug, "func_src_info", None)
    return source if type(source) is str else None


def rejected_leaf_call(
    frame: types.FrameType | None,
) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The ``(args, kwargs)`` of a `jax.jit` call (or ``lower``/``trace``/``eval_shape``)
    that JAX refuses for a leaf it cannot trace, when ``frame`` is JAX building that
    `TypeError`'s message; else ``None``.

    No public API hooks that error: JAX raises it in ``_infer_input_type`` in
    ``jax/_src/pjit.py``, while handling the `TypeError` of the leaf's abstract
    value, with a message that formats the jitted function (``{fun}``, the only
    place that function formats it); the call's arguments are the locals ``args``
    and ``kwargs`` of its caller, ``_infer_params``. Read on jax 0.9.2, 0.10.2 and
    0.12.0.1; where a JAX renames them, this is ``None`` and JAX's own message
    stands.
    """
    if frame is None or not pjit_frame(frame, "_infer_input_type"):
        return None
    caller = frame.f_back
    if caller is None or not pjit_frame(caller, "_infer_params"):
        return None
    local = caller.f_locals
    args: object = local.get("args")
    kwargs: object = local.get("kwargs")
    if type(args) is not tuple or type(kwargs) is not dict:
        return None
    return cast("tuple[Any, ...]", args), cast("dict[str, Any]", kwargs)


def traced_arguments(frame: types.FrameType | None) -> tuple[Sequence[Any], Mapping[str, Any]]:
    """``(args, kwargs)`` of the `jax.jit` call or ``lower``/``trace`` being traced now, as
    seen from ``frame`` (inside the trace): concrete arrays or `jax.ShapeDtypeStruct` values,
    with their shardings; ``((), {})`` where none is found.

    No public API hands a traced function the arguments of its call. JAX's
    ``_infer_params`` in ``jax/_src/pjit.py``, which every call that misses its cache
    and every ``trace``/``lower`` runs, holds them as its locals ``args`` and
    ``kwargs``: read on jax 0.9.2, 0.10.2 and 0.12.1; where a JAX renames them, none
    are found (a warm start then compiles for replicated inputs, as a trace's types
    on an Auto mesh say).
    """
    for _ in range(MAX_FRAMES):
        if frame is None:
            break
        if pjit_frame(frame, "_infer_params"):
            local = frame.f_locals
            args: Any = local.get("args")
            kwargs: Any = local.get("kwargs")
            if isinstance(args, tuple) and isinstance(kwargs, dict):
                return cast("tuple[Any, ...]", args), cast("dict[str, Any]", kwargs)
            break
        frame = frame.f_back
    return (), {}
