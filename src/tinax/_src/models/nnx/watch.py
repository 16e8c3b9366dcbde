"""Watching a trace for lost updates: the Variables reachable from its arguments and
their values before it ran, and every mutable node's contents, to tell afterwards what was
assigned and what changed structure."""

from __future__ import annotations

from typing import Any, cast

import jax
import numpy as np

from tinax._src.models.nnx.classes import holds_nnx
from tinax._src.models.nnx.messages import ARRAY_ASSIGNED
from tinax._src.models.nnx.trees import node_paths, path_text


class Watched:
    """The Variables reachable from a trace's arguments and their values before it ran.

    One entry per Variable object (a Variable reachable by two paths is listed
    once, under the first); the tree structure of each argument with the
    Variables as leaves; and a snapshot of every mutable node (each nnx
    object's attributes, each list and dict), to tell by identity that nothing
    was added, removed or replaced (a Variable replaced by a new one, two
    submodules swapped) while the trace ran.
    """

    __slots__ = ("before", "keys", "nodes", "structures", "variables")

    def __init__(self, kinds: tuple[type, type], named: list[tuple[str, Any]]) -> None:
        tree_util: Any = jax.tree_util
        pytree_type, variable_type = kinds
        nodes: list[tuple[Any, Any, Any]] = []

        def visit(value: object) -> bool:
            if isinstance(value, variable_type):
                return True
            _snapshot(value, pytree_type, nodes)
            return False

        self.variables: list[Any] = []
        self.keys: list[tuple[str, tuple[Any, ...]]] = []  # made text only when reported
        self.before: list[tuple[Any, list[Any]]] = []
        self.structures: list[tuple[str, Any, Any, int, int]] = []
        self.nodes = nodes
        seen: set[int] = set()
        for name, value in named:
            if not holds_nnx(value, kinds):  # a plain argument: nothing of nnx to watch
                continue
            first = len(nodes)
            flat, treedef = tree_util.tree_flatten_with_path(value, is_leaf=visit)
            self.structures.append((name, value, treedef, first, len(nodes)))
            for path, leaf in flat:
                if not isinstance(leaf, variable_type) or id(leaf) in seen:
                    continue
                seen.add(id(leaf))
                self.variables.append(leaf)
                self.keys.append((name, tuple(path)))
                self.before.append(variable_state(leaf))

    def path(self, index: int) -> str:
        """The path of Variable ``index``, as the user writes it."""
        return path_text(*self.keys[index])

    def changed(self) -> list[int]:
        """Indices of the Variables whose value or metadata was assigned since."""
        return [
            index
            for index, (variable, before) in enumerate(
                zip(self.variables, self.before, strict=True)
            )
            if _assigned(variable_state(variable), before)
        ]

    def restructured(self, variable_type: type) -> list[tuple[str, str]]:
        """``(argument, line)`` for each change of structure since: an attribute (or
        list item, dict entry) added, removed or replaced by another object, named by
        its path (``model.counter: replaced by another object``), or an argument whose
        tree structure changed otherwise (a static field of a custom pytree)."""
        tree_util: Any = jax.tree_util

        def is_variable(value: object) -> bool:
            return isinstance(value, variable_type)

        changes: list[tuple[str, str]] = []
        for name, value, treedef, first, last in self.structures:
            edits = [
                (owner, key, what)
                for owner, now, then in self.nodes[first:last]
                for key, what in _edits(now, then)
            ]
            if edits:
                where = node_paths(value, {id(owner) for owner, _, _ in edits}, variable_type)
                lines = [
                    f"{name}{where[id(owner)]}{_attribute_text(owner, key)}: {what}"
                    for owner, key, what in edits
                    if id(owner) in where  # else detached: the change above it is named
                ]
                changes.extend((name, line) for line in dict.fromkeys(lines))
                continue
            try:
                now = tree_util.tree_structure(value, is_leaf=is_variable)
                same = bool(now == treedef)
            except Exception:
                same = False
            if not same:
                changes.append((name, f"{name}: its tree structure changed (a static field)"))
        return changes


def _snapshot(value: object, pytree_type: type, nodes: list[tuple[Any, Any, Any]]) -> None:
    """Appends ``(node, its mutable contents, a copy of them)`` for an nnx object (its
    attributes), a list or a dict; nothing for other nodes (immutable, or not ours)."""
    node: Any = value
    if isinstance(value, pytree_type):
        attributes: dict[str, Any] = vars(value)
        nodes.append((node, attributes, dict(attributes)))
    elif type(value) is list:
        items = cast("list[Any]", value)
        nodes.append((node, items, list(items)))
    elif type(value) is dict:
        mapping = cast("dict[Any, Any]", value)
        nodes.append((node, mapping, dict(mapping)))


_INTERNAL = "_pytree__"  # nnx's own bookkeeping attributes (its trace state is replaced)


def _replaced(old: object, new: object) -> str:
    """What replacing ``old`` by ``new`` is called in a change's line."""
    if isinstance(old, jax.Array | np.ndarray) and isinstance(new, jax.Array | np.ndarray):
        return ARRAY_ASSIGNED
    return "replaced by another object"


def _edits(now: Any, then: Any) -> list[tuple[Any, str]]:
    """What changed in a node's contents since ``then``, by identity: ``(key, what)``."""
    edits: list[tuple[Any, str]] = []
    if type(now) is list:
        items, old = cast("list[Any]", now), cast("list[Any]", then)
        for index in range(max(len(items), len(old))):
            if index >= len(items):
                edits.append((index, "removed"))
            elif index >= len(old):
                edits.append((index, "added"))
            elif items[index] is not old[index]:
                edits.append((index, "replaced by another object"))
        return edits
    mapping, old_mapping = cast("dict[Any, Any]", now), cast("dict[Any, Any]", then)
    for key, value in old_mapping.items():
        if type(key) is str and key.startswith(_INTERNAL):
            continue
        if key not in mapping:
            edits.append((key, "removed"))
        elif mapping[key] is not value:
            edits.append((key, _replaced(value, mapping[key])))
    edits.extend(
        (key, "added")
        for key in mapping
        if key not in old_mapping and not (type(key) is str and key.startswith(_INTERNAL))
    )
    return edits


def _attribute_text(owner: object, key: Any) -> str:
    """How the user writes ``key`` of ``owner``: ``.counter``, ``[0]``, ``['a']``."""
    if type(owner) is list:
        return f"[{key}]"
    if type(owner) is dict:
        return f"[{key!r}]"
    if type(key) is str and key.isdigit():  # an nnx.List's items are attributes "0", "1"
        return f"[{key}]"
    return f".{key}"


def variable_state(variable: Any) -> tuple[Any, list[Any]]:
    """A Variable's metadata and the leaves of its raw value, as they are now."""
    raw = object.__getattribute__(variable, "_raw_value")
    metadata = object.__getattribute__(variable, "_var_metadata")
    return dict(metadata), jax.tree.leaves(raw)


def _assigned(now: tuple[Any, list[Any]], before: tuple[Any, list[Any]]) -> bool:
    """Whether a Variable was assigned: a leaf of its value is another object (nnx's
    own test), or its metadata changed."""
    leaves, old = now[1], before[1]
    if len(leaves) != len(old) or any(a is not b for a, b in zip(leaves, old, strict=True)):
        return True
    try:
        return not bool(now[0] == before[0])
    except Exception:
        return True


def output_ids(out: object) -> set[int]:
    """The ids of every leaf of the output (a returned Variable gives its value)."""
    return {id(leaf) for leaf in jax.tree.leaves(out)}
