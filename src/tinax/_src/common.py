"""Behaviour shared by `BoundedJit` and `BatchedJit`: metadata, binding, introspection."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any, cast

from jax.sharding import Mesh

from tinax._src import budget, meshes

_COPIED = ("__module__", "__name__", "__qualname__", "__doc__")


def build(
    owner: Any,
    function: Callable[..., Any],
    traced: Callable[..., Any],
    max_traces: int,
    signature: inspect.Signature | None,
    static_argnames: tuple[str, ...],
    mesh: Mesh | None,
    jit: Callable[[Callable[..., Any]], Any],
) -> None:
    """Builds the counted, compiled callable of ``owner`` once, and its metadata.

    ``traced`` is what JAX traces (the function, or its `jax.vmap`); ``jit``
    compiles the counted version of it.
    """
    setattr_ = object.__setattr__
    ledger = budget.Ledger()
    jitted = jit(budget.counted(traced, ledger, max_traces, signature, static_argnames, function))
    setattr_(owner, "_ledger", ledger)
    setattr_(owner, "_jitted", jitted)
    setattr_(owner, "_call", meshes.bind_mesh(jitted, mesh, type(owner).__name__))
    for name in _COPIED:
        try:
            value = getattr(function, name)
        except Exception:
            continue
        setattr_(owner, name, value)
    setattr_(owner, "__wrapped__", function)


class BudgetedMixin:
    """Introspection and forwarding shared by the two classes (no fields)."""

    _ledger: budget.Ledger
    _jitted: Any
    _call: Callable[..., Any]
    function: Callable[..., Any]
    max_traces: int
    mesh: Mesh | None

    @property
    def traces_used(self) -> int:
        """How many traces this object has made so far (never more than `max_traces`
        while chex assertions are on)."""
        return self._ledger.used

    @property
    def traced_signatures(self) -> budget.TraceHistory:
        """The abstract signature of each trace so far, oldest first; prints as a table."""
        with self._ledger.lock:
            return budget.TraceHistory(self._ledger.history)

    def _under_mesh(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        forward = getattr(self._jitted, method)
        if self.mesh is None:
            return forward(*args, **kwargs)
        with meshes.mesh_scope(self.mesh, type(self).__name__):
            return forward(*args, **kwargs)

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """Lowers the function for these arguments (under the mesh if set); counts a trace
        if the signature is new. See `jax.jit`'s ``lower``."""
        return self._under_mesh("lower", args, kwargs)

    def trace(self, *args: Any, **kwargs: Any) -> Any:
        """Traces the function for these arguments (under the mesh if set); counts a trace
        if the signature is new. See `jax.jit`'s ``trace``."""
        return self._under_mesh("trace", args, kwargs)

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        """Output shapes and dtypes for these arguments, without running the function;
        counts a trace if the signature is new. See `jax.jit`'s ``eval_shape``."""
        return self._under_mesh("eval_shape", args, kwargs)

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return types.MethodType(cast(Callable[..., Any], self), instance)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({budget.function_name(self.function)}, "
            f"traces_used={self.traces_used}, max_traces={self.max_traces}, mesh={self.mesh!r})"
        )
