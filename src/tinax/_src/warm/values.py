"""How the values of a recorded signature are written, and found again next run.

A signature holds, besides abstract values, the static values JAX keys a trace on:
static arguments, the non-array leaves of ``static_nonarrays``, and whatever a
model's tree structure carries (equinox's static fields and its ``MISSING``
sentinel, an nnx object's static attributes). Most pickle by value. Some must not:
JAX compares a function, a ``custom_jvp`` or a sentinel by identity, so a copy
would never match the next run's own object. Those are module-level objects, and
are written by reference instead (their module and the name they are bound to
there), as `pickle` writes a class or a function: ``jax.nn.relu`` (a ``custom_jvp``
object bound to ``relu``), a lambda bound to a module-level name, equinox's
``MISSING``, an optimizer bound to a module-level name. Next run the name is looked
up again; a name that is gone, or bound to another kind of object, makes the
signature fail to load (`Gone`), which the caller logs.

A value that is neither (a closure's lambda) cannot be written: `culprit` finds
where it sits in the argument, so that one log line can name its path.
"""

from __future__ import annotations

import importlib
import io
import pickle
import sys
import types
from collections.abc import Iterator, Sequence
from typing import Any, cast

from tinax._src import private

# Types whose values pickle writes well by value (and calls no reducer_override for most
# of them); exact types: a subclass (a namedtuple of functions) may be module-level.
_PLAIN: frozenset[type] = frozenset(
    (
        type(None),
        bool,
        int,
        float,
        complex,
        str,
        bytes,
        bytearray,
        tuple,
        list,
        dict,
        set,
        frozenset,
        range,
        slice,
        type(Ellipsis),
        type(NotImplemented),
        types.ModuleType,
        types.CodeType,
    )
)
_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType)
_MAIN = "__main__"
_DEPTH = 24  # how deep `culprit` looks into a value for what does not pickle


class Gone(LookupError):
    """A value recorded by reference that is no longer there (or is another kind of
    object now); the message says which, in one line."""


def kind_name(value: object) -> str:
    """``module.QualifiedName`` of the value's type (``builtins.function`` for a
    function)."""
    kind = type(value)
    return f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', kind.__name__)}"


def _resolve(module: str, name: str, kind: str) -> Any:
    """The object bound to ``name`` (dotted) in ``module``, checked to be of ``kind``;
    what a value written by reference loads as."""
    where = f"{module}.{name} (of type {_readable(kind)})"
    try:
        found: Any = importlib.import_module(module)
        for part in name.split("."):
            found = getattr(found, part)
    except Exception:
        raise Gone(f"the value recorded as {where} is no longer there") from None
    if kind_name(found) != kind:
        raise Gone(
            f"the value recorded as {where} is of type {_readable(kind_name(found))} now"
        ) from None
    return found


def _readable(kind: str) -> str:
    return kind.removeprefix("builtins.")


class _Pickler(private.PortablePickler):
    """`private.PortablePickler` (abstract values as the loader's own) that writes a
    module-level object by reference."""

    def __init__(self, file: io.BytesIO, modules: Sequence[str]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._modules = tuple(dict.fromkeys((*modules, _MAIN)))
        self._names: dict[str, dict[int, str]] = {}

    def reducer_override(self, obj: Any) -> Any:
        reduced = super().reducer_override(obj)
        if reduced is not NotImplemented:
            return reduced
        if type(obj) in _PLAIN or isinstance(obj, type):
            return NotImplemented  # pickle's own (a class by reference)
        if isinstance(obj, _FUNCTIONS) and _named(obj):
            return NotImplemented  # pickle's own: by reference, as it names it
        found = self._reference(obj)
        if found is None:
            return NotImplemented
        return _resolve, (*found, kind_name(obj))

    def _reference(self, obj: object) -> tuple[str, str] | None:
        """``(module, name)`` that ``obj`` is bound to, or ``None``."""
        try:
            home = getattr(obj, "__module__", None)
            qualname = getattr(obj, "__qualname__", None)
        except Exception:
            return None
        if isinstance(home, str) and isinstance(qualname, str) and "<" not in qualname:
            module = sys.modules.get(home)
            if module is not None and _lookup(module, qualname) is obj:
                return home, qualname  # a function, a custom_jvp: as pickle names it
        homes = (home, *self._modules) if isinstance(home, str) else self._modules
        for candidate in dict.fromkeys(homes):
            name = self._names_in(candidate).get(id(obj))
            if name is not None:
                return candidate, name
        return None

    def _names_in(self, module_name: str) -> dict[int, str]:
        """``{id(value): name}`` of the module's globals (the first name of each), read
        once per pickle."""
        names = self._names.get(module_name)
        if names is None:
            names = dict[int, str]()
            module = sys.modules.get(module_name)
            if module is not None:
                try:
                    items: list[tuple[str, object]] = list(vars(module).items())
                except Exception:
                    items = []
                for name, value in items:
                    if not name.startswith("__") and type(value) not in _PLAIN:
                        names.setdefault(id(value), name)
            self._names[module_name] = names
        return names


def _named(function: object) -> bool:
    """Whether pickle finds ``function`` by its module and qualified name."""
    try:
        home = getattr(function, "__module__", None)
        qualname = getattr(function, "__qualname__", None)
    except Exception:
        return False
    if not isinstance(home, str) or not isinstance(qualname, str) or "<" in qualname:
        return False
    module = sys.modules.get(home)
    return module is not None and _lookup(module, qualname) is function


def _lookup(module: types.ModuleType, qualname: str) -> object:
    found: object = module
    try:
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:
        return None
    return found


def dumps(value: object, modules: Sequence[str] = ()) -> bytes:
    """``pickle.dumps`` of ``value``, with module-level objects by reference: those of
    the value's own module, and those bound to a name in ``modules`` or ``__main__``.

    Raises:
        Exception: What pickling raises for a value that is neither plain data nor
            module-level (a closure's lambda).
    """
    buffer = io.BytesIO()
    _Pickler(buffer, modules).dump(value)
    return buffer.getvalue()


def pickles(value: object, modules: Sequence[str] = ()) -> bool:
    try:
        dumps(value, modules)
    except Exception:
        return False
    return True


def culprit(value: object, path: str, modules: Sequence[str] = ()) -> tuple[str, object]:
    """``(path, value)`` of the innermost part of ``value`` (which does not pickle) that
    does not pickle: a field, an item, an attribute, written as tinax writes paths
    (``model.layers[0].activation``)."""
    seen = {id(value)}
    for _ in range(_DEPTH):
        for key, child in _children(value):
            if id(child) in seen:
                continue
            seen.add(id(child))
            if not pickles(child, modules):
                value, path = child, path + key
                break
        else:
            break
    return path, value


def _children(value: object) -> Iterator[tuple[str, object]]:
    """``(path suffix, child)`` of a container's items or an object's attributes."""
    if isinstance(value, dict):
        for key, item in cast("dict[Any, Any]", value).items():
            yield f"[{key!r}]", item
    elif isinstance(value, list | tuple):
        items = cast("Sequence[Any]", value)
        fields = cast("tuple[str, ...]", getattr(type(items), "_fields", ()))  # a namedtuple's
        if fields:
            for field, item in zip(fields, items, strict=False):
                yield f".{field}", item
            return
        for index, item in enumerate(items):
            yield f"[{index}]", item
    elif not isinstance(value, types.FunctionType | type):
        try:
            attributes = dict(vars(value))
        except Exception:
            return
        for name, item in attributes.items():
            yield f".{name}", item
