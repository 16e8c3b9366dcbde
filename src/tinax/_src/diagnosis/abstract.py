"""Abstract values back as arguments: `jax.ShapeDtypeStruct`s (with a concrete sharding
where a mesh is known) and tokens. `record` uses them to give a recorded trace's
arguments back, and ``precompile`` to place abstract arguments on a mesh.

A `TracedSignature` keeps, per array leaf, the abstract value JAX traced with
(``jax.typeof``). Turned back into `jax.ShapeDtypeStruct`s, in the recorded tree
structures, with the static values that were traced, they make a call that JAX
keys exactly as the recorded one: ``lower``, ``eval_shape`` or ``explain`` with
them hit the recorded trace.

A sharding in an abstract value names an abstract mesh. JAX traces with it as
it is, but compiles for concrete devices: a `jax.ShapeDtypeStruct` whose
sharding names the concrete mesh compiles exactly what a call with arrays
placed on that mesh runs. So a sharding is made concrete wherever a concrete
mesh with the same abstract mesh is known (the object's bound mesh, else the
ambient one set by `jax.set_mesh`), and kept abstract otherwise.

On a mesh with Auto axes, JAX's types record the mesh but not how an array is
split over it (the spec reads replicated). A trace therefore also records how
the call's own arrays were split on its mesh (`record.placed`), and the
arguments given back are split so where a concrete mesh is known: they hit the
trace and compile for the placement the traced call had (what warm start
compiles). An abstract value alone compiles for replicated placement; to
precompile for other arrays split over an Auto mesh, give ``precompile`` those
arrays, or `jax.ShapeDtypeStruct`s with their sharding.
"""

from __future__ import annotations

import functools
from typing import Any, cast

import jax
from jax.core import ShapedArray
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec


@functools.cache
def _token_type() -> type[Any]:
    """JAX's abstract token class (public as ``jax.extend.core.AbstractToken`` only
    since JAX 0.10)."""
    token: Any = jax.typeof(_new_token())
    return cast("type[Any]", type(token))


def _new_token() -> Any:
    lax: Any = jax.lax
    return lax.create_token()


def ambient_mesh() -> Mesh | None:
    """The concrete mesh entered with `jax.set_mesh`, or ``None`` (none, or inside a trace)."""
    try:
        mesh: Mesh = jax.sharding.get_mesh()
    except Exception:  # inside a trace: only the abstract mesh is known there
        return None
    return None if mesh.empty else mesh


def concrete_sharding(sharding: Any, mesh: Mesh | None) -> Any:
    """``sharding`` on a concrete mesh where it names an abstract one that ``mesh``
    (or else the ambient mesh) stands for; otherwise ``sharding`` itself."""
    if not isinstance(sharding, NamedSharding):
        return sharding
    abstract: Any = sharding.mesh
    if not isinstance(abstract, AbstractMesh) or abstract.empty:
        return sharding
    for candidate in (mesh, ambient_mesh()):
        if candidate is not None and candidate.abstract_mesh == abstract:
            return NamedSharding(candidate, sharding.spec, memory_kind=sharding.memory_kind)
    return sharding


def shape_dtype_struct(
    aval: Any, mesh: Mesh | None = None, placement: tuple[Any, ...] | None = None
) -> Any:
    """The `jax.ShapeDtypeStruct` that JAX types as ``aval``; with ``placement`` (the
    entries of a partition spec the traced call's array had, see `record.placed`), split
    so on the concrete mesh where one is known.

    An abstract token has no `jax.ShapeDtypeStruct`: a fresh token stands for it.
    """
    if isinstance(aval, ShapedArray):
        sharding: Any = getattr(aval, "sharding", None)
        if sharding is not None and getattr(sharding, "mesh", None) is not None:
            if sharding.mesh.empty:
                sharding = None  # no mesh: JAX gives arrays no sharding in their type
            else:
                concrete = concrete_sharding(sharding, mesh)
                if placement is not None and concrete is not sharding:
                    concrete = NamedSharding(
                        concrete.mesh, PartitionSpec(*placement), memory_kind=concrete.memory_kind
                    )
                sharding = concrete
        return jax.ShapeDtypeStruct(
            aval.shape, aval.dtype, weak_type=aval.weak_type, sharding=sharding
        )
    if isinstance(aval, _token_type()):
        return _new_token()
    raise ValueError(
        f"a traced argument has the abstract value {aval!r} ({type(aval).__name__}), which "
        "has no jax.ShapeDtypeStruct; only arrays (jax.core.ShapedArray) and tokens can be "
        "given back."
    )


def concrete_leaves(tree: Any, mesh: Mesh | None) -> Any:
    """``tree`` with each `jax.ShapeDtypeStruct`'s abstract sharding made concrete."""

    def leaf(value: Any) -> Any:
        if not isinstance(value, jax.ShapeDtypeStruct):
            return value
        sharding: Any = value.sharding
        concrete = concrete_sharding(sharding, mesh)
        if concrete is sharding:
            return value
        return jax.ShapeDtypeStruct(
            value.shape, value.dtype, weak_type=value.weak_type, sharding=concrete
        )

    def is_leaf(value: Any) -> bool:
        return isinstance(value, jax.ShapeDtypeStruct)

    return jax.tree.map(leaf, tree, is_leaf=is_leaf)
