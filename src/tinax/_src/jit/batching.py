"""A `BatchedJit`'s call batched over its dynamic arguments only (its static ones, which
`jax.jit` passes in as Python values, never reach `jax.vmap`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import jax

from tinax._src.core.statics import Statics


def dynamic(
    function: Callable[..., Any],
    statics: Statics,
    in_axes: Any,
    out_axes: Any,
    axis_size: int | None,
    vmap_options: dict[str, Any],
) -> Callable[..., Any]:
    """``function`` batched over its dynamic arguments only: the static ones, which
    `jax.jit` passes in as Python values, never reach `jax.vmap`.

    An ``in_axes`` tuple with one entry per positional argument of the call has the
    entries of static positions dropped; a shorter one is taken to cover the
    dynamic positional arguments only. Runs at trace time only.
    """

    def batched(*args: Any, **kwargs: Any) -> Any:
        count = len(args)
        static_at = {i: a for i, a in enumerate(args) if statics.positional(i, count)}
        dynamic = [a for i, a in enumerate(args) if i not in static_at]
        static_kwargs = {k: v for k, v in kwargs.items() if k in statics.argnames}
        dynamic_kwargs = {k: v for k, v in kwargs.items() if k not in statics.argnames}
        axes: Any = in_axes
        if type(axes) is tuple and len(cast("tuple[Any, ...]", axes)) == count:
            axes = tuple(
                a for i, a in enumerate(cast("tuple[Any, ...]", axes)) if i not in static_at
            )

        def per_example(*inner: Any, **inner_kwargs: Any) -> Any:
            rest = iter(inner)
            full = [static_at[i] if i in static_at else next(rest) for i in range(count)]
            return function(*full, **static_kwargs, **inner_kwargs)

        vmapped: Callable[..., Any] = jax.vmap(
            per_example,
            in_axes=cast("Any", axes),
            out_axes=out_axes,
            axis_size=axis_size,
            **vmap_options,
        )
        return vmapped(*dynamic, **dynamic_kwargs)

    return batched
