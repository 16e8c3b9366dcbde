"""JAX's values and types that have no public name: `jax.jit`'s "not given" sharding and
the literal array types."""

from __future__ import annotations

from typing import Any, cast


def unspecified() -> Any:
    """`jax.jit`'s own default for ``in_shardings``/``out_shardings`` ("not given").

    No public equivalent: `jax.jit`'s signature shows it as its default.
    """
    from jax._src import sharding_impls

    return cast("Any", sharding_impls).UNSPECIFIED


def unspecified_type() -> type:
    """The type of `jax.jit`'s "not given" sharding (`unspecified`)."""
    value: object = unspecified()
    return type(value)


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
