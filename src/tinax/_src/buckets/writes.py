"""How a padded array goes back where a call's argument holds it, as code a person
pastes: a dict or list item and a plain object's attribute are assigned in place; a
tuple, a NamedTuple, a frozen dataclass and an equinox Module are immutable, so each one
on the path is rebuilt around the padded array (``batch = batch._replace(tokens=padded)``)
up to the argument or the nearest container that can be assigned into.

The kind of each container is read off the tree structure the trace recorded
(`record.Argument.treedef`: each node's type), so nothing more is recorded per trace,
and this runs only for a call outside the buckets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax

from tinax._src.diagnosis.record import Argument, TracedSignature

PADDED = "padded"
"""The name the fix gives the padded array where it is put back by a second statement."""


def writes(call: TracedSignature, paths: tuple[str, ...]) -> tuple[str | None, ...]:
    """Per leaf path of ``call`` (as `record.Leaf.path` writes it): the statement that
    puts the array named `PADDED` back into its argument, or ``None`` where the path
    itself can be assigned to (``batch['tokens'] = ...``) or is not one of ``call``'s
    leaves."""
    tree_util: Any = jax.tree_util
    keystr = tree_util.keystr
    found: dict[str, tuple[Argument, int]] = {}
    for argument in call.recorded:
        if argument.static:
            continue
        for index, path in enumerate(argument.paths):
            found.setdefault(argument.name + keystr(path), (argument, index))
    out: list[str | None] = []
    for path in paths:
        at = found.get(path)
        out.append(None if at is None else write(*at))
    return tuple(out)


def write(argument: Argument, index: int) -> str | None:
    """The statement that puts `PADDED` where leaf ``index`` of ``argument`` was, or
    ``None`` where its path can be assigned to as it is written."""
    keys: tuple[Any, ...] = tuple(argument.paths[index])
    types = _containers(argument.treedef, index, len(keys))
    if types is None or not keys:
        return None
    tree_util: Any = jax.tree_util
    keystr = tree_util.keystr
    texts = [argument.name]
    for key in keys:
        texts.append(texts[-1] + keystr((key,)))
    value = PADDED
    for depth in range(len(keys) - 1, -1, -1):
        container, key, holder = types[depth], keys[depth], texts[depth]
        if _assignable(container, key):
            if depth == len(keys) - 1:
                return None  # the leaf's own path: assigned as written
            return f"{texts[depth + 1]} = {value}"
        rebuilt = _rebuilt(container, key, holder, value)
        if rebuilt is None:
            return None
        value = rebuilt
    return f"{argument.name} = {value}"


def _containers(treedef: Any, index: int, depth: int) -> list[type] | None:
    """The type of each container on the path to leaf ``index`` of ``treedef``,
    outermost first (``depth`` of them); ``None`` where the tree does not say."""
    found: list[type] = []
    node = treedef
    for _ in range(depth):
        data = node.node_data()
        if data is None:
            return None
        found.append(data[0])
        for child in node.children():
            if index < child.num_leaves:
                node = child
                break
            index -= child.num_leaves
        else:
            return None
    return found


def _key(key: Any) -> Any:
    for field in ("name", "key", "idx"):
        if hasattr(key, field):
            return getattr(key, field)
    return None


def equinox_module(kind: type) -> bool:
    """Whether ``kind`` is an equinox Module (told without importing equinox)."""
    return any(
        base.__name__ == "Module" and base.__module__.split(".")[0] == "equinox"
        for base in kind.__mro__
    )


def _is(kind: Any, bases: type | tuple[type, ...]) -> bool:
    """``issubclass`` with no narrowing of ``kind`` (a node type read off a tree)."""
    return isinstance(kind, type) and issubclass(kind, bases)


def _frozen(kind: type) -> bool:
    params = getattr(kind, "__dataclass_params__", None)
    return dataclasses.is_dataclass(kind) and bool(getattr(params, "frozen", False))


def _assignable(kind: Any, key: Any) -> bool:
    """Whether ``container[key] = ...`` or ``container.name = ...`` works on a ``kind``."""
    if _is(kind, (dict, list)):
        return True
    if _is(kind, (tuple, Mapping)) or equinox_module(kind) or _frozen(kind):
        return False
    return hasattr(key, "name")  # a plain object's attribute; an unknown item: rebuilt


def _rebuilt(kind: Any, key: Any, holder: str, value: str) -> str | None:
    """``holder`` (a ``kind``) rebuilt with ``value`` at ``key``, as an expression;
    ``None`` where no code is known to rebuild it."""
    name = _key(key)
    if _is(kind, tuple) and hasattr(kind, "_fields") and isinstance(name, str):
        return f"{holder}._replace({name}={value})"
    if _is(kind, tuple) and isinstance(name, int):
        head = f"*{holder}[:{name}], " if name else ""
        return f"({head}{value}, *{holder}[{name + 1}:])"
    if equinox_module(kind) and isinstance(name, str):
        return f"eqx.tree_at(lambda m: m.{name}, {holder}, {value})"
    if dataclasses.is_dataclass(kind) and isinstance(name, str):
        return f"dataclasses.replace({holder}, {name}={value})"
    if _is(kind, Mapping):
        return f"type({holder})({{**{holder}, {name!r}: {value}}})"
    return None  # another registered node, by flat index: no code puts it back
