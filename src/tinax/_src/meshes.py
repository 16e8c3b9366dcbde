"""Running a compiled function under a mesh, at top level or inside a trace.

`jax.set_mesh` refuses to run while a trace is in progress (inside another
`jit`, `vmap`, `grad`, `scan`...). There, a mesh-bound object still has to run
under its mesh: it enters the mesh without `set_mesh`'s check when no other
mesh is ambient, runs as is when its own mesh already is, and otherwise raises
an error naming both meshes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator
from typing import Any, TypeVar

import jax
from jax.sharding import Mesh

from tinax._src import private

R = TypeVar("R")


@contextlib.contextmanager
def _enter_inside_trace(mesh: Mesh, owner: str) -> Generator[None]:
    ambient = jax.sharding.get_abstract_mesh()
    if ambient == mesh.abstract_mesh:
        yield
        return
    if not ambient.empty:
        raise ValueError(
            f"{owner} is bound to mesh {mesh} but was called inside a trace running under "
            f"a different mesh {ambient}; call it outside that trace, or bind it to the "
            "ambient mesh."
        )
    # What jax.set_mesh does, minus its refusal to run inside a trace.
    previous = private.enter_mesh(mesh)
    try:
        yield
    finally:
        private.restore_mesh(previous)


def mesh_scope(mesh: Mesh, owner: str) -> contextlib.AbstractContextManager[Any]:
    """A context that runs its body as if inside ``with jax.set_mesh(mesh):``."""
    try:
        return jax.set_mesh(mesh)
    except ValueError:  # a trace is in progress: set_mesh refuses
        return _enter_inside_trace(mesh, owner)


def bind_mesh(function: Callable[..., R], mesh: Mesh | None, owner: str) -> Callable[..., R]:
    """``function`` itself without a mesh, else a caller that enters ``mesh`` first."""
    if mesh is None:
        return function

    def call_under_mesh(*args: Any, **kwargs: Any) -> R:
        with mesh_scope(mesh, owner):
            return function(*args, **kwargs)

    return call_under_mesh
