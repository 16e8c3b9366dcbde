"""Running a compiled function under a mesh, at top level or inside a trace.

A mesh-bound object runs each call as if inside ``with jax.set_mesh(mesh):``.
When that is already the case, it enters nothing (a few attribute reads).
`jax.set_mesh` refuses to run while a trace is in progress (inside another
`jit`, `vmap`, `grad`, `scan`, `shard_map`...); there the object runs as is when
the ambient abstract mesh is its own mesh, or its own mesh with some axes made
Manual by an enclosing `shard_map`; enters its mesh without `set_mesh`'s check
when no mesh is ambient and its mesh has no Explicit axis; and otherwise raises
an error naming both meshes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator
from typing import Any, TypeVar

import jax
from jax.sharding import AbstractMesh, Mesh

from tinax._src import private

R = TypeVar("R")


def _same_axes(ambient: AbstractMesh, mesh: Mesh) -> bool:
    """Whether ``ambient`` is ``mesh``, possibly with axes made Manual by shard_map."""
    abstract = mesh.abstract_mesh
    if ambient == abstract:
        return True
    return ambient.axis_names == abstract.axis_names and ambient.axis_sizes == abstract.axis_sizes


def _explicit_axes(mesh: Mesh) -> tuple[str, ...]:
    return tuple(
        name
        for name, axis_type in zip(mesh.axis_names, mesh.axis_types, strict=True)
        if axis_type == jax.sharding.AxisType.Explicit
    )


@contextlib.contextmanager
def _enter_inside_trace(mesh: Mesh, owner: str) -> Generator[None]:
    ambient = jax.sharding.get_abstract_mesh()
    if not ambient.empty:
        if not _same_axes(ambient, mesh):
            raise ValueError(
                f"{owner} is bound to mesh {mesh} but was called inside a trace running under "
                f"a different mesh {ambient}; call it outside that trace, or bind it to the "
                "ambient mesh."
            )
        yield
        return
    explicit = _explicit_axes(mesh)
    if explicit:
        raise ValueError(
            f"{owner} is bound to mesh {mesh}, whose axes {explicit} are Explicit, but was "
            "called inside a trace (jit, grad, scan...) running under no mesh: with Explicit "
            "axes the mesh is part of the types the enclosing trace computes with, so it must "
            "run under the mesh too. Enter the mesh around the enclosing transformation: "
            "`with jax.set_mesh(mesh): ...`."
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
    """``function`` itself without a mesh, else a caller that enters ``mesh`` first
    unless it is already the ambient mesh."""
    if mesh is None:
        return function
    abstract = mesh.abstract_mesh
    concrete_now, abstract_now = private.mesh_contexts()

    def call_under_mesh(*args: Any, **kwargs: Any) -> R:
        try:  # free unless something is raised (zero-cost exceptions)
            # Already inside set_mesh(mesh)? Read here: one Python frame per call, not two.
            if concrete_now.value is mesh and abstract_now.value is abstract:
                return function(*args, **kwargs)
            with mesh_scope(mesh, owner):
                return function(*args, **kwargs)
        except Exception as error:
            private.filter_traceback(error)  # this frame too: the user's call is the last
            raise

    return call_under_mesh
