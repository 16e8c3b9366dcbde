"""Walking a tree one level at a time, without JAX's recursion: the children of a
node, the paths of nodes for an error, and the cycles an argument holds (refused before a
flatten of tinax's or JAX's would recurse into one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from tinax._src.core import statics
from tinax._src.models.nnx.messages import cycle_message


def key_text(key: Any) -> str:
    tree_util: Any = jax.tree_util
    text: str = tree_util.keystr((key,))
    return text


def path_text(name: str, path: tuple[Any, ...]) -> str:
    """A path as the user writes it: ``model.bn.mean``, ``optimizer.opt_state[0].mu['w']``."""
    return name + "".join(key_text(key) for key in path)


def _children(node: object) -> list[tuple[Any, Any]] | None:
    """The children of a pytree node with their keys, one level down (JAX flattens
    only the node itself), or ``None`` for a leaf."""
    if statics.array_type(type(node)) or node is None or type(node) in _SCALARS:
        return None
    tree_util: Any = jax.tree_util
    first = [node]

    def is_leaf(value: object) -> bool:
        if first:
            first.pop()
            return False
        return True

    try:
        flat: list[tuple[tuple[Any, ...], Any]] = tree_util.tree_flatten_with_path(
            node, is_leaf=is_leaf
        )[0]
    except Exception:  # a node whose flatten raises: JAX will say so
        return None
    if len(flat) == 1 and not flat[0][0] and flat[0][1] is node:
        return None
    return [(path[0], child) for path, child in flat]


_SCALARS = frozenset({int, float, complex, bool, str, bytes})


def node_paths(value: object, targets: set[int], stop: type) -> dict[int, str]:
    """The path (text) of each node of ``value`` whose id is in ``targets``, the first
    one found; a ``stop`` instance (a Variable) is not entered. Error paths only."""
    found: dict[int, str] = {}
    if id(value) in targets:
        found[id(value)] = ""
    stack: list[tuple[str, object]] = [("", value)]
    entered: set[int] = set()
    while stack:
        path, node = stack.pop()
        if id(node) in entered or isinstance(node, stop):
            continue
        entered.add(id(node))
        children = _children(node)
        for key, child in reversed(children or []):
            child_path = path + key_text(key)
            if id(child) in targets and id(child) not in found:
                found[id(child)] = child_path
            stack.append((child_path, child))
    return found


def find_cycle(named: list[tuple[str, Any]]) -> tuple[str, str, str] | None:
    """``(argument, path, path of the node it refers back to)`` for the first cycle in the
    arguments (``model.me`` that is ``model``), walked one level at a time: JAX's own
    flatten of a cycle recurses until Python's limit, and leaves the interpreter's
    recursion depth used up after it. ``None`` if there is none."""
    for name, value in named:
        found = _cycle(name, value)
        if found is not None:
            return (name, *found)
    return None


def _cycle(name: str, value: object) -> tuple[str, str] | None:
    children = _children(value)
    if children is None:
        return None
    done: set[int] = set()  # fully walked, no cycle below: not walked again (a shared node)
    ancestors: dict[int, str] = {id(value): name}
    stack: list[tuple[object, str, Any]] = [(value, name, iter(children))]
    while stack:
        node, path, pending = stack[-1]
        for key, child in pending:
            child_path = path + key_text(key)
            if id(child) in ancestors:
                return child_path, ancestors[id(child)]
            if id(child) in done:
                continue
            grandchildren = _children(child)
            if grandchildren:
                ancestors[id(child)] = child_path
                stack.append((child, child_path, iter(grandchildren)))
                break
        else:
            stack.pop()
            del ancestors[id(node)]
            done.add(id(node))
    return None


def refuse_cycles(function: Callable[..., Any], named: list[tuple[str, Any]]) -> None:
    """Raises `ValueError` if an argument holds a cycle (`find_cycle`), before any
    flatten of tinax's or JAX's would recurse into it."""
    cycle = find_cycle(named)
    if cycle is not None:
        raise ValueError(cycle_message(function, cycle))
