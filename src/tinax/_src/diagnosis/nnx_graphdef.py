"""A `flax.nnx` ``GraphDef`` read as the Module it describes, for the diagnosis.

``nnx.split(model)`` gives a ``GraphDef``: the graph's nodes in one flat list
and every node's attributes in another, in depth-first order. Passed as a
static argument (or held in a pytree, where it is static), a changed
``GraphDef`` retraces, and its dataclass fields would name the change by flat
index (``graphdef.attributes[36][1].value``). Here both lists are walked back
into attribute paths (``graphdef.temperature``, ``graphdef.layers[0].use_bias``),
the way the user wrote the Module. flax is not imported: the objects are
recognized by their class and read by their attribute names.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

_INTERNAL = "_pytree__"  # nnx's own bookkeeping attributes: named only if nothing else differs


def is_graphdef(value: object) -> bool:
    """Whether ``value`` is an nnx ``GraphDef`` (duck-typed; flax is not imported)."""
    kind = type(value)
    return (
        kind.__name__ == "GraphDef"
        and kind.__module__.startswith("flax.nnx")
        and hasattr(value, "nodes")
        and hasattr(value, "attributes")
    )


class _Node:
    """Stands for a node of the graph in the flat view: its type (and, for a Variable,
    its metadata), compared with ``==``."""

    __slots__ = ("kind", "metadata")

    def __init__(self, kind: Any, metadata: Any) -> None:
        self.kind = kind
        self.metadata = metadata

    def __eq__(self, other: object) -> bool:
        if type(other) is not _Node:
            return NotImplemented
        try:
            return bool(self.kind is other.kind and self.metadata == other.metadata)
        except Exception:
            return False

    def __hash__(self) -> int:
        return id(self.kind)

    def __repr__(self) -> str:
        name = getattr(self.kind, "__name__", repr(self.kind))
        return f"<{name}>"


def _key_text(key: object) -> str:
    return f".{key}" if isinstance(key, str) and key.isidentifier() else f"[{key!r}]"


def flat_view(graphdef: Any) -> dict[str, Any]:
    """``{attribute path: static value or node}`` of a ``GraphDef``; paths start with ``""``
    for the root (``".temperature"``, ``".layers[0].kernel"``)."""
    nodes: Iterator[Any] = iter(graphdef.nodes)
    attributes: Iterator[Any] = iter(graphdef.attributes)
    view: dict[str, Any] = {}

    def node(path: str) -> None:
        current = next(nodes)
        kind: Any = getattr(current, "type", None)
        if kind is None:
            kind = type(cast("object", current))
        metadata = (
            getattr(current, "metadata", None) if type(current).__name__ == "VariableDef" else None
        )
        view[path] = _Node(kind, metadata)
        for _ in range(int(getattr(current, "num_attributes", 0) or 0)):
            key, attribute = next(attributes)
            child = path + _key_text(key)
            name = type(attribute).__name__
            if name == "NodeAttr":
                node(child)
            elif name == "Static":
                view[child] = getattr(attribute, "value", attribute)
            else:  # a leaf (an array held in the graph): its value is in the state
                view[child] = name

    node("")
    return view


def differences(old: Any, new: Any) -> list[tuple[str, Any, Any]] | None:
    """``(attribute path, old value, new value)`` per difference between two
    ``GraphDef``s (a missing side is `ABSENT`), or ``None`` if they cannot be read."""
    try:
        before, after = flat_view(old), flat_view(new)
    except Exception:  # another layout than flax 0.12's: the generic walk applies
        return None
    found: list[tuple[str, Any, Any]] = []
    for path, value in before.items():
        if path not in after:
            found.append((path, value, ABSENT))
        elif not _same(value, after[path]):
            found.append((path, value, after[path]))
    found.extend((path, ABSENT, value) for path, value in after.items() if path not in before)
    # A node added, removed or of another type: named once, not with everything below it.
    roots = [path for path, a, b in found if type(a) is _Node or type(b) is _Node]
    found = [entry for entry in found if not any(_below(entry[0], root) for root in roots)]
    public = [entry for entry in found if _INTERNAL not in entry[0]]
    return public or found


def _below(path: str, root: str) -> bool:
    return len(path) > len(root) and path.startswith(root) and path[len(root)] in ".["


def _same(a: object, b: object) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except Exception:
        return False


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "(absent)"


ABSENT: Any = _Absent()
