"""Static values located to the part that differs: the field of a dataclass, attrs class,
namedtuple or equinox Module, the key of a dict, the item of a list, the attribute of
an nnx GraphDef."""

from __future__ import annotations

import dataclasses
import numbers
import sys
from collections.abc import Iterator, Sequence
from typing import Any, cast

import attrs

from tinax._src import private
from tinax._src.diagnosis import nnx_graphdef, reuse
from tinax._src.diagnosis.kinds import (
    ABSENT,
    MAX_DEPTH,
    NOT_SELF_EQUAL,
    REBUILT_CALLABLE,
    STATIC_HASH,
    Difference,
    static_fix,
)
from tinax._src.diagnosis.record import (
    value_text,
)
from tinax._src.diagnosis.reuse import same, static_equal


def _fields(value: Any) -> list[tuple[str, Any]] | None:
    """``(accessor text, child)`` for a value whose parts can be compared one by one."""
    kind: type[Any] = type(value)  # pyright: ignore[reportUnknownVariableType]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [
            (f".{field.name}", getattr(value, field.name, None))
            for field in dataclasses.fields(value)
            if field.compare
        ]
    if attrs.has(kind):
        return [
            (f".{field.name}", getattr(value, field.name, None))
            for field in attrs.fields(kind)
            if field.eq
        ]
    if isinstance(value, tuple) and hasattr(kind, "_fields"):  # a namedtuple
        names: tuple[str, ...] = getattr(kind, "_fields", ())
        return [(f".{name}", getattr(value, name, None)) for name in names]  # pyright: ignore[reportUnknownArgumentType]
    return None


def _equality(
    path: str, before: str, after: str, new: object, detail: str, fix: str | None
) -> Difference:
    """A difference of static equality: the values look alike, and JAX tells them apart."""
    return Difference(
        path, before, after, ("static equality",), f"{type_name(new)} {detail}", fix=fix
    )


def _hashable(*values: object) -> bool:
    try:
        for value in values:
            hash(value)
    except Exception:
        return False
    return True


def type_name(value: object) -> str:
    return type(value).__name__


def static_differences(
    path: str,
    old: Any,
    new: Any,
    *,
    detail: str,
    kind: str,
    strict: bool = True,
    depth: int = 0,
    leaf: bool = False,
) -> list[Difference]:
    """Where two static values differ, as JAX's cache sees them.

    ``strict`` compares as JAX keys static arguments (type, hash, ``==``); the
    parts inside are compared with ``==``, as the value's own ``__eq__`` does.
    ``leaf`` marks a leaf held static by ``static_nonarrays`` (its fix says so).
    """
    if static_equal(old, new) if strict else (old is new or same(old, new)):
        return []
    before, after = value_text(old), value_text(new)
    if type(old) is not type(new):
        if not (callable(old) and callable(new)):  # two functions differ by more than type
            detail = f"{detail}, type: {type_name(old)} -> {type_name(new)}"
        fix = static_fix(kind, old, new, leaf=leaf)
        return [Difference(path, before, after, (kind,), detail, fix=fix)]
    found: list[Difference] = []
    if depth < MAX_DEPTH and nnx_graphdef.is_graphdef(old):  # by attribute path, not index
        found = _graphdef_differences(path, old, new, detail=detail, kind=kind)
    if depth < MAX_DEPTH and not found:
        found = list(
            _part_differences(path, old, new, detail=detail, kind=kind, depth=depth, leaf=leaf)
        )
    if found:
        return found
    if strict and private.STATIC_HASH_DECIDES and same(old, new) and _hashable(old, new):
        # A dataclass hashes by its fields: the part whose hash disagrees with == is the cause.
        path, old, new = _hash_part(path, old, new, depth) or (path, old, new)
        version = ".".join(map(str, private.JAX_VERSION))
        detail = (
            f"is equal by == but hashes differently; jax {version} finds static arguments by hash"
        )
        return [_equality(path, value_text(old), value_text(new), new, detail, STATIC_HASH)]
    if before == after and value_text(old, _WHOLE) == value_text(new, _WHOLE):
        return [_alike(path, before, after, new)]
    return [
        Difference(path, before, after, (kind,), detail, fix=static_fix(kind, old, new, leaf=leaf))
    ]


_WHOLE = sys.maxsize  # a repr uncut: two long ones cut alike may still differ


def _alike(path: str, before: str, after: str, new: Any) -> Difference:
    """Two values that print alike and that JAX tells apart, with the fix that is true of
    the value's type: a function rebuilt, a NaN, a class whose == is identity (the one
    case where defining == by value is the fix), or a class whose own == says no."""
    kind: type[Any] = type(new)  # pyright: ignore[reportUnknownVariableType]
    if callable(new) and not isinstance(new, type):
        return _equality(
            path, before, after, new, "is equal by repr but not by ==", REBUILT_CALLABLE
        )
    if not same(new, new):
        if isinstance(new, numbers.Number):
            detail = "is NaN, and NaN is never equal to itself"
            return _equality(path, before, after, new, detail, NOT_SELF_EQUAL)
        fix = f"{kind.__name__}'s own == is False even for one value: {_OWN_EQ_FIX}"
        return _equality(path, before, after, new, "is not equal even to itself", fix)
    detail = "is equal by repr but not by =="
    if getattr(kind, "__eq__", None) is object.__eq__:
        if dataclasses.is_dataclass(kind) or attrs.has(kind):
            fix = (
                f"{kind.__name__} has eq=False, so == is identity: drop eq=False "
                "(frozen=True then also hashes by value), or pass the same object on every call"
            )
            return _equality(path, before, after, new, detail, fix)
        return _equality(path, before, after, new, detail, None)  # the usual fix is true
    fix = f"{kind.__name__}'s own == tells these apart: {_OWN_EQ_FIX}"
    return _equality(path, before, after, new, detail, fix)


_OWN_EQ_FIX = (
    "make it compare what repr shows (a NaN inside is never equal to itself), "
    "or pass the same object on every call"
)


def _hash_part(path: str, old: Any, new: Any, depth: int) -> tuple[str, Any, Any] | None:
    """The innermost part (field, entry, item) of two equal values whose hashes differ."""
    if depth >= MAX_DEPTH:
        return None
    parts = _fields(old)
    pairs: list[tuple[str, Any, Any]] = []
    if parts is not None:
        pairs = [(name, a, b) for (name, a), (_, b) in zip(parts, _fields(new) or [], strict=False)]
    elif isinstance(old, dict) and isinstance(new, dict):
        old_map, new_map = cast("dict[Any, Any]", old), cast("dict[Any, Any]", new)
        pairs = [(f"[{k!r}]", v, new_map[k]) for k, v in old_map.items() if k in new_map]
    elif isinstance(old, list | tuple) and isinstance(new, list | tuple):
        old_items, new_items = cast("Sequence[Any]", old), cast("Sequence[Any]", new)
        pairs = [
            (f"[{i}]", a, b) for i, (a, b) in enumerate(zip(old_items, new_items, strict=False))
        ]
    for name, a, b in pairs:
        if same(a, b) and _hashable(a, b) and not reuse.hash_equal(a, hash(b)):
            return _hash_part(path + name, a, b, depth + 1) or (path + name, a, b)
    return None


def _graphdef_differences(
    path: str, old: Any, new: Any, *, detail: str, kind: str
) -> list[Difference]:
    """Two `flax.nnx` GraphDefs compared as the Modules they describe (`nnx_graphdef`)."""
    found = nnx_graphdef.differences(old, new)
    if not found:
        return []
    where = f"{detail}: an nnx GraphDef, compared attribute by attribute"
    return [
        Difference(
            path + part,
            ABSENT if before is nnx_graphdef.ABSENT else value_text(before),
            ABSENT if after is nnx_graphdef.ABSENT else value_text(after),
            (kind,),
            where,
            fix=static_fix(kind, before, after),
        )
        for part, before, after in found
    ]


def _part_differences(
    path: str, old: Any, new: Any, *, detail: str, kind: str, depth: int, leaf: bool
) -> Iterator[Difference]:
    """The differences between the parts of two values of one type (fields, keys, items)."""
    nested: dict[str, Any] = {
        "detail": detail,
        "kind": kind,
        "strict": False,
        "depth": depth + 1,
        "leaf": leaf,
    }
    parts = _fields(old)
    if parts is not None:
        for (name, a), (_, b) in zip(parts, _fields(new) or [], strict=False):
            yield from static_differences(path + name, a, b, **nested)
    elif isinstance(old, dict):
        old_map = cast("dict[Any, Any]", old)
        new_map = cast("dict[Any, Any]", new)
        for key, value in old_map.items():
            if key not in new_map:
                yield Difference(f"{path}[{key!r}]", value_text(value), ABSENT, (kind,), detail)
            else:
                yield from static_differences(f"{path}[{key!r}]", value, new_map[key], **nested)
        for key, value in new_map.items():
            if key not in old_map:
                yield Difference(f"{path}[{key!r}]", ABSENT, value_text(value), (kind,), detail)
    elif isinstance(old, list | tuple):
        old_items = cast("Sequence[Any]", old)
        new_items = cast("Sequence[Any]", new)
        if len(old_items) != len(new_items):
            yield Difference(
                path,
                f"{type_name(old)} of {len(old_items)}",  # pyright: ignore[reportUnknownArgumentType]
                f"{type_name(new)} of {len(new_items)}",
                (kind,),
                f"{detail}: length changed",
            )
        for index, (a, b) in enumerate(zip(old_items, new_items, strict=False)):
            yield from static_differences(f"{path}[{index}]", a, b, **nested)
