"""flax.nnx's classes, found without importing flax: read from ``sys.modules`` when a
trace or call needs them (no nnx object can exist before flax is imported)."""

from __future__ import annotations

import sys
from typing import Any

import jax


def nnx_kinds() -> tuple[type, type] | None:
    """``(nnx.Pytree, nnx.Variable)``, or ``None`` while flax.nnx is not imported."""
    module = sys.modules.get("flax.nnx")
    if module is None:
        return None
    pytree = getattr(module, "Pytree", None)
    variable = getattr(module, "Variable", None)
    if not isinstance(pytree, type) or not isinstance(variable, type):
        return None
    return pytree, variable


def holds_nnx(value: object, kinds: tuple[type, type]) -> bool:
    """Whether ``value`` holds an nnx object (``kinds``: a Pytree or a Variable) anywhere,
    read from its tree structure (flattened at C speed; its inner nodes walked here): a
    plain argument is neither watched nor walked leaf by leaf."""
    tree_util: Any = jax.tree_util
    stack = [tree_util.tree_structure(value)]
    while stack:
        node = stack.pop()
        if node.num_nodes == 1:  # a leaf (an array, a None)
            continue
        data = node.node_data()
        if data is not None and issubclass(data[0], kinds):
            return True
        stack.extend(node.children())
    return False
