"""JAX's two mesh contexts: entering a mesh inside a trace, and reading the ambient one."""

from __future__ import annotations

from typing import Any

import jax
from jax._src import config as _jax_config
from jax.sharding import Mesh


def _mesh_context_home() -> Any:
    """The module that holds JAX's two mesh contexts (``device_context``, the
    concrete mesh, and ``abstract_mesh_context_manager``): ``jax._src.config`` up
    to jax 0.11.1, ``jax._src.mesh`` from jax 0.11.2 (run here on 0.9.2, 0.10.2 and
    0.12.0.1). Looked up by attribute, not by version, so that a JAX that moves
    them back or keeps both still works."""
    from jax._src import mesh as _jax_mesh

    for module in (_jax_mesh, _jax_config):
        if hasattr(module, "device_context") and hasattr(module, "abstract_mesh_context_manager"):
            return module
    raise ImportError(
        f"tinax: this JAX ({jax.__version__}) keeps its mesh contexts in "
        "neither jax._src.mesh nor jax._src.config; tinax supports jax 0.9.2 to 0.12.x."
    )


_MESH_CONTEXTS: Any = _mesh_context_home()


def enter_mesh(mesh: Mesh) -> tuple[Any, Any]:
    """Makes ``mesh`` the ambient mesh as `jax.set_mesh` does, minus its refusal
    to run inside a trace. Returns what `restore_mesh` needs."""
    contexts = _MESH_CONTEXTS
    previous_abstract = contexts.abstract_mesh_context_manager.swap_local(mesh.abstract_mesh)
    previous_concrete = contexts.device_context.swap_local(mesh)
    return previous_abstract, previous_concrete


def mesh_contexts() -> tuple[Any, Any]:
    """JAX's two contexts that ``with jax.set_mesh(mesh):`` sets: the concrete mesh and
    the abstract mesh. ``set_mesh(mesh)`` is in effect when their ``value`` is exactly
    ``mesh`` and ``mesh.abstract_mesh``; ``value`` is a C getter, cheap enough for
    every call, read in the caller's own frame. There is no public getter for the
    concrete mesh that works inside traces (`jax.sharding.get_mesh` refuses there)."""
    contexts = _MESH_CONTEXTS
    return contexts.device_context, contexts.abstract_mesh_context_manager


def restore_mesh(previous: tuple[Any, Any]) -> None:
    """Undoes `enter_mesh`."""
    contexts = _MESH_CONTEXTS
    contexts.abstract_mesh_context_manager.set_local(previous[0])
    contexts.device_context.set_local(previous[1])


def ambient_concrete_mesh() -> Mesh | None:
    """The mesh of the innermost ``jax.set_mesh`` (or of a bound object's call), also
    inside a trace; ``None`` when there is none. `jax.sharding.get_mesh` refuses to
    run inside a trace."""
    value = _MESH_CONTEXTS.device_context.value
    return value if isinstance(value, Mesh) and not value.empty else None
