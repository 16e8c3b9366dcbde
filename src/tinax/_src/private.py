"""Every private JAX and chex API tinax relies on, in one place.

Each has no public equivalent (noted per function). Keeping them here makes a
JAX or chex upgrade a one-file review; the tests exercise each of them.
"""

from __future__ import annotations

from typing import Any, cast

import jax
from chex._src import asserts_internal as _chex_internal  # pyright: ignore[reportMissingTypeStubs]
from jax._src import config as _jax_config
from jax._src import core as _jax_core
from jax._src.interpreters import partial_eval as _partial_eval
from jax.core import Tracer
from jax.sharding import Mesh


def chex_asserts_enabled() -> bool:
    """Whether chex assertions are on (`chex.disable_asserts` has no getter)."""
    return not _chex_internal.DISABLE_ASSERTIONS


def jit_disabled() -> bool:
    """Whether `jax.disable_jit` is in effect."""
    config: Any = _jax_config
    return bool(config.disable_jit.value)


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
    config: Any = _jax_config
    previous_abstract = config.abstract_mesh_context_manager.swap_local(mesh.abstract_mesh)
    previous_concrete = config.device_context.swap_local(mesh)
    return previous_abstract, previous_concrete


def mesh_contexts() -> tuple[Any, Any]:
    """JAX's two contexts that ``with jax.set_mesh(mesh):`` sets: the concrete mesh and
    the abstract mesh. ``set_mesh(mesh)`` is in effect when their ``value`` is exactly
    ``mesh`` and ``mesh.abstract_mesh``; ``value`` is a C getter, cheap enough for
    every call, read in the caller's own frame. There is no public getter for the
    concrete mesh that works inside traces (`jax.sharding.get_mesh` refuses there)."""
    config: Any = _jax_config
    return config.device_context, config.abstract_mesh_context_manager


def restore_mesh(previous: tuple[Any, Any]) -> None:
    """Undoes `enter_mesh`."""
    config: Any = _jax_config
    config.abstract_mesh_context_manager.set_local(previous[0])
    config.device_context.set_local(previous[1])


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
    (``JAX_TRACEBACK_FILTERING=off`` shows them again). Equinox does the same; JAX
    has no public API for it."""
    from jax._src import traceback_util

    register: Any = traceback_util.register_exclusion
    register(path)


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
    config: Any = _jax_config
    value = config.device_context.value
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
