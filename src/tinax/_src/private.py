"""Every private JAX and chex API tinax relies on, in one place.

Each has no public equivalent (noted per function). Keeping them here makes a
JAX or chex upgrade a one-file review; the tests exercise each of them, and CI
runs them on jax 0.9.2, 0.10.2 and the newest release (0.12.0.1 today), with
chex 0.1.84 and 0.1.92. Where each one lives, and what happens on a JAX where it
does not:

- mesh contexts (`enter_mesh`, `mesh_contexts`, `restore_mesh`,
  `ambient_concrete_mesh`): ``jax._src.config`` to 0.11.1, ``jax._src.mesh`` from
  0.11.2, found by attribute; neither: tinax's import fails with one line.
- ``cache_miss``'s locals (`jit_call`): 0.9.2 to 0.12.0.1; renamed: no compile is
  counted for the call, its traces still are.
- ``_pjit_call_impl_python``'s local ``jaxpr`` (`compiled_jaxpr`),
  ``PjitInfo.fun_sourceinfo`` on a `jax.jit` object and ``DebugInfo.func_src_info`` of
  a jaxpr, copied by JAX's transformations (`jit_source`, `jaxpr_source`): run on
  0.10.2, read in 0.9.2's and 0.11.1's source; renamed: a compile under an eager
  transform is counted only inside the object's own call, as a compile of its trace.
- JAX's stages (``Traced``, ``Lowered``) having a ``__dict__`` (`shadow_method`):
  0.10.2 and 0.12.0.1; without one: a stage's compile is not counted.
- ``_infer_input_type`` formatting the jitted function into its message for a
  leaf it cannot trace, and ``_infer_params``'s locals (`rejected_leaf_call`):
  0.9.2 to 0.12.0.1; renamed: the call raises JAX's own message.
- ``core.trace_ctx`` and ``DynamicJaxprTrace`` (`tracing_to_jaxpr`, `staged_out`):
  0.9.2 to 0.12.0.1; no fallback (the import fails).
- ``config.trace_context_names`` (`trace_config`): missing: no config row.
- ``traceback_util`` (`hide_from_tracebacks`, `filter_traceback`): missing
  filtering mode: tracebacks are left whole. ``source_info_util.register_exclusion``
  (`hide_from_tracebacks`): missing: JAX's source locations may name tinax's lines.
- ``_trace_for_jit``'s and ``_infer_params``'s locals, ``_resolve_in_shardings``,
  ``_get_and_check_device_assignment`` (`misplaced`): 0.10.2 and 0.12.0.1;
  renamed: a call placed against ``in_shardings`` fails as in JAX, after a
  counted trace.
- ``ShapedArray``'s constructor and ``abstract_token`` (`portable_dumps`): no
  readable signature: plain pickling (equal by value on 0.9.2 and 0.10.2).
- ``literals`` (`literal_array_types`): missing: none.
- JAX's compile events (`COMPILE_EVENT`, `CACHE_HIT_EVENT`): run on 0.10.2 and
  0.12.0.1 (`cache_loads`, `no_new_compiles`); where a JAX stops recording the
  start of a compile, a load is told from a compile by the next request to the
  persistent cache, and `no_new_compiles` reports a budgeted object's compile at
  the scope's end instead of refusing it.
- ``config.jax_jit_cpp_cache_obj`` (`jit_cache_object`, `no_jit_cache_object`): the
  one config option `jax.jit` reads when it builds its object (``pjit._cpp_pjit``;
  read on 0.10.2 and 0.12.0.1); missing: ``None``, nothing to capture.
- ``sharding_impls.UNSPECIFIED``, ``distributed.global_state``,
  ``core.valid_jaxtype``, chex's ``DISABLE_ASSERTIONS``: 0.9.2 to 0.12.0.1, no
  fallback.

- ``pjit.jit_trace``, a `jax.jit` object's ``_fun`` and ``_jit_info``,
  ``pjit._infer_params_cached``, ``pe.trace_to_jaxpr.evict_weakref``
  (`fresh_trace`, `forget_trace`): read on 0.10.2; moved: warm start drops every
  warm trace at its first call (the call traces as without warm start).
- ``config.hlo_source_file_canonicalization_regex`` (in the trace context from
  0.9.2 to 0.12.1), ``cache_keys``/``evict_weakref`` of ``_infer_params_cached``
  and ``trace_to_jaxpr``, ``util._caches`` and ``linear_util.cache``'s table
  (`fresh_trace`, `forget_nested`): read on 0.10.2.

Rules that changed between releases are read from the version (`JAX_VERSION`):
`STATIC_HASH_DECIDES`.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import itertools
import pickle
import threading
import types
import weakref
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, NamedTuple, cast

import jax
from chex._src import asserts_internal as _chex_internal  # pyright: ignore[reportMissingTypeStubs]
from jax._src import config as _jax_config
from jax._src import core as _jax_core
from jax._src import lib as _jax_lib
from jax._src import pjit as _pjit
from jax._src import tree_util as _tree_util
from jax._src import util as _jax_util
from jax._src.interpreters import partial_eval as _partial_eval
from jax.core import Tracer
from jax.sharding import Mesh


def _version_tuple(text: str) -> tuple[int, int, int]:
    """``"0.12.0.1"`` -> ``(0, 12, 0)``; a part that is not a number reads as 0."""
    parts = [int(part) if part.isdigit() else 0 for part in text.split(".")[:3]]
    major, minor, patch = [*parts, 0, 0, 0][:3]
    return major, minor, patch


JAX_VERSION: tuple[int, int, int] = _version_tuple(jax.__version__)
"""The running JAX's ``(major, minor, patch)``, for the rules that changed between
releases (each named where it is used)."""

STATIC_HASH_DECIDES: bool = JAX_VERSION >= (0, 11, 0)
"""Whether `jax.jit` finds a static argument by its hash as well as by type and ``==``.
Measured (`tests/test_jax_agrees.py`): on jax 0.9.2 and 0.10.2 a static value equal by
``==`` with another hash reuses the trace; on 0.11.0 and later (0.12.0.1 run here) it
traces again."""


def _mesh_context_home() -> Any:
    """The module that holds JAX's two mesh contexts (``device_context``, the
    concrete mesh, and ``abstract_mesh_context_manager``): ``jax._src.config`` up
    to jax 0.11.1, ``jax._src.mesh`` from jax 0.11.2 (run here on 0.9.2, 0.10.2 and
    0.12.0.1). Looked up by attribute, not by version, so that a JAX that moves
    them back or keeps both still works."""
    from jax._src import mesh as _jax_mesh

    for module in (_jax_mesh, _jax_config):
        if hasattr(module, "device_context") and hasattr(module, "abstract_mesh_context_manager"):
            return module
    raise ImportError(
        f"tinax: this JAX ({jax.__version__}) keeps its mesh contexts in "
        "neither jax._src.mesh nor jax._src.config; tinax supports jax 0.9.2 to 0.12.x."
    )


_MESH_CONTEXTS: Any = _mesh_context_home()


def chex_asserts_enabled() -> bool:
    """Whether chex assertions are on (`chex.disable_asserts` has no getter)."""
    return not _chex_internal.DISABLE_ASSERTIONS


def jit_disabled() -> bool:
    """Whether `jax.disable_jit` is in effect."""
    config: Any = _jax_config
    return bool(config.disable_jit.value)


_JIT_CACHE_OBJECT: Any = getattr(_jax_config, "jax_jit_cpp_cache_obj", None)
# Its state, read without the user-context wrapper (half the ~0.2 us of a wrap it costs).
_JIT_CACHE_STATE: Any = getattr(_JIT_CACHE_OBJECT, "_obj", _JIT_CACHE_OBJECT)


def jit_cache_object() -> Any:
    """The C++ cache a `jax.jit` object built now would file its executables in:
    ``config.jax_jit_cpp_cache_obj``, a user context that ``pjit._cpp_pjit`` reads when
    it builds the object (the only config `jax.jit` reads then, on jax 0.10.2 and
    0.12.0.1; its ``_parse_jit_arguments`` reads none), or ``None`` (JAX's global cache).
    No public equivalent: JAX's own test sets it around ``jax.jit(f)``."""
    if _JIT_CACHE_STATE is None:
        return None
    return _JIT_CACHE_STATE.value


def no_jit_cache_object() -> Any:
    """A context in which `jit_cache_object` is ``None``: a `jax.jit` object built in
    it uses JAX's global cache, as one built where none was set."""
    return _JIT_CACHE_OBJECT(None)


def tracing_to_jaxpr() -> bool:
    """Whether the innermost trace builds a jaxpr (jit, lower, trace, eval_shape).

    Under `jax.disable_jit`, a call runs the function eagerly but ``.lower``
    still traces; this tells the two apart.
    """
    core: Any = _jax_core
    return isinstance(core.trace_ctx.trace, _partial_eval.DynamicJaxprTrace)


def valid_output(out: object) -> bool:
    """Whether JAX will accept ``out`` as a jitted function's result.

    A body that returns, say, a string is a failed trace: JAX raises after the
    body returns, caches nothing and traces again on the next call.
    """
    core: Any = _jax_core
    leaves: list[Any] = jax.tree_util.tree_leaves(out)
    # Tracers first: valid_jaxtype rejects them on some JAX versions (<= 0.9.1).
    return all(isinstance(leaf, Tracer) or core.valid_jaxtype(leaf) for leaf in leaves)


def enter_mesh(mesh: Mesh) -> tuple[Any, Any]:
    """Makes ``mesh`` the ambient mesh as `jax.set_mesh` does, minus its refusal
    to run inside a trace. Returns what `restore_mesh` needs."""
    contexts = _MESH_CONTEXTS
    previous_abstract = contexts.abstract_mesh_context_manager.swap_local(mesh.abstract_mesh)
    previous_concrete = contexts.device_context.swap_local(mesh)
    return previous_abstract, previous_concrete


def mesh_contexts() -> tuple[Any, Any]:
    """JAX's two contexts that ``with jax.set_mesh(mesh):`` sets: the concrete mesh and
    the abstract mesh. ``set_mesh(mesh)`` is in effect when their ``value`` is exactly
    ``mesh`` and ``mesh.abstract_mesh``; ``value`` is a C getter, cheap enough for
    every call, read in the caller's own frame. There is no public getter for the
    concrete mesh that works inside traces (`jax.sharding.get_mesh` refuses there)."""
    contexts = _MESH_CONTEXTS
    return contexts.device_context, contexts.abstract_mesh_context_manager


def restore_mesh(previous: tuple[Any, Any]) -> None:
    """Undoes `enter_mesh`."""
    contexts = _MESH_CONTEXTS
    contexts.abstract_mesh_context_manager.set_local(previous[0])
    contexts.device_context.set_local(previous[1])


# JAX config options in the trace cache key that tinax reports elsewhere (the
# mesh) or that change inside every transformation (the axis environment).
_NOT_CONFIG = frozenset({"mesh_context_manager", "abstract_mesh_context_manager", "axis_env_state"})


def trace_config() -> tuple[tuple[str, Any], ...]:
    """``(name, value)`` of each JAX config option in the trace cache key.

    JAX retraces when one of these changes (``jax.default_matmul_precision``,
    ``jax.numpy_rank_promotion``, x64...). Empty on JAX versions that do not
    name them (``trace_context_names`` is missing or raises there).
    """
    config: Any = _jax_config
    try:
        names = config.trace_context_names()
    except Exception:
        return ()
    values = config.trace_context()
    return tuple(
        (name, value) for name, value in zip(names, values, strict=False) if name not in _NOT_CONFIG
    )


def hide_from_tracebacks(path: str) -> None:
    """Hides the frames of files under ``path`` from tracebacks, as JAX hides its own
    (``JAX_TRACEBACK_FILTERING=off`` shows them again), and from the source
    locations JAX names (``source_info_util``: "This error occurs at source: ...",
    the line jax 0.12 prints for an indivisible sharding, a jaxpr equation's
    location), which then name the user's line, never tinax's. Equinox does the
    first; JAX has no public API for either."""
    from jax._src import source_info_util, traceback_util

    register: Any = traceback_util.register_exclusion
    register(path)
    exclude: Any = getattr(source_info_util, "register_exclusion", None)
    if exclude is not None:  # jax 0.9.2 to 0.12.0.1; missing: JAX may name tinax's line
        exclude(path)


def filter_traceback(error: BaseException) -> None:
    """Drops the hidden frames (JAX's, tinax's) from ``error``'s traceback, unless
    ``JAX_TRACEBACK_FILTERING`` says not to. Re-raise ``error`` with a bare ``raise``
    afterwards, so that the re-raising frame is not added back."""
    from jax._src import traceback_util

    util: Any = traceback_util
    try:
        mode = util._filtering_mode()  # pyright: ignore[reportPrivateUsage]
    except Exception:
        return
    if mode in ("off", "tracebackhide") or error.__traceback__ is None:
        return
    error.with_traceback(util.filter_traceback(error.__traceback__))


def staged_out() -> bool:
    """Whether the trace in progress is nested in another one that stages out to a
    jaxpr (an outer `jax.jit`, a `jax.lax.scan` body, `jax.eval_shape`...): its
    result is then inlined into the outer jaxpr and compiled with it, never alone.

    Called from inside the traced function: the current trace is the one
    `jax.jit` made for it, and each trace links to the one it was started in
    (``parent_trace``); transformations that do not stage out (`jax.grad`,
    `jax.vmap`) sit in between. No public API says whether a trace is nested.
    """
    core: Any = _jax_core
    trace = getattr(core.trace_ctx.trace, "parent_trace", None)
    for _ in range(64):
        if trace is None:
            return False
        if isinstance(trace, _partial_eval.DynamicJaxprTrace):
            return True
        trace = getattr(trace, "parent_trace", None)
    return False


def unspecified() -> Any:
    """`jax.jit`'s own default for ``in_shardings``/``out_shardings`` ("not given").

    No public equivalent: `jax.jit`'s signature shows it as its default.
    """
    from jax._src import sharding_impls

    return cast(Any, sharding_impls).UNSPECIFIED


def ambient_concrete_mesh() -> Mesh | None:
    """The mesh of the innermost ``jax.set_mesh`` (or of a bound object's call), also
    inside a trace; ``None`` when there is none. `jax.sharding.get_mesh` refuses to
    run inside a trace."""
    value = _MESH_CONTEXTS.device_context.value
    return value if isinstance(value, Mesh) and not value.empty else None


def distributed_state() -> Any:
    """JAX's ``jax.distributed`` state: ``client`` (its coordination service client, with
    the key-value store calls), ``service``, ``process_id``, ``num_processes``. No public
    API reaches the client."""
    from jax._src import distributed  # pyright: ignore[reportMissingTypeStubs]

    return distributed.global_state


def literal_array_types() -> tuple[type, ...]:
    """JAX's array types for literals that are not `jax.Array` (``LiteralArray``,
    ``TypedNdArray``), which ``eqx.is_array`` counts as arrays; none where this JAX
    version lacks them. No public name."""
    found: list[type] = []
    try:
        from jax._src import literals
    except ImportError:
        return ()
    for name in ("LiteralArray", "TypedNdArray"):
        kind = getattr(literals, name, None)
        if isinstance(kind, type):
            found.append(kind)
    return tuple(found)


# --- abstract values that cross processes -----------------------------------------------


def _constructor_parameters(kind: type) -> tuple[tuple[str, ...], dict[str, Any]] | None:
    """``(positional names, {keyword name: default})`` of ``kind``'s constructor, or
    ``None`` where it has no readable signature."""
    try:
        parameters = list(inspect.signature(kind).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = tuple(p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD)
    keywords = {p.name: p.default for p in parameters if p.kind is p.KEYWORD_ONLY}
    return positional, keywords


_SHAPED_ARRAY: Any = _jax_core.ShapedArray
_SHAPED_ARRAY_PARAMETERS = _constructor_parameters(_SHAPED_ARRAY)
_ABSTRACT_TOKEN: Any = getattr(_jax_core, "abstract_token", None)


def _shaped_array(positional: tuple[Any, ...], keywords: dict[str, Any]) -> Any:
    return _SHAPED_ARRAY(*positional, **keywords)


def _abstract_token() -> Any:
    return _ABSTRACT_TOKEN


class PortablePickler(pickle.Pickler):
    """The pickler of `portable_dumps`, for picklers that add to it."""

    def reducer_override(self, obj: Any) -> Any:
        if _ABSTRACT_TOKEN is not None and obj is _ABSTRACT_TOKEN:
            return _abstract_token, ()
        if type(obj) is not _SHAPED_ARRAY or _SHAPED_ARRAY_PARAMETERS is None:
            return NotImplemented
        names, defaults = _SHAPED_ARRAY_PARAMETERS
        if not all(hasattr(obj, name) for name in (*names, *defaults)):
            return NotImplemented
        positional = tuple(getattr(obj, name) for name in names)
        keywords = {
            name: getattr(obj, name)
            for name, default in defaults.items()
            if getattr(obj, name) is not default  # a default singleton stays the default
        }
        return _shaped_array, (positional, keywords)


def portable_dumps(value: object) -> bytes:
    """``pickle.dumps`` for a value that another process compares with its own (the
    signatures that ``fail_fast``'s trace agreement exchanges).

    From jax 0.11.2 (0.12.0.1 run here) JAX interns abstract values (``ShapedArray``,
    the abstract token) and compares them by identity: a plain unpickled copy never
    equals the original. Here each ``ShapedArray`` is pickled as a call of its
    constructor (the fields its signature names), which returns the loading
    process's own interned value, and the abstract token as the loader's singleton.
    On jax 0.9.2 and 0.10.2, where they compare by value, the result is the same.
    """
    buffer = io.BytesIO()
    PortablePickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


# --- compile events ------------------------------------------------------------------------

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
"""The event of one XLA compile, through `jax.monitoring`: a scalar listener hears it when
the compile starts (``record_scalar``, value the start time) and a duration listener when
it ends, both in the compiling thread, from inside the `jax.jit` call that missed its
cache (``jax._src.dispatch.log_elapsed_time`` around ``compiler.compile_or_get_cached``,
in ``jax._src.interpreters.pxla._cached_compilation``). It is recorded for a load from
JAX's persistent compilation cache as for a compile: the executable came from
``compile_or_get_cached`` either way. An exception a scalar listener raises propagates
out of the call before anything is compiled (nothing is cached; the next call tries
again). Run on jax 0.10.2 and 0.12.0.1."""

CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
"""The event ``compiler.compile_or_get_cached`` records (``record_event``) when it returns
an executable loaded from the persistent compilation cache, in the compiling thread,
after the compile's start and before its end (`COMPILE_EVENT`). Nothing in between can
start another compile in that thread. Run on jax 0.10.2 and 0.12.0.1."""

CACHE_REQUEST_EVENT = "/jax/compilation_cache/compile_requests_use_cache"
"""The event recorded before each read of the persistent cache (a hit or a miss follows),
in the compiling thread. Run on jax 0.10.2 and 0.12.0.1."""


def shadow_method(stage: Any, name: str, method: Callable[..., Any]) -> bool:
    """Makes ``stage.name`` (a method of one of JAX's stages, ``Traced`` or ``Lowered``)
    ``method`` for this object only; ``False`` where the object cannot take it.

    No public API tells which `jax.jit` object a stage came from when it is
    compiled. JAX's stage classes declare ``__slots__`` below a base class that
    declares none (``jax._src.stages.Stage``), so each object has a ``__dict__``,
    where an attribute comes before the class's method; the object's type and
    every other attribute stay JAX's own. Run on jax 0.10.2 and 0.12.0.1; where a
    JAX gives its stages no ``__dict__``, nothing is set and the compile is not
    counted for the object.
    """
    try:
        vars(stage)[name] = method
    except TypeError:  # no __dict__
        return False
    return True


# --- the jax.jit call that missed its cache ----------------------------------------------

_MAX_FRAMES = 64  # how far up from a compile or a trace the jax.jit call is looked for


def _pjit_file() -> str:
    from jax._src import pjit

    return pjit.__file__


_PJIT_FILE = _pjit_file()


def _pjit_frame(frame: types.FrameType, name: str) -> bool:
    """Whether ``frame`` runs the function ``name`` of ``jax/_src/pjit.py``."""
    code = frame.f_code
    return code.co_name == name and code.co_filename == _PJIT_FILE


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
    for _ in range(_MAX_FRAMES):
        if frame is None:
            return None
        if _pjit_frame(frame, "cache_miss"):
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
    for _ in range(_MAX_FRAMES):
        if frame is None:
            return None
        if _pjit_frame(frame, "_pjit_call_impl_python"):
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
    if frame is None or not _pjit_frame(frame, "_infer_input_type"):
        return None
    caller = frame.f_back
    if caller is None or not _pjit_frame(caller, "_infer_params"):
        return None
    local = caller.f_locals
    args: object = local.get("args")
    kwargs: object = local.get("kwargs")
    if type(args) is not tuple or type(kwargs) is not dict:
        return None
    return cast(tuple[Any, ...], args), cast(dict[str, Any], kwargs)


# --- a call placed against jax.jit's shardings -------------------------------------------

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
        if frame.f_code.co_filename == _PJIT_FILE and frame.f_code.co_name in _CALL_ENTRIES:
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
    for _ in range(_MAX_FRAMES):
        if frame is None:
            return None
        if _pjit_frame(frame, "_trace_for_jit"):
            break
        frame = frame.f_back
    else:
        return None
    caller = frame.f_back
    if caller is None or not _pjit_frame(caller, "_infer_params"):
        return None
    if lowering_only and not _entry(caller):
        return None
    local = frame.f_locals
    in_shardings: Any = local.get("in_shardings_flat")
    ctx_mesh: Any = local.get("ctx_mesh")
    dynargs: Any = caller.f_locals.get("dynargs")
    if in_shardings is None or ctx_mesh is None or not isinstance(dynargs, (list, tuple)):
        return None
    arguments = cast(Sequence[Any], dynargs)
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
    unique: Any = cast(Any, util).stable_unique(resolved)
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


def unspecified_type() -> type:
    """The type of `jax.jit`'s "not given" sharding (`unspecified`)."""
    value: object = unspecified()
    return type(value)


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


# --- warm start's check of a warm trace (`warm/session`) -------------------------------------


CHECK_SUFFIX = "__warm_start_check"  # the name JAX gives a fresh trace (`fresh_trace`)


def fresh_trace(jitted: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """JAX's stage (``Traced``) of the `jax.jit` object ``jitted`` for a call, traced now
    whatever JAX's caches hold: its function is traced as a new object (a function
    that calls it, keyed nowhere else, so each trace cache misses and its entries die
    with it), with the object's own options (``_jit_info``). JAX names it
    ``<name>__warm_start_check`` (`CHECK_SUFFIX`) in its logs and events: a trace that
    checks another, never lowered. Read on 0.10.2 (``pjit.jit_trace``, ``_fun``,
    ``_jit_info``); raises where JAX moved them, and the warm trace is then dropped
    (`warm/session`)."""
    function = jitted._fun

    def fresh(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    fresh.__name__ = fresh.__qualname__ = f"{jitted.__name__}{CHECK_SUFFIX}"
    stand_in = types.SimpleNamespace(_fun=fresh, _jit_info=jitted._jit_info)
    # Every trace cache of JAX keys on the trace context: under a context of its own, the
    # check misses them all, so a function the step calls through one (a nested jax.jit,
    # a lax.scan body) is traced again too, with the state the program holds now.
    marker = f"(?!)tinax-warm-start-check-{next(_CHECKS)}"  # a regex matching no file
    config: Any = _jax_config
    with config.hlo_source_file_canonicalization_regex(marker):  # in the trace context only
        stage: Any = _pjit.jit_trace(stand_in, *args, **kwargs)  # pyright: ignore[reportUnknownMemberType]
    _NESTED[stage] = _traced_under(marker)
    return stage


_CHECKS = itertools.count()
# a check's stage -> the functions its trace traced through JAX's trace caches
_NESTED: weakref.WeakKeyDictionary[Any, tuple[Any, ...]] = weakref.WeakKeyDictionary()


def _trace_caches() -> list[Any]:
    """JAX's caches of traces keyed on a function and the trace context:
    ``pjit._infer_params_cached`` (a nested `jax.jit`), ``pe.trace_to_jaxpr`` (a
    control-flow body, a custom rule) and every ``linear_util.cache`` (registered in
    ``util._caches``). Other weakref LRU caches key on jaxprs, and reading their keys
    can crash the process (``_cached_abstract_eval``'s, on 0.10.2): they are left."""
    util: Any = _jax_util
    pjit: Any = _pjit
    partial_eval: Any = _partial_eval
    memoized = [
        cache
        for cache in list(util._caches)
        if isinstance(
            getattr(getattr(cache, "cache_clear", None), "__self__", None),
            weakref.WeakKeyDictionary,
        )
    ]
    return [pjit._infer_params_cached, partial_eval.trace_to_jaxpr, *memoized]


def _traced_under(marker: str) -> tuple[Any, ...]:
    """The functions (or other weakly keyed objects) whose entries in JAX's trace
    caches were made under the trace context holding ``marker``."""
    found: list[Any] = []
    for cache in _trace_caches():
        keys = getattr(cache, "cache_keys", None)
        if keys is not None:  # a weakref LRU cache: (weakref, context, args, kwargs)
            for key in keys():
                if len(key) > 1 and isinstance(key[1], tuple) and marker in key[1]:
                    target = key[0]() if isinstance(key[0], weakref.ref) else key[0]
                    if target is not None:
                        found.append(target)
            continue
        table = getattr(getattr(cache, "cache_clear", None), "__self__", None)
        if isinstance(table, weakref.WeakKeyDictionary):  # linear_util.cache: f -> {key: ...}
            items = cast(weakref.WeakKeyDictionary[Any, dict[Any, Any]], table).items()
            for function, entries in list(items):
                if any(_marked(key, marker) for key in list(entries)):
                    found.append(function)
    return tuple(found)


def _marked(key: object, marker: str) -> bool:
    """Whether a ``linear_util.cache`` key (its last part: the trace context) holds
    ``marker``."""
    if not isinstance(key, tuple) or not key:
        return False
    context = cast(tuple[object, ...], key)[-1]
    return isinstance(context, tuple) and marker in context


def forget_nested(stage: Any) -> None:
    """Evicts from every JAX trace cache the functions that the check ``stage``
    (`fresh_trace`) traced through them: a warm trace that differs from its check
    may have left their entries with the state of its time (a nested `jax.jit` that
    reads a global), so that the call's trace, and any later one, traces them again."""
    for target in _NESTED.pop(stage, ()):
        for cache in _trace_caches():
            evict = getattr(cache, "evict_weakref", None) or getattr(cache, "evict_function", None)
            if evict is None:
                continue
            with contextlib.suppress(Exception):  # not weakly keyable there: never cached
                evict(target)


def forget_trace(jitted: Any, args: tuple[Any, ...], kwargs: dict[str, Any], jaxpr: Any) -> None:
    """Drops from JAX's trace caches the trace of ``jitted`` whose closed jaxpr is
    ``jaxpr``, for a call with these arguments (in this thread's mesh context): its
    entry in ``pjit._infer_params_cached`` is emptied if it holds that trace, and
    ``pe.trace_to_jaxpr``'s entries for the function are evicted, so that a call
    with them traces again (its other signatures keep their entries; the C++ dispatch
    cache holds only signatures already called). Read on 0.10.2; raises where JAX
    moved them (the caller then empties the object's whole cache)."""
    pjit: Any = _pjit
    lib: Any = _jax_lib
    core: Any = _jax_core
    tree_util: Any = _tree_util
    partial_eval: Any = _partial_eval
    info: Any = jitted._jit_info
    fun = jitted._fun
    arg_signature, dynargs = lib.jax_jit.parse_arguments(
        args,
        tuple(kwargs.values()),
        tuple(kwargs.keys()),
        info.static_argnums,
        info.static_argnames,
        tree_util.tracing_registry,
    )
    avals = tuple(core.shaped_abstractify(value) for value in dynargs)
    mesh = pjit.get_ctx_mesh(info.use_resource_env)
    entry: Any = pjit._infer_params_cached(fun, info, arg_signature, avals, mesh)
    partial_eval.trace_to_jaxpr.evict_weakref(fun)
    found = entry.pjit_params
    if found is not None and found.params["jaxpr"] is jaxpr:
        entry.pjit_params = None
