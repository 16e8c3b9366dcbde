"""What differs between a call and earlier traces, as data.

The second step of the diagnosis (record, compare, report). Two questions are
kept apart:

- ``matches`` (`reuse`): would JAX's trace cache treat the two calls alike? It
  compares exactly what JAX keys on: abstract values and tree structures with
  ``==``, static arguments by type and ``==``. Never text.
- ``differences`` (here): where and how two signatures differ, located to the leaf,
  the dict key or the dataclass field, for people (the report step prints
  them). It only runs for a call that does not match.

Runs only when an error, ``explain`` or the history is asked for, never on the
call path. What a difference is lives in `kinds`; static values are located in
`static_values`; leaves, tree nodes and arguments here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any, cast

import attrs
import jax

from tinax._src.diagnosis import edge_hints
from tinax._src.diagnosis.kinds import ABSENT, STATIC_LEAF, Difference
from tinax._src.diagnosis.record import (
    Argument,
    Leaf,
    TracedSignature,
    is_abstract,
    leaves_of,
    mesh_text,
    value_text,
)
from tinax._src.diagnosis.reuse import leaf_match, matches, same, static_equal
from tinax._src.diagnosis.static_values import static_differences

# --- where do they differ? -----------------------------------------------------------------


def placement(leaf: Leaf) -> str:
    """Where an array leaf is placed, as the diagnosis prints it: ``no mesh``, the mesh
    of an array on Auto axes, or ``P('x',) on <mesh>`` on Explicit axes."""
    if leaf.mesh is None:
        return "no mesh"
    return leaf.mesh if leaf.sharding is None else f"{leaf.sharding} on {leaf.mesh}"


def _placement_fix(old: Leaf, new: Leaf) -> str:
    """The `jax.device_put` that makes every call look like the earlier trace (or, when
    that one was off any mesh, like this call)."""
    placed = old if old.mesh is not None else new
    if placed.sharding is None:  # Auto axes: the trace does not record the spec
        whose = "x had when traced first" if placed is old else "this call's x has"
        return (
            "give inputs one sharding on every call: jax.device_put(x, NamedSharding(mesh, "
            f"spec)), with the spec {whose} (a trace on Auto axes does not record it)"
        )
    return (
        "give inputs one sharding on every call, the first included: "
        f"jax.device_put(x, NamedSharding(mesh, {placed.sharding}))"
    )


def _leaf_difference(path: str, old: Leaf, new: Leaf) -> Difference | None:
    if old.kind == "static" or new.kind == "static":  # a leaf that is not an array
        if old.kind == new.kind and old.text == new.text:
            return None
        return Difference(path, old.text, new.text, ("type",), "not an array")
    special = edge_hints.key_difference(old, new) or edge_hints.weak_scalars_difference(old, new)
    if special is not None:
        kinds_of, detail_of, fix_of = special
        return Difference(path, old.text, new.text, kinds_of, detail_of, fix=fix_of)
    kinds: list[str] = []
    details: list[str] = []
    for kind, changed in (
        ("shape", old.shape != new.shape),
        ("dtype", old.dtype != new.dtype),
        ("weak type", old.weak_type != new.weak_type),
        ("sharding", (old.sharding, old.mesh) != (new.sharding, new.mesh)),
    ):
        if changed:
            kinds.append(kind)
            details.append(kind)
    fix = None
    if old.weak_type != new.weak_type:
        details[kinds.index("weak type")] = f"weak type: {edge_hints.weak_flip(old, new)}"
    if "sharding" in kinds:
        fix = _placement_fix(old, new)
        if old.text == new.text:  # the types print alike: say where
            details[kinds.index("sharding")] = f"sharding: {placement(old)} -> {placement(new)}"
    cause: tuple[str, str] | None = None  # shapes and mixed changes are listed leaf by leaf
    if kinds == ["dtype"]:
        cause = (str(old.dtype), str(new.dtype))
    elif kinds == ["weak type"]:
        weak, strong = "weak-typed", "not weak-typed"
        cause = (weak, strong) if old.weak_type else (strong, weak)
    elif kinds == ["sharding"]:
        cause = (placement(old), placement(new))
    if not kinds:
        if old.text == new.text:
            return None
        kinds, details = ["type"], ["abstract type"]
    return Difference(
        path,
        old.text,
        new.text,
        tuple(kinds),
        ", ".join(details),
        fix=fix,
        # A grouped line shows the placements as before -> after: its detail is the kind.
        cause=None
        if cause is None
        else (*cause, "sharding" if "sharding" in kinds else details[0]),
    )


def _how(argument: Argument) -> str:
    return "by keyword" if argument.keyword else "by position"


# Tree structures: located to the node that differs.


def _node(treedef: Any) -> tuple[Any, Any] | None:
    """``(node type, auxiliary data)`` of a tree's root, or ``None`` for a leaf."""
    data: tuple[Any, Any] | None = treedef.node_data()
    return data


def _node_name(treedef: Any) -> str:
    data = _node(treedef)
    if data is None:
        return "an array"
    if data[0] is type(None):
        return "None"
    return data[0].__name__


def _structure_text(treedef: Any) -> str:
    text = str(treedef)
    if text.startswith("PyTreeDef(") and text.endswith(")"):
        text = text[len("PyTreeDef(") : -1]
    return text


class _Side:
    """One side of a tree comparison: an argument's leaves, paths and text views."""

    def __init__(self, argument: Argument) -> None:
        self.argument = argument
        self._leaves: list[Leaf] | None = None

    def leaf(self, index: int) -> Leaf:
        if self._leaves is None:
            self._leaves = list(leaves_of(self.argument))
        return self._leaves[index]

    def key(self, start: int, count: int, depth: int) -> str | None:
        """The key text of the node at ``depth`` above leaves ``start..start+count``."""
        if count == 0:
            return None
        path = self.argument.paths[start]
        if depth >= len(path):
            return None
        tree_util: Any = jax.tree_util
        text: str = tree_util.keystr((path[depth],))
        return text

    def text(self, treedef: Any, start: int) -> str:
        """A subtree as text: the abstract value for a leaf, else the structure."""
        if _node(treedef) is None:
            return self.leaf(start).text
        return _structure_text(treedef)


def _child_keys(side: _Side, treedef: Any, start: int, depth: int) -> list[str]:
    """The key text of each child of a node (``['w']``, ``[0]``, ``.field``)."""
    data = _node(treedef)
    kind: Any = None if data is None else data[0]
    aux: Any = None if data is None else data[1]
    keys: list[str] = []
    offset = start
    for index, child in enumerate(treedef.children()):
        key = side.key(offset, child.num_leaves, depth)
        if key is None:
            names: Any = getattr(kind, "_fields", None)
            if kind is dict and isinstance(aux, list | tuple):
                key = f"[{aux[index]!r}]"
            elif isinstance(names, tuple) and index < len(cast("tuple[str, ...]", names)):
                key = f".{cast('tuple[str, ...]', names)[index]}"
            else:
                key = f"[{index}]"
        keys.append(key)
        offset += child.num_leaves
    return keys


def _aux_fields(kind: Any, aux: Any, data_keys: Sequence[str]) -> list[tuple[str, Any]] | None:
    """Names for the parts of a custom node's auxiliary data, where they can be told.

    Covers registered dataclasses (`jax.tree_util.register_dataclass`: the meta
    fields), equinox Modules (one entry per field), and nodes whose data pairs
    a tuple of names with a tuple of values (`flax.nnx` modules).
    """
    if isinstance(aux, tuple):
        items = cast("tuple[Any, ...]", aux)
        for index in reversed(range(len(items) - 1)):
            names, values = items[index], items[index + 1]
            if (
                isinstance(names, tuple)
                and isinstance(values, tuple)
                and names
                and len(names) == len(values)  # pyright: ignore[reportUnknownArgumentType]
                and all(isinstance(name, str) for name in names)  # pyright: ignore[reportUnknownVariableType]
            ):
                return [(f".{name}", value) for name, value in zip(names, values, strict=True)]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        if dataclasses.is_dataclass(kind):
            names_all = [field.name for field in dataclasses.fields(kind)]
            if len(names_all) == len(items):
                return [(f".{name}", value) for name, value in zip(names_all, items, strict=True)]
            meta = [name for name in names_all if f".{name}" not in data_keys]
            if len(meta) == len(items):
                return [(f".{name}", value) for name, value in zip(meta, items, strict=True)]
    if isinstance(aux, dict):
        mapping = cast("dict[Any, Any]", aux)
        return [(f"[{key!r}]", value) for key, value in mapping.items()]
    return None


def _aux_differences(
    path: str, kind: Any, old_aux: Any, new_aux: Any, data_keys: Sequence[str]
) -> list[Difference]:
    detail = f"static field of {getattr(kind, '__name__', 'node')}"
    old_fields = _aux_fields(kind, old_aux, data_keys)
    new_fields = _aux_fields(kind, new_aux, data_keys)
    if old_fields is not None and new_fields is not None:
        old_map, new_map = dict(old_fields), dict(new_fields)
        found: list[Difference] = []
        for name, value in old_fields:
            if name not in new_map:
                found.append(
                    Difference(path + name, value_text(value), ABSENT, ("static field",), detail)
                )
            elif not (value is new_map[name] or same(value, new_map[name])):
                found.extend(
                    static_differences(
                        path + name,
                        value,
                        new_map[name],
                        detail=detail,
                        kind="static field",
                        strict=False,
                        depth=1,
                    )
                )
        for name, value in new_fields:
            if name not in old_map:
                found.append(
                    Difference(path + name, ABSENT, value_text(value), ("static field",), detail)
                )
        return found  # empty: only the children's names changed, found by the walk
    found = static_differences(
        path, old_aux, new_aux, detail=detail, kind="static field", strict=False, depth=1
    )
    if found and not any(difference.path[len(path) :].startswith("[") for difference in found):
        return found  # located by name (a field, an attribute): reads as what it is
    # Parts without names: the whole auxiliary data, on a path that cannot read as a child.
    where = f"{path} (aux data of {getattr(kind, '__name__', 'node')})"
    return [
        Difference(
            where,
            value_text(old_aux),
            value_text(new_aux),
            ("static field",),
            "static field: part of the tree structure",
        )
    ]


def _tree_differences(
    path: str,
    old: _Side,
    old_tree: Any,
    old_start: int,
    new: _Side,
    new_tree: Any,
    new_start: int,
    depth: int,
) -> Iterator[Difference]:
    """The differences between two subtrees, walked node by node."""
    old_node, new_node = _node(old_tree), _node(new_tree)
    if old_node is None and new_node is None:  # two leaves
        if not leaf_match(old.argument.values[old_start], new.argument.values[new_start]):
            yield from _value_differences(path, old, new, old_start, new_start)
        return
    if old_node is None or new_node is None or old_node[0] is not new_node[0]:
        before, after = old.text(old_tree, old_start), new.text(new_tree, new_start)
        old_name, new_name = _node_name(old_tree), _node_name(new_tree)
        detail = f"tree structure: {old_name} became {new_name}"
        yield Difference(path, before, after, ("tree structure",), detail)
        return
    kind, old_aux = old_node
    new_aux = new_node[1]
    old_children, new_children = old_tree.children(), new_tree.children()
    old_keys = _child_keys(old, old_tree, old_start, depth)
    new_keys = _child_keys(new, new_tree, new_start, depth)
    old_offsets = _offsets(old_children, old_start)
    new_offsets = _offsets(new_children, new_start)
    if kind is not dict and not same(old_aux, new_aux):
        yield from _aux_differences(path, kind, old_aux, new_aux, old_keys)
    if kind is dict or (_keyed(kind) and old_keys != new_keys):
        new_index = {key: index for index, key in enumerate(new_keys)}
        for index, key in enumerate(old_keys):
            if key not in new_index:
                before = old.text(old_children[index], old_offsets[index])
                yield Difference(path + key, before, ABSENT, ("tree structure",), "key removed")
        old_index = {key: index for index, key in enumerate(old_keys)}
        for index, key in enumerate(new_keys):
            earlier = old_index.get(key)
            if earlier is None:
                after = new.text(new_children[index], new_offsets[index])
                yield Difference(path + key, ABSENT, after, ("tree structure",), "key added")
                continue
            yield from _tree_differences(
                path + key,
                old,
                old_children[earlier],
                old_offsets[earlier],
                new,
                new_children[index],
                new_offsets[index],
                depth + 1,
            )
        return
    if len(old_children) != len(new_children):
        yield Difference(
            path,
            f"{kind.__name__} of {len(old_children)}",
            f"{kind.__name__} of {len(new_children)}",
            ("tree structure",),
            "tree structure: length changed",
        )
    for index, (old_child, new_child) in enumerate(zip(old_children, new_children, strict=False)):
        key = new_keys[index] if new_keys[index] == old_keys[index] else f"[{index}]"
        yield from _tree_differences(
            path + key,
            old,
            old_child,
            old_offsets[index],
            new,
            new_child,
            new_offsets[index],
            depth + 1,
        )


def _keyed(kind: Any) -> bool:
    """Whether a node's children are found by name rather than position."""
    return kind not in (list, tuple)


def _offsets(children: Sequence[Any], start: int) -> list[int]:
    offsets: list[int] = []
    for child in children:
        offsets.append(start)
        start += child.num_leaves
    return offsets


def _value_differences(
    path: str, old: _Side, new: _Side, old_index: int, new_index: int
) -> list[Difference]:
    """How two leaves that JAX would not match differ: a static leaf (``static_nonarrays``)
    by value, located to the field, else by abstract value."""
    before, after = old.argument.values[old_index], new.argument.values[new_index]
    static_leaves = old.argument.nonarrays and new.argument.nonarrays
    if static_leaves and not (is_abstract(before) and is_abstract(after)):
        if is_abstract(before) or is_abstract(after):  # an array became a static value
            detail = (
                "static leaf: an array became a value"
                if is_abstract(before)
                else ("static leaf: a value became an array")
            )
            old_text, new_text = old.leaf(old_index).text, new.leaf(new_index).text
            return [
                Difference(path, old_text, new_text, ("static value",), detail, fix=STATIC_LEAF)
            ]
        found = static_differences(
            path, before, after, detail="static leaf", kind="static value", leaf=True
        )
        return [
            attrs.evolve(difference, fix=STATIC_LEAF)
            if difference.kinds == ("static value",) and difference.fix is None
            else difference
            for difference in found
        ]
    difference = _leaf_difference(path, old.leaf(old_index), new.leaf(new_index))
    return [] if difference is None else [difference]


def _argument_differences(old: Argument, new: Argument) -> list[Difference]:
    found: list[Difference] = []
    if old.keyword != new.keyword:
        found.append(Difference(new.name, _how(old), _how(new), ("passing",), "passed differently"))
    if old.static or new.static:
        if old.static != new.static:
            before, after = argument_text(old), argument_text(new)
            found.append(
                Difference(new.name, before, after, ("static value",), "static argument value")
            )
        elif not static_equal(old.values[0], new.values[0]):
            found.extend(
                static_differences(
                    new.name,
                    old.values[0],
                    new.values[0],
                    detail="static argument value",
                    kind="static value",
                )
            )
        return found
    old_side, new_side = _Side(old), _Side(new)
    if same(old.treedef, new.treedef):  # the common case: compare leaf by leaf
        for index, (before, after) in enumerate(zip(old.values, new.values, strict=True)):
            if leaf_match(before, after):
                continue
            path = new_side.leaf(index).path
            found.extend(_value_differences(path, old_side, new_side, index, index))
        return found
    found.extend(_tree_differences(new.name, old_side, old.treedef, 0, new_side, new.treedef, 0, 0))
    return found


def argument_text(argument: Argument) -> str:
    """A whole argument as text: its static value, abstract value or tree structure."""
    if argument.static:
        return value_text(argument.values[0])
    if len(argument.values) == 1 and not argument.paths[0]:
        return next(leaves_of(argument)).text
    return _structure_text(argument.treedef)


def differences(old: TracedSignature, new: TracedSignature) -> tuple[Difference, ...]:
    """What differs between two signatures: mesh, config, then argument by argument.

    Located to the leaf, key or field. Empty when the two match (`matches`);
    also empty, in principle, for a difference the signature cannot show.
    """
    found: list[Difference] = []
    if not same(old.abstract_mesh, new.abstract_mesh):
        before, after = mesh_text(old.abstract_mesh), mesh_text(new.abstract_mesh)
        if before == after:
            before, after = str(old.abstract_mesh), str(new.abstract_mesh)
        found.append(Difference("ambient mesh", before, after, ("mesh",), "mesh"))
    old_config = dict(old.config_values)
    for name, value in new.config_values:
        if name in old_config and not same(old_config[name], value):
            before, after = repr(old_config[name]), repr(value)
            found.append(Difference(f"jax config {name}", before, after, ("config",), "config"))
    old_arguments = {argument.name: argument for argument in old.recorded}
    new_names = {argument.name for argument in new.recorded}
    for argument in new.recorded:
        earlier = old_arguments.get(argument.name)
        if earlier is None:
            after = argument_text(argument)
            found.append(
                Difference(argument.name, "(not passed)", after, ("new argument",), "new argument")
            )
        else:
            found.extend(_argument_differences(earlier, argument))
    for argument in old.recorded:
        if argument.name not in new_names:
            before = argument_text(argument)
            kinds = ("missing argument",)
            found.append(Difference(argument.name, before, "(not passed)", kinds, "not passed now"))
    return tuple(found)


def closest(
    history: Sequence[TracedSignature], new: TracedSignature
) -> tuple[TracedSignature | None, tuple[Difference, ...]]:
    """The earlier trace with the fewest differences (the latest on ties); a trace that
    ``new`` matches exactly wins outright."""
    best: TracedSignature | None = None
    best_differences: tuple[Difference, ...] = ()
    for old in history:
        if matches(old, new):
            return old, ()
        found = differences(old, new)
        if best is None or len(found) <= len(best_differences):
            best, best_differences = old, found
    return best, best_differences
