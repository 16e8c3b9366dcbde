"""JAX's compile events (`jax.monitoring`) and the stage method a compile is counted by."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
