"""Meshes: a call bound to a mesh, outside and inside an ambient one, and batched over one."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from harness import Row, Setup, mesh8, repeated
from jax.sharding import NamedSharding, PartitionSpec

from tinax.jit import batched_jit, bounded_jit


def _per_example(w: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.tanh(x @ w).sum()


def batched_mesh_row() -> Row:
    """batched_jit on an 8-device mesh, pre-sharded batch, vs the idioms it replaces."""
    mesh, count = mesh8(), 50
    w = jnp.ones((3, 4))
    x = jax.device_put(jnp.ones((64, 3)), NamedSharding(mesh, PartitionSpec("x")))
    x_pmap = jax.pmap(lambda v: v)(jnp.ones((8, 8, 3)))  # already laid out for pmap
    by_hand = jax.jit(jax.vmap(_per_example, in_axes=(None, 0)))
    ours = batched_jit(_per_example, in_axes=(None, 0), max_traces=1, mesh=mesh)
    pmapped = jax.pmap(jax.vmap(_per_example, in_axes=(None, 0)), in_axes=(None, 0))

    def hand_written() -> jax.Array:
        with jax.set_mesh(mesh):
            return by_hand(w, x)

    return Row(
        "batched_jit, 8-device mesh, pre-sharded batch of 64",
        baseline="set_mesh+jit(vmap)",
        contenders={
            "set_mesh+jit(vmap)": lambda: repeated(hand_written, count),
            "tinax": lambda: repeated(lambda: ours(w, x), count),
            "jax.pmap": lambda: repeated(lambda: pmapped(w, x_pmap), count),
        },
        target=1.03,
        calls=count,
    )


def _mesh_call_row(inside: bool) -> Row:
    mesh, count = mesh8(), 50
    x = jax.device_put(jnp.ones(8), NamedSharding(mesh, PartitionSpec("x")))
    jitted = jax.jit(lambda v: v * 2.0)
    ours = bounded_jit(lambda v: v * 2.0, max_traces=1, mesh=mesh)

    def hand_written() -> jax.Array:
        with jax.set_mesh(mesh):
            return jitted(x)

    def timed(call: Callable[[], jax.Array]) -> Setup:
        loop = repeated(call, count)
        if not inside:
            return lambda: loop

        def under_ambient_mesh() -> object:
            with jax.set_mesh(mesh):
                return loop()

        return lambda: under_ambient_mesh

    where = "inside an ambient set_mesh(mesh)" if inside else "from outside any mesh"
    return Row(
        f"mesh-bound call, {where}",
        baseline="set_mesh+jit",
        contenders={"set_mesh+jit": timed(hand_written), "tinax": timed(lambda: ours(x))},
        target=1.05,
        calls=count,
    )
