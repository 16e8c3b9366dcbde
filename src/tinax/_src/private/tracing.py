"""The trace in progress: whether it builds a jaxpr, whether it is nested in one that
stages out, and whether JAX accepts what the traced function returned."""

from __future__ import annotations

from typing import Any

import jax
from jax._src import core as _jax_core
from jax._src.interpreters import partial_eval as _partial_eval
from jax.core import Tracer


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
