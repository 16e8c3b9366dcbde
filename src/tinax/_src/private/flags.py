"""JAX's and chex's global settings and state, read now: chex assertions, `jax.disable_jit`,
the `jax.jit` cache object, the trace context's config, `jax.distributed`."""

from __future__ import annotations

from typing import Any

from chex._src import asserts_internal as _chex_internal  # pyright: ignore[reportMissingTypeStubs]
from jax._src import config as _jax_config


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


def distributed_state() -> Any:
    """JAX's ``jax.distributed`` state: ``client`` (its coordination service client, with
    the key-value store calls), ``service``, ``process_id``, ``num_processes``. No public
    API reaches the client."""
    from jax._src import distributed  # pyright: ignore[reportMissingTypeStubs]

    return distributed.global_state
