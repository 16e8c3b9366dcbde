"""How the caller's nnx objects travel in a call under ``propagate_updates=True``: each
in its place (`Place`) as a `Slot` of flat values, all of them described by one `Layout`
(the static part of the call)."""

from __future__ import annotations

from typing import Any, cast

import jax

_tree_util: Any = jax.tree_util

MAX_DEPTH = 32  # tuples, lists and dicts looked into for nnx objects, nested

Place = int | str | tuple[Any, ...]
"""Where an nnx object is in a call: an argument's index or keyword, or a path
``(index or keyword, key, ...)`` into tuples, lists and dicts."""


class Layout:
    """How the caller's nnx objects are laid out in the flat list a call passes: the
    static part of the call, compared by JAX as it compares tree structures.

    ``treedef`` is the tree of the objects with Variables (and other leaves) as
    leaves; ``variables`` the tree of each distinct Variable around its raw value
    (type and metadata); ``kinds`` maps each leaf to its Variable (``>= 0``) or to
    a plain leaf (``-1 - index``), so that a Variable reached twice is one value.
    """

    __slots__ = ("_hash", "kinds", "places", "split", "treedef", "variables")

    def __init__(
        self,
        places: tuple[Place, ...],
        treedef: Any,
        variables: tuple[Any, ...],
        kinds: tuple[int, ...],
        split: tuple[tuple[int, int], ...],
    ) -> None:
        self.places = places
        self.treedef = treedef
        self.variables = variables
        self.kinds = kinds
        self.split = split
        self._hash = hash((places, treedef, variables, kinds, split))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not Layout:
            return NotImplemented
        return (
            self._hash == other._hash
            and self.places == other.places
            and self.kinds == other.kinds
            and self.split == other.split
            and self.treedef == other.treedef
            and self.variables == other.variables
        )

    def __repr__(self) -> str:
        return f"<nnx objects: {len(self.variables)} Variables>"


class Slot:
    """Stands in a call for an nnx object: the raw values of the Variables it reaches
    first (a Variable shared with an earlier object is carried by that one), then
    its other leaves; a sharding or donation given for its position applies to
    them."""

    __slots__ = ("layout", "place", "values")

    def __init__(self, layout: Layout, place: int, values: list[Any] | tuple[Any, ...]) -> None:
        self.layout = layout
        self.place = place
        self.values = values


def _flatten_slot(slot: Slot) -> tuple[Any, tuple[Layout, int]]:
    return slot.values, (slot.layout, slot.place)


def _unflatten_slot(aux: tuple[Layout, int], values: Any) -> Slot:
    return Slot(aux[0], aux[1], tuple(values))


_tree_util.register_pytree_node(Slot, _flatten_slot, _unflatten_slot)


def _put(root: Any, keys: tuple[Any, ...], value: object) -> Any:
    """``root`` with the item at ``keys`` (through tuples, lists and dicts) replaced by
    ``value``: the containers on the way are copies, the rest is shared."""
    if not keys:
        return value
    key = keys[0]
    child = _put(root[key], keys[1:], value)
    if type(root) is tuple:
        items = cast("tuple[Any, ...]", root)
        return (*items[:key], child, *items[key + 1 :])
    copy: Any = list(cast("list[Any]", root)) if type(root) is list else dict(root)
    copy[key] = child
    return copy


def put_at(bound: list[Any], kwargs: dict[str, Any], place: Place, value: object) -> None:
    """Puts ``value`` at ``place`` of a call (``bound``, ``kwargs``, changed in place)."""
    if type(place) is int:
        bound[place] = value
    elif type(place) is str:
        kwargs[place] = value
    else:
        path = cast("tuple[Any, ...]", place)
        top, keys = path[0], path[1:]
        if type(top) is int:
            bound[top] = _put(bound[top], keys, value)
        else:
            kwargs[top] = _put(kwargs[top], keys, value)


def get_at(args: tuple[Any, ...], kwargs: dict[str, Any], place: Place) -> Any:
    """The value at ``place`` of a call."""
    if type(place) is int:
        return args[place]
    if type(place) is str:
        return kwargs[place]
    path = cast("tuple[Any, ...]", place)
    value = args[path[0]] if type(path[0]) is int else kwargs[path[0]]
    for key in path[1:]:
        value = value[key]
    return value


def first_slot(values: Any, depth: int) -> Slot | None:
    """The first `Slot` among ``values`` (at ``depth``), looking into tuples, lists and
    dicts as deep as `Propagating._scan` puts one."""
    if depth >= MAX_DEPTH:
        return None
    for value in values:
        kind: type[Any] = type(cast("object", value))
        if kind is Slot:
            return cast("Slot", value)
        if kind is tuple or kind is list:
            found = first_slot(value, depth + 1)
        elif kind is dict:
            found = first_slot(cast("dict[Any, Any]", value).values(), depth + 1)
        else:
            continue
        if found is not None:
            return found
    return None
