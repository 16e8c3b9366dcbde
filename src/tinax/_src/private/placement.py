"""A call placed against `jax.jit`'s shardings, found inside its trace, before JAX lowers."""

from __future__ import annotations

import contextlib
import inspect
import threading
import types
from collections.abc import Generator, Mapping, Sequence
from typing import Any, cast

import jax
from jax.core import Tracer

from tinax._src.private.jax_types import unspecified_type
from tinax._src.private.jit_frames import MAX_FRAMES, PJIT_FILE, pjit_frame

_CALL_ENTRIES = frozenset({"cache_miss", "jit_lower"})  # a call, or ``lower``: both lower
_ENTRY_DEPTH = 4  # frames from ``_infer_params`` up to cache_miss or jit_lower


class _Lowering(threading.local):
    on: bool = False


_lowering = _Lowering()


@contextlib.contextmanager
def lowering() -> Generator[None]:
    """A ``trace`` made for ``lower`` (tinax's ``lower`` is ``trace(...).lower()``, as
    `jax.jit`'s is): its trace is lowered at once, so its placements are checked."""
    before, _lowering.on = _lowering.on, True
    try:
        yield
    finally:
        _lowering.on = before


def _entry(infer_params: types.FrameType) -> bool:
    """Whether ``_infer_params`` runs for a call or ``lower``: work that lowers the trace
    (``trace`` and ``eval_shape`` never do, but for a `lowering` one)."""
    if _lowering.on:
        return True
    frame = infer_params.f_back
    for _ in range(_ENTRY_DEPTH):
        if frame is None:
            return False
        if frame.f_code.co_filename == PJIT_FILE and frame.f_code.co_name in _CALL_ENTRIES:
            return True
        frame = frame.f_back
    return False


def misplaced(frame: types.FrameType | None, *, lowering_only: bool) -> ValueError | None:
    """Inside a trace `jax.jit` makes: JAX's `ValueError` for the traced call's
    concrete arguments placed against the jit's ``in_shardings`` (a committed array
    sharded otherwise, another memory kind) or on devices that disagree (with each
    other or with the context mesh), which JAX raises only after the trace, when it
    lowers; ``None`` where the placements fit, an argument is a tracer (a call
    nested in another trace), or what JAX checks cannot be read.

    ``lowering_only``: only for a trace of a call or of ``lower``, whose trace JAX
    lowers at once (a trace made by ``trace`` or ``eval_shape`` is a trace, placed
    anywhere); else for any entry (``explain``'s ``eval_shape`` of a stand-in).

    No public API checks placements without lowering. While JAX traces, the
    frame of ``_trace_for_jit`` in ``jax/_src/pjit.py`` holds the flat
    ``in_shardings_flat`` it resolved (before tracing), ``ctx_mesh``, ``dbg`` and
    ``fun``, and its caller ``_infer_params`` the flat arguments ``dynargs``;
    JAX's own ``_resolve_in_shardings`` and ``_get_and_check_device_assignment``
    (``interpreters/pxla.py``, the arguments' part of its check) raise what the
    call would, the second turned into JAX's `ValueError` as
    ``_run_python_pjit`` does. Read on jax 0.10.2 and 0.12.0.1; where a JAX
    renames them, this is ``None`` and the call fails as before, after a trace.
    """
    for _ in range(MAX_FRAMES):
        if frame is None:
            return None
        if pjit_frame(frame, "_trace_for_jit"):
            break
        frame = frame.f_back
    else:
        return None
    caller = frame.f_back
    if caller is None or not pjit_frame(caller, "_infer_params"):
        return None
    if lowering_only and not _entry(caller):
        return None
    local = frame.f_locals
    in_shardings: Any = local.get("in_shardings_flat")
    ctx_mesh: Any = local.get("ctx_mesh")
    dynargs: Any = caller.f_locals.get("dynargs")
    if in_shardings is None or ctx_mesh is None or not isinstance(dynargs, (list, tuple)):
        return None
    arguments = cast("Sequence[Any]", dynargs)
    if any(isinstance(arg, Tracer) for arg in arguments) or len(arguments) != len(in_shardings):
        return None
    try:
        return _placement_error(local, arguments, in_shardings, ctx_mesh)
    except Exception:  # anything else: no verdict, JAX decides when it lowers
        return None


def _context_for_assignment(pxla: Any, mesh: Any) -> Any:
    """What ``_get_and_check_device_assignment`` takes of the context mesh: the mesh itself
    (jax 0.10.2, 0.12.0.1: ``ctx_mesh``), or its flat devices, ``None`` for an empty mesh
    (jax 0.9.2: ``context_devices``, as ``_cached_lowering_to_hlo`` passes them)."""
    parameters = inspect.signature(pxla._get_and_check_device_assignment).parameters
    if "context_devices" in parameters:
        return None if mesh.empty else mesh._flat_devices_tuple
    return mesh


def _placement_error(
    local: Mapping[str, Any], arguments: Sequence[Any], in_shardings: Any, ctx_mesh: Any
) -> ValueError | None:
    from jax._src import pjit, stages, util
    from jax._src.interpreters import pxla

    pjit_: Any = pjit
    pxla_: Any = pxla
    stages_: Any = stages
    if pxla_.check_device_backend_on_shardings(in_shardings):  # device=/backend=: JAX moves them
        return None
    unspecified = unspecified_type()
    # Only an argument given a sharding, or committed to one, can be refused (an argument
    # with neither resolves to "unspecified"): the others are not read (~8 us each).
    kept = [
        index
        for index, (arg, sharding) in enumerate(zip(arguments, in_shardings, strict=True))
        if not isinstance(sharding, unspecified) or _committed(arg)
    ]
    if not kept:
        return None
    try:
        resolved = pjit_._resolve_in_shardings(
            [_meta(pjit_, arguments[index]) for index in kept],
            [in_shardings[index] for index in kept],
        )
    except ValueError as error:
        return error
    unique: Any = cast("Any", util).stable_unique(resolved)
    mismatch = stages_.MismatchType.ARG_SHARDING
    try:
        pxla_._get_and_check_device_assignment(
            ((sharding, mismatch, None) for sharding in unique),
            _context_for_assignment(pxla_, pxla_._get_context_mesh(ctx_mesh)),
        )
    except stages_.DeviceAssignmentMismatchError as error:
        (fails,) = error.args
        fun = local.get("fun")
        name = getattr(fun, "__qualname__", getattr(fun, "__name__", str(fun)))
        dbg: Any = local.get("dbg")
        arg_types = [pjit_.convert_to_metaty(arg) for arg in arguments]  # the message's
        names = dbg.safe_arg_names(len(arg_types)) if dbg is not None else None
        return ValueError(
            stages_._device_assignment_mismatch_error(name, fails, arg_types, "jit", names)
        )
    return None


def _committed(arg: object) -> bool:
    """Whether ``arg`` is an array committed to its sharding (NumPy arrays, scalars
    and uncommitted arrays are placed as the call needs)."""
    try:
        return getattr(arg, "sharding", None) is not None and bool(getattr(arg, "_committed", True))
    except Exception:
        return True  # an odd object: let JAX's check read it


def _meta(pjit_: Any, arg: Any) -> Any:
    """JAX's ``MetaTy`` of an argument, as ``convert_to_metaty`` makes it but without
    its ``format`` (a layout, ~4 us, that resolving shardings does not read) for a
    `jax.Array`; else ``convert_to_metaty``'s own."""
    if isinstance(arg, jax.Array) and not isinstance(arg, Tracer):
        try:
            return pjit_.MetaTy(
                aval=arg.aval,
                sharding=arg.sharding,
                format=None,
                committed=bool(getattr(arg, "_committed", True)),
                is_np_array=False,
            )
        except Exception:
            pass
    return pjit_.convert_to_metaty(arg)
