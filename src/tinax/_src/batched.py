"""`BatchedJit` and `batched_jit`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs
import jax
from jax.sharding import Mesh

from tinax._src import common, validation

R = TypeVar("R")

_API = "BatchedJit"


@attrs.frozen(eq=False, slots=False, repr=False)
class BatchedJit(common.BudgetedMixin, Generic[R]):
    """``jax.jit(jax.vmap(function))`` with an exact, per-object trace budget.

    Built by `batched_jit`, which takes the same arguments; see there for what
    each one means. Every argument is validated when the object is built, and
    the compiled callable is built once, then. Fields are read-only.

    Attributes:
        function: The wrapped (unbatched) callable.
        in_axes: Input batch axis specification, as given to `jax.vmap`.
        out_axes: Output batch axis specification, as given to `jax.vmap`.
        axis_size: Explicit batch size, or ``None`` to infer it.
        max_traces: The budget: how many traces are permitted.
        mesh: The mesh entered around every call, or ``None``.
        on_exceed: The overrun policy (``"raise"``, ``"warn"``, ``"log"``), or
            ``None`` for the process default.
        traces_used: How many traces this object has made.
        traced_signatures: The abstract (batched) signature of each trace, oldest first.
    """

    function: Callable[..., R]
    in_axes: int | None | Sequence[Any] = attrs.field(default=0, kw_only=True)  # noqa: RUF036 (the page's order)
    out_axes: Any = attrs.field(default=0, kw_only=True)
    axis_size: int | None = attrs.field(default=None, kw_only=True)
    max_traces: int = attrs.field(kw_only=True)
    mesh: Mesh | None = attrs.field(default=None, kw_only=True)
    on_exceed: validation.OnExceed | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        function = validation.check_function(_API, self.function)
        axis_size = validation.check_axis_size(_API, self.axis_size)
        max_traces = validation.check_max_traces(_API, self.max_traces)
        mesh = validation.check_mesh(_API, self.mesh)
        on_exceed = validation.check_on_exceed(_API, self.on_exceed)
        object.__setattr__(self, "axis_size", axis_size)
        object.__setattr__(self, "max_traces", max_traces)
        object.__setattr__(self, "on_exceed", on_exceed)
        # in_axes/out_axes pass through: jax.vmap gives specific errors for them.
        batched = validation.vmapped(_API, function, self.in_axes, self.out_axes, axis_size)
        signature = validation.LazySignature(function)

        def jit(counted: Callable[..., Any]) -> Any:
            return jax.jit(counted)  # pyright: ignore[reportUnknownMemberType]

        common.build(self, function, batched, max_traces, signature, (), mesh, jit)

    if TYPE_CHECKING:  # at run time, BudgetedMixin.__call__: no Python frame per call

        def __call__(self, *args: Any, **kwargs: Any) -> R:
            return self._call(*args, **kwargs)


def batched_jit(
    function: Callable[..., R],
    *,
    in_axes: int | None | Sequence[Any] = 0,  # noqa: RUF036 (the page's order)
    out_axes: Any = 0,
    axis_size: int | None = None,
    max_traces: int,
    mesh: Mesh | None = None,
    on_exceed: validation.OnExceed | None = None,
) -> BatchedJit[R]:
    """Batch a callable with jax.vmap, then JIT it with an exact Chex trace budget.

    in_axes/out_axes are passed through unvalidated: raw jax.vmap already gives
    clear, specific errors for a malformed axis specification. axis_size is
    validated because raw jax.vmap silently accepts a boolean there, producing
    an unrelated, confusing error instead of a clear rejection. This is the
    auto-parallel, JAX-native replacement for legacy pmap-style batching;
    combine with a Manual-axis tinax.parallel.shard_mapped for the manual-SPMD
    alternative.

    The budget counts traces of the whole batched computation, exactly as for
    `bounded_jit`; the traced signatures record the batched arguments.

    Args:
        function: Callable to batch and JIT-compile.
        in_axes: Input batch axis specification, forwarded to `jax.vmap`. Defaults to 0.
        out_axes: Output batch axis specification, forwarded to `jax.vmap`. Defaults to 0.
        axis_size: Explicit batch size, or `None` to infer it from the arguments.
            Must be positive if given.
        max_traces: Maximum number of distinct traces to permit. Must be non-negative.
        mesh: Mesh to enter around every call, or `None` to use the ambient mesh.
        on_exceed: What a trace over the budget does: ``"raise"`` (raise
            `TraceBudgetError`, the page's behaviour), ``"warn"`` (emit a
            `TraceBudgetWarning` with the same diagnosis, then run and count
            the trace) or ``"log"`` (log it at ``WARNING`` on the ``tinax``
            logger, then run and count the trace). Defaults to `None`: the
            innermost `exceed_policy`, else the ``TINAX_ON_EXCEED`` environment
            variable, else ``"raise"``.

    Returns:
        The batched, trace-budgeted, JIT-compiled callable.

    Raises:
        TypeError: If `function` is not callable, `axis_size` is not an integer
            or `None` (booleans rejected), `max_traces` is not an integer
            (booleans rejected), or `mesh` is not a `jax.sharding.Mesh` or `None`.
            Also: `function` is a generator function, or a `staticmethod` or
            `classmethod` object (as `jax.jit` rejects them); `mesh` is an
            `AbstractMesh`; `jax.vmap` rejects `in_axes`/`out_axes` (its own
            error, passed through); `on_exceed` is neither a str nor `None`.
        ValueError: If `axis_size` is not positive, `max_traces` is negative, or
            `mesh` is empty. Also: `mesh` has a Manual axis; `on_exceed` is a
            str other than ``"raise"``, ``"warn"`` and ``"log"``.

    Examples:
        >>> import jax.numpy as jnp
        >>> from tinax.jit import batched_jit
        >>> norms = batched_jit(lambda v: (v * v).sum(), max_traces=1)
        >>> norms(jnp.ones((4, 3))).tolist()
        [3.0, 3.0, 3.0, 3.0]
    """
    return BatchedJit(
        function,
        in_axes=in_axes,
        out_axes=out_axes,
        axis_size=axis_size,
        max_traces=max_traces,
        mesh=mesh,
        on_exceed=on_exceed,
    )
