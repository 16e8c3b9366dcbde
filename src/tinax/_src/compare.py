"""How a call differs from earlier traces, and how to say it to a person.

Used by the budget error, by ``explain`` and by the printed history; runs only
when one of those is asked for, never on the call path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from tinax._src.record import (
    Argument,
    Leaf,
    TracedSignature,
    leaves_of,
    mesh_text,
    static_text,
    structure_text,
)

_SAME_ARGUMENTS = (
    "pass the same arguments on every call (to JAX, a default passed explicitly is a new argument)"
)
HINTS = {
    "mesh": "the ambient mesh is part of JAX's cache key: call under one mesh, "
    "or bind one with mesh=",
    "config": "a JAX config option in the trace cache key changed: set it once, around every call",
    "shape": "every new shape is a new trace: pad or bucket inputs to a few fixed shapes "
    "(pad or drop a last, partial batch)",
    "dtype": "cast inputs to one dtype before the call",
    "weak type": "pass the scalar the same way on every call: always a Python number, "
    "or always an array of one dtype (jnp.float32(lr), not jnp.asarray(lr))",
    "sharding": "give inputs one sharding before the call (jax.device_put or jax.sharding.reshard)",
    "type": "pass inputs of one abstract type (memory space, varying manual axes)",
    "static value": "every new value of a static argument is a new trace: keep it fixed, "
    "or do not mark it static and pass it as an array",
    "tree structure": "keep the tree structure fixed between calls "
    "(same keys, same lengths, None in the same places)",
    "passing": "pass each argument the same way on every call, positionally or by keyword: "
    "JAX keys on which",
    "new argument": _SAME_ARGUMENTS,
    "missing argument": _SAME_ARGUMENTS,
}


@attrs.frozen
class Difference:
    """One difference between an earlier trace and a new call.

    Attributes:
        path: The argument or leaf that changed, e.g. ``batch['x']``, or
            ``ambient mesh`` / ``jax config <option>``.
        before: Its abstract value in the earlier trace.
        after: Its abstract value in the new call.
        kinds: What changed, e.g. ``("shape",)`` or ``("dtype", "weak type")``;
            one of ``shape``, ``dtype``, ``weak type``, ``sharding``, ``type``,
            ``static value``, ``tree structure``, ``passing``, ``new argument``,
            ``missing argument``, ``mesh``, ``config``.
        detail: The parenthesized description in the printed line.
    """

    path: str
    before: str
    after: str
    kinds: tuple[str, ...]
    detail: str

    @property
    def hint(self) -> str:
        """The usual fix for the first kind of change."""
        return HINTS[self.kinds[0]]

    def __str__(self) -> str:
        if self.kinds == ("tree structure",):
            return f"{self.path}: tree structure changed: {self.before} -> {self.after}"
        return f"{self.path}: {self.before} -> {self.after} ({self.detail})"


def _python_scalar(dtype: str | None) -> str:
    if dtype == "bool":
        return "bool"
    if dtype and dtype[0] in "iu":
        return "int"
    if dtype and dtype[0] == "c":
        return "complex"
    return "float"


def _placement(leaf: Leaf) -> str:
    if leaf.mesh is None:
        return "no mesh"
    return leaf.mesh if leaf.sharding is None else f"{leaf.sharding} on {leaf.mesh}"


def _leaf_difference(old: Leaf, new: Leaf) -> Difference | None:
    if old.kind == "static" or new.kind == "static":
        if old.kind == new.kind and old.text == new.text:
            return None
        return Difference(new.path, old.text, new.text, ("static value",), "static argument value")
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
    if old.weak_type != new.weak_type:
        scalar = _python_scalar(old.dtype if old.weak_type else new.dtype)
        became = (
            f"a Python {scalar} became an array"
            if old.weak_type
            else f"an array became a Python {scalar}"
        )
        details[kinds.index("weak type")] = f"weak type: {became}"
    if "sharding" in kinds and old.text == new.text:  # the types print alike: say where
        details[kinds.index("sharding")] = f"sharding: {_placement(old)} -> {_placement(new)}"
    if not kinds:
        if old.text == new.text:
            return None
        kinds, details = ["type"], ["abstract type"]
    return Difference(new.path, old.text, new.text, tuple(kinds), ", ".join(details))


def _argument_text(argument: Argument) -> str:
    if argument.static:
        return static_text(argument.values[0])
    if len(argument.values) == 1 and not argument.paths[0]:
        return next(leaves_of(argument)).text
    return structure_text(argument)


def _how(argument: Argument) -> str:
    return "by keyword" if argument.keyword else "by position"


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def _argument_differences(old: Argument, new: Argument) -> list[Difference]:
    found: list[Difference] = []
    if old.keyword != new.keyword:
        found.append(Difference(new.name, _how(old), _how(new), ("passing",), "passed differently"))
    if old.static or new.static:
        if old.static != new.static or not _same(old.values[0], new.values[0]):
            before, after = _argument_text(old), _argument_text(new)
            found.append(
                Difference(new.name, before, after, ("static value",), "static argument value")
            )
        return found
    if not _same(old.treedef, new.treedef):
        before, after = structure_text(old), structure_text(new)
        found.append(Difference(new.name, before, after, ("tree structure",), "tree structure"))
        return found
    old_leaves: list[Leaf] | None = None
    new_leaves: list[Leaf] | None = None
    for index, (before, after) in enumerate(zip(old.values, new.values, strict=True)):
        if _same(before, after):
            continue
        old_leaves = old_leaves or list(leaves_of(old))
        new_leaves = new_leaves or list(leaves_of(new))
        difference = _leaf_difference(old_leaves[index], new_leaves[index])
        if difference is not None:
            found.append(difference)
    return found


def differences(old: TracedSignature, new: TracedSignature) -> tuple[Difference, ...]:
    """What differs between two signatures: mesh, config, then argument by argument.

    Empty exactly when JAX's trace cache would treat the two calls alike, as
    far as the signature shows (static arguments are compared by ``repr``).
    """
    found: list[Difference] = []
    if not _same(old.abstract_mesh, new.abstract_mesh):
        before, after = mesh_text(old.abstract_mesh), mesh_text(new.abstract_mesh)
        if before == after:
            before, after = str(old.abstract_mesh), str(new.abstract_mesh)
        found.append(Difference("ambient mesh", before, after, ("mesh",), "mesh"))
    old_config = dict(old.config_values)
    for name, value in new.config_values:
        if name in old_config and not _same(old_config[name], value):
            before, after = repr(old_config[name]), repr(value)
            found.append(Difference(f"jax config {name}", before, after, ("config",), "config"))
    old_arguments = {argument.name: argument for argument in old.recorded}
    new_names = {argument.name for argument in new.recorded}
    for argument in new.recorded:
        earlier = old_arguments.get(argument.name)
        if earlier is None:
            after = _argument_text(argument)
            found.append(
                Difference(argument.name, "(not passed)", after, ("new argument",), "new argument")
            )
        else:
            found.extend(_argument_differences(earlier, argument))
    for argument in old.recorded:
        if argument.name not in new_names:
            before = _argument_text(argument)
            kinds = ("missing argument",)
            found.append(Difference(argument.name, before, "(not passed)", kinds, "not passed now"))
    return tuple(found)


def closest(
    history: Sequence[TracedSignature], new: TracedSignature
) -> tuple[TracedSignature | None, tuple[Difference, ...]]:
    """The earlier trace with the fewest differences (the latest on ties)."""
    best: TracedSignature | None = None
    best_differences: tuple[Difference, ...] = ()
    for old in history:
        found = differences(old, new)
        if best is None or len(found) <= len(best_differences):
            best, best_differences = old, found
    return best, best_differences
