"""``propagate_updates``: what becomes of a `flax.nnx` ``Variable`` assigned inside a trace.

An nnx Module, Optimizer or Rngs passed to `jax.jit` is a pytree: JAX flattens
it at the call and builds new objects from the leaves inside the trace, so an
assignment there (``optimizer.update(model, grads)``, BatchNorm's statistics,
Dropout's RNG counter) changes those new objects and is dropped when the trace
ends, silently. The three modes:

- ``None`` (the default): the trace is watched. A ``Variable`` reachable from
  an argument whose value was assigned and whose new value is not among the
  outputs makes the trace raise `ValueError`, naming every such path. Nothing
  runs on a cached call: the object stays the `jax.jit` object itself.
- ``True``: the assignments are written back into the caller's objects after
  every call, as ``nnx.jit`` does. The caller's objects are flattened once
  (``nnx.jit_partial``'s idea) and kept while their structure is unchanged, a
  check by identity of each node's attributes; a call passes, in each object's
  place, its Variables' raw values as a flat list, and writes back only the
  values the trace assigned.
- ``False``: `jax.jit`'s behaviour (dropped).

flax is never imported here: its classes are read from ``sys.modules`` when a
trace or call needs them (no nnx object can exist before flax is imported).
"""

from __future__ import annotations

import operator
import sys
import threading
from collections.abc import Callable
from typing import Any, cast

import jax
import numpy as np

from tinax._src import private
from tinax._src.diagnosis import record, report
from tinax._src.wrappers import validation
from tinax._src.wrappers.jit_options import NO_STATICS

# --- the option ---------------------------------------------------------------------------


def check_propagate_updates(api: str, value: object) -> bool | None:
    """``value`` as ``True``, ``False`` or ``None`` (a NumPy bool is a bool)."""
    if value is None:
        return None
    if not issubclass(type(value), bool | np.bool_):
        raise TypeError(validation.message(api, "propagate_updates", "True, False or None", value))
    return bool(cast(Any, value))


def check_with_nonarrays(api: str, propagate: bool | None, static_nonarrays: bool) -> None:
    """Refuses ``propagate_updates=True`` next to ``static_nonarrays=True``: the write-back
    rebuilds the nnx objects of the call, the split call hands the function a rebuilt tree
    of its own, and an nnx object keeps its non-array attributes static already."""
    if propagate and static_nonarrays:
        raise ValueError(
            f"{api}: propagate_updates must not be True when static_nonarrays=True (an nnx "
            "object keeps its non-array attributes in its tree structure already: use "
            "propagate_updates alone for nnx objects, static_nonarrays for equinox modules); "
            "got propagate_updates=True."
        )


# --- flax's classes, without importing flax -----------------------------------------------


def _nnx_kinds() -> tuple[type, type] | None:
    """``(nnx.Pytree, nnx.Variable)``, or ``None`` while flax.nnx is not imported."""
    module = sys.modules.get("flax.nnx")
    if module is None:
        return None
    pytree = getattr(module, "Pytree", None)
    variable = getattr(module, "Variable", None)
    if not isinstance(pytree, type) or not isinstance(variable, type):
        return None
    return pytree, variable


def _key_text(key: Any) -> str:
    tree_util: Any = jax.tree_util
    text: str = tree_util.keystr((key,))
    return text


def _path_text(name: str, path: tuple[Any, ...]) -> str:
    """A path as the user writes it: ``model.bn.mean``, ``optimizer.opt_state[0].mu['w']``."""
    return name + "".join(_key_text(key) for key in path)


# --- watching a trace ---------------------------------------------------------------------


class _Watched:
    """The Variables reachable from a trace's arguments and their values before it ran.

    One entry per Variable object (a Variable reachable by two paths is listed
    once, under the first), and the tree structure of each argument with the
    Variables as leaves, to tell a change of structure (an attribute added).
    """

    __slots__ = ("before", "keys", "structures", "variables")

    def __init__(self, kinds: tuple[type, type], named: list[tuple[str, Any]]) -> None:
        tree_util: Any = jax.tree_util
        variable_type = kinds[1]

        def is_variable(value: object) -> bool:
            return isinstance(value, variable_type)

        self.variables: list[Any] = []
        self.keys: list[tuple[str, tuple[Any, ...]]] = []  # made text only when reported
        self.before: list[tuple[Any, list[Any]]] = []
        self.structures: list[tuple[str, Any, Any]] = []
        seen: set[int] = set()
        for name, value in named:
            if not holds_nnx(value, kinds):  # a plain argument: nothing of nnx to watch
                continue
            flat, treedef = tree_util.tree_flatten_with_path(value, is_leaf=is_variable)
            self.structures.append((name, value, treedef))
            for path, leaf in flat:
                if not is_variable(leaf) or id(leaf) in seen:
                    continue
                seen.add(id(leaf))
                self.variables.append(leaf)
                self.keys.append((name, tuple(path)))
                self.before.append(_state(leaf))

    def path(self, index: int) -> str:
        """The path of Variable ``index``, as the user writes it."""
        return _path_text(*self.keys[index])

    def changed(self) -> list[int]:
        """Indices of the Variables whose value or metadata was assigned since."""
        return [
            index
            for index, (variable, before) in enumerate(
                zip(self.variables, self.before, strict=True)
            )
            if _assigned(_state(variable), before)
        ]

    def restructured(self, variable_type: type) -> list[str]:
        """The arguments whose structure changed since (an attribute added or removed,
        a Variable replaced by a new one, a static attribute assigned)."""
        tree_util: Any = jax.tree_util

        def is_variable(value: object) -> bool:
            return isinstance(value, variable_type)

        changed: list[str] = []
        for name, value, treedef in self.structures:
            try:
                now = tree_util.tree_structure(value, is_leaf=is_variable)
                same = bool(now == treedef)
            except Exception:
                same = False
            if not same:
                changed.append(name)
        return changed


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


def _state(variable: Any) -> tuple[Any, list[Any]]:
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


def _output_ids(out: object) -> set[int]:
    """The ids of every leaf of the output (a returned Variable gives its value)."""
    return {id(leaf) for leaf in jax.tree.leaves(out)}


def _lost_message(
    function_name: str, paths: list[str], restructured: list[str], *, batched: bool = False
) -> str:
    lines = [
        f"{function_name}: this trace assigns flax.nnx Variables of its arguments and does not "
        f"return their new values; jax.jit would drop them silently, after every call:"
    ]
    lines.extend(f"  {path}" for path in paths)
    lines.extend(
        f"  {name} (its structure changed: an attribute added, removed or replaced)"
        for name in restructured
    )
    if batched:
        lines.append(
            "Fix: return the objects from the function, with out_axes for them, and use the "
            "returned ones: under batched_jit each example assigns its own value, which cannot "
            "be written back into one object."
        )
    else:
        lines.append(
            "Fix: return the objects from the function (return model, optimizer, loss) and use "
            "the returned ones,"
        )
        lines.append(
            "  or wrap with propagate_updates=True: the new values are written back into the "
            "caller's objects after every call, as nnx.jit does."
        )
    lines.append("  (propagate_updates=False drops them, as jax.jit does.)")
    return "\n".join(lines)


def _structure_message(function_name: str, restructured: list[str]) -> str:
    names = ", ".join(restructured)
    return (
        f"{function_name}: this trace changed the structure of {names} (an attribute added, "
        f"removed or replaced, or a Variable's metadata changed): propagate_updates=True "
        f"writes back the values of existing Variables only, and cannot change the caller's "
        f"objects. Make the change outside the function, or return the objects and use the "
        f"returned ones."
    )


# --- the trace-time wrappers --------------------------------------------------------------


class _Frames(threading.local):
    """Per thread, for the trace in progress under ``propagate_updates=True``: each
    rebuilt Variable's id -> its index in the caller's flat list (a stack: a traced
    function may call another wrapped one)."""

    def __init__(self) -> None:
        self.stack: list[dict[int, int] | None] = []


_frames = _Frames()


def watched(
    function: Callable[..., Any],
    mode: bool | None,
    reported: Callable[..., Any],
    signature: validation.LazySignature,
    *,
    batched: bool = False,
    write_all: bool = False,
) -> Callable[..., Any]:
    """``function`` as JAX should trace it under ``mode``.

    ``False``: ``function`` itself. ``None``: raises `ValueError` after the body
    if a Variable of the arguments was assigned and its new value is not among
    the outputs. ``True``: returns ``(out, Updates)``, the new value of each
    assigned Variable (of every Variable with ``write_all``: donated buffers
    must be replaced), for `Propagating` to write back. ``batched``: the
    function runs per example under `jax.vmap`, where a new value cannot be
    written back into one object: ``True`` then acts as ``None``. ``reported``
    is the user's function, named in the errors.
    """
    if mode is False:
        return function
    propagate = mode is True and not batched

    def run(*args: Any, **kwargs: Any) -> Any:
        kinds = _nnx_kinds()
        if not (propagate or batched) and eager():
            kinds = None  # jax.disable_jit: the caller's own objects, assigned for real
        seen: _Watched | None = None
        if kinds is not None:
            try:
                named = record.named_arguments(signature.get(), NO_STATICS, args, kwargs)
                seen = _Watched(kinds, [(name, value) for name, _, value, *_ in named])
            except Exception:  # an exotic argument: watching must never break the trace
                seen = None
        out = function(*args, **kwargs)
        if seen is None or kinds is None:
            return (out, Updates((), ())) if propagate else out
        changed = seen.changed()
        restructured = seen.restructured(kinds[1])
        if propagate:
            frame = _frames.stack[-1] if _frames.stack else None
            if write_all and frame is not None:
                changed = [i for i, v in enumerate(seen.variables) if id(v) in frame]
            return out, _updates(reported, seen, changed, restructured, frame, out)
        returned = _output_ids(out)
        lost = [
            seen.path(index)
            for index in changed
            if not all(id(leaf) in returned for leaf in _state(seen.variables[index])[1])
        ]
        structure_lost = [
            argument
            for argument, value, _ in seen.structures
            if argument in restructured and not _returned_object(value, out)
        ]
        if lost or structure_lost:
            raise ValueError(
                _lost_message(_heading(reported), lost, structure_lost, batched=batched)
            )
        return out

    try:
        cast(Any, run).__wrapped__ = function
    except Exception:
        pass
    return run


def eager() -> bool:
    """Whether a call runs the function on the caller's own objects: `jax.disable_jit`,
    outside any trace (``.lower`` still traces there)."""
    return private.jit_disabled() and not private.tracing_to_jaxpr()


def _heading(function: Callable[..., Any]) -> str:
    where = report.function_location(function)
    return report.function_name(function) + (f" ({where})" if where else "")


def _returned_object(value: object, out: object) -> bool:
    """Whether ``value`` (a node) is itself among the output's nodes."""
    found = False

    def mark(node: object) -> bool:
        nonlocal found
        if node is value:
            found = True
            return True
        return False

    jax.tree.leaves(out, is_leaf=mark)
    return found


def _updates(
    reported: Callable[..., Any],
    seen: _Watched,
    changed: list[int],
    restructured: list[str],
    frame: dict[int, int] | None,
    out: object,
) -> Updates:
    """The assigned values by index in the caller's flat list, for the write-back."""
    if restructured:
        raise ValueError(_structure_message(_heading(reported), restructured))
    indices: list[int] = []
    values: list[Any] = []
    unreachable: list[int] = []
    for index in changed:
        variable = seen.variables[index]
        slot = None if frame is None else frame.get(id(variable))
        if slot is None:
            unreachable.append(index)
            continue
        metadata, _ = _state(variable)
        if metadata != seen.before[index][0]:
            raise ValueError(_structure_message(_heading(reported), [seen.path(index)]))
        indices.append(slot)
        values.append(object.__getattribute__(variable, "_raw_value"))
    if unreachable:
        returned = _output_ids(out)
        lost = [
            seen.path(index)
            for index in unreachable
            if not all(id(leaf) in returned for leaf in _state(seen.variables[index])[1])
        ]
        if lost:
            raise ValueError(
                _lost_message(_heading(reported), lost, [])
                + " With propagate_updates=True, pass each nnx object as an argument of "
                "its own (not inside a list, tuple or dict): only those are written back."
            )
    return Updates(tuple(indices), tuple(values))


class Updates:
    """The new raw values of the Variables a trace assigned, by index in the caller's
    flat list of Variables (a pytree: the indices are static)."""

    __slots__ = ("indices", "values")

    def __init__(self, indices: tuple[int, ...], values: tuple[Any, ...]) -> None:
        self.indices = indices
        self.values = values


def _flatten_updates(updates: Updates) -> tuple[tuple[Any, ...], tuple[int, ...]]:
    return updates.values, updates.indices


def _unflatten_updates(indices: tuple[int, ...], values: Any) -> Updates:
    return Updates(indices, tuple(values))


_tree_util: Any = jax.tree_util
_tree_util.register_pytree_node(Updates, _flatten_updates, _unflatten_updates)


# --- propagate_updates=True: the call -----------------------------------------------------

_MAX_ENTRIES = 8  # sets of objects remembered per wrapped function (train and eval, ...)


class _Layout:
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
        places: tuple[int | str, ...],
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
        if type(other) is not _Layout:
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


class _Slot:
    """Stands in a call for an nnx object: the raw values of the Variables it reaches
    first (a Variable shared with an earlier object is carried by that one), then
    its other leaves; a sharding or donation given for its position applies to
    them."""

    __slots__ = ("layout", "place", "values")

    def __init__(self, layout: _Layout, place: int, values: list[Any] | tuple[Any, ...]) -> None:
        self.layout = layout
        self.place = place
        self.values = values


def _flatten_slot(slot: _Slot) -> tuple[Any, tuple[_Layout, int]]:
    return slot.values, (slot.layout, slot.place)


def _unflatten_slot(aux: tuple[_Layout, int], values: Any) -> _Slot:
    return _Slot(aux[0], aux[1], tuple(values))


_tree_util.register_pytree_node(_Slot, _flatten_slot, _unflatten_slot)


class _Entry:
    """The caller's objects of one call, flattened once: their distinct Variables in
    order, their other leaves, the layout, and a snapshot of every mutable node
    (each Module's attributes, each list and dict, each Variable's metadata) to
    tell, by identity, that nothing in their structure changed since."""

    __slots__ = ("bounds", "layout", "nodes", "objects", "plain", "variables")

    def __init__(
        self, places: tuple[int | str, ...], objects: list[Any], kinds: tuple[type, type]
    ) -> None:
        pytree_type, variable_type = kinds
        tree_util: Any = jax.tree_util
        nodes: list[tuple[Any, Any]] = []

        def visit(node: object) -> bool:
            if isinstance(node, variable_type):
                metadata = object.__getattribute__(node, "_var_metadata")
                nodes.append((metadata, dict(metadata)))
                return True
            if isinstance(node, pytree_type):
                attributes = vars(node)
                nodes.append((attributes, dict(attributes)))
            elif type(node) is list:
                items = cast(list[Any], node)
                nodes.append((items, list(items)))
            elif type(node) is dict:
                mapping = cast(dict[Any, Any], node)
                nodes.append((mapping, dict(mapping)))
            return False

        treedef = tree_util.tree_structure(tuple(objects), is_leaf=visit)
        variables: list[Any] = []
        index_of: dict[int, int] = {}
        plain: list[Any] = []
        kinds_: list[int] = []
        split: list[tuple[int, int]] = []  # per object: its own Variables, its other leaves
        for item in objects:
            first_variable, first_plain = len(variables), len(plain)
            for leaf in tree_util.tree_leaves(item, is_leaf=_is_instance(variable_type)):
                if isinstance(leaf, variable_type):
                    found = index_of.get(id(leaf))
                    if found is None:  # owned by the first object it is reached from
                        found = index_of[id(leaf)] = len(variables)
                        variables.append(leaf)
                    kinds_.append(found)
                else:
                    kinds_.append(-1 - len(plain))
                    plain.append(leaf)
            split.append((len(variables) - first_variable, len(plain) - first_plain))
        shapes = tuple(_variable_tree(variable) for variable in variables)
        self.objects = objects  # held: their ids key the cache
        self.nodes = nodes
        self.variables = variables
        self.plain = plain
        self.layout = _Layout(places, treedef, shapes, tuple(kinds_), tuple(split))
        bounds: list[tuple[int, int, int, int]] = []
        variable_at = plain_at = 0
        for own_variables, own_plain in split:
            bounds.append(
                (variable_at, variable_at + own_variables, plain_at, plain_at + own_plain)
            )
            variable_at += own_variables
            plain_at += own_plain
        self.bounds = tuple(bounds)

    def current(self) -> bool:
        """Whether every node still holds the same objects (by identity; ``==`` only
        where they differ)."""
        try:
            for now, then in self.nodes:
                if now != then:
                    return False
        except Exception:  # a replaced attribute whose == does not give a bool
            return False
        return True


def _is_instance(kind: type) -> Callable[[object], bool]:
    def check(value: object) -> bool:
        return isinstance(value, kind)

    return check


def _variable_tree(variable: Any) -> Any:
    """A Variable's tree around its raw value as one leaf: its type and metadata."""
    raw = object.__getattribute__(variable, "_raw_value")
    tree_util: Any = jax.tree_util

    def is_raw(node: object) -> bool:
        return node is raw

    return tree_util.tree_structure(variable, is_leaf=is_raw)


_raw_value = operator.attrgetter("_raw_value")
_set = object.__setattr__


class Propagating:
    """The callable of an object with ``propagate_updates=True``, and its ``lower``,
    ``trace``, ``eval_shape``, ``clear_cache``: each nnx object among the top-level
    arguments is replaced by its flat values, and the values the trace assigned
    are written back after the call."""

    __slots__ = ("__weakref__", "_entries", "_jitted", "_kinds", "_lock", "_types")

    def __init__(self, jitted: Any) -> None:
        self._jitted = jitted
        self._entries: dict[tuple[Any, ...], _Entry] = {}
        self._kinds: tuple[type, type] | None = None
        self._lock = threading.Lock()
        self._types: dict[type[Any], bool] = {}  # argument type -> is an nnx object

    def _learn(self, kind: type[Any], kinds: tuple[type, type]) -> bool:
        """Whether arguments of type ``kind`` are nnx objects (by class: nnx's
        ``isinstance`` hooks are Python code, too slow for every call)."""
        found = issubclass(kind, kinds)
        if len(self._types) > 256:
            self._types.clear()
        self._types[kind] = found
        return found

    def _bind(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any], _Entry | None]:
        kinds = self._kinds
        if kinds is None:
            kinds = self._kinds = _nnx_kinds()
            if kinds is None:
                return args, kwargs, None
        nnx_type = self._types.get
        places: list[int | str] = []
        for index, value in enumerate(args):
            kind = cast("type[Any]", type(value))
            found = nnx_type(kind)
            if found is None:
                found = self._learn(kind, kinds)
            if found:
                places.append(index)
        if kwargs:
            for name, value in kwargs.items():
                kind = cast("type[Any]", type(value))
                found = nnx_type(kind)
                if found is None:
                    found = self._learn(kind, kinds)
                if found:
                    places.append(name)
        if not places:
            return args, kwargs, None
        objects = [args[place] if type(place) is int else kwargs[place] for place in places]  # pyright: ignore[reportArgumentType, reportCallIssue]
        key = (*places, *map(id, objects))
        entry = self._entries.get(key)
        if entry is None or not entry.current():
            entry = _Entry(tuple(places), objects, kinds)
            with self._lock:
                if len(self._entries) >= _MAX_ENTRIES:
                    self._entries.clear()
                self._entries[key] = entry
        values = list(map(_raw_value, entry.variables))
        plain, layout = entry.plain, entry.layout
        bound = list(args)
        if kwargs:
            kwargs = dict(kwargs)
        for index, (place, (start, end, plain_start, plain_end)) in enumerate(
            zip(places, entry.bounds, strict=True)
        ):
            own = values[start:end]
            if plain_end > plain_start:
                own.extend(plain[plain_start:plain_end])
            slot = _Slot(layout, index, own)  # each object its own values: its shardings
            if type(place) is int:
                bound[place] = slot  # pyright: ignore[reportArgumentType, reportCallIssue]
            else:
                kwargs[place] = slot  # pyright: ignore[reportArgumentType]
        return tuple(bound), kwargs, entry

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args, kwargs, entry = self._bind(args, kwargs)
        out, updates = self._jitted(*args, **kwargs)
        if entry is not None and updates.indices:
            variables = entry.variables
            for index, value in zip(updates.indices, updates.values, strict=True):
                _set(variables[index], "_raw_value", value)
        return out

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        args, kwargs, _ = self._bind(args, kwargs)
        return self._jitted.lower(*args, **kwargs)

    def trace(self, *args: Any, **kwargs: Any) -> Any:
        args, kwargs, _ = self._bind(args, kwargs)
        return self._jitted.trace(*args, **kwargs)

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        args, kwargs, _ = self._bind(args, kwargs)
        out, _ = self._jitted.eval_shape(*args, **kwargs)
        return out

    def clear_cache(self) -> None:
        self._jitted.clear_cache()


def _place(slot: _Slot) -> int:
    return slot.place


def rebinding(counted: Callable[..., Any]) -> Callable[..., Any]:
    """The function JAX traces under ``propagate_updates=True``: rebuilds the nnx
    objects from the flat values of a call (a Variable reached twice is one
    object again) and runs ``counted`` on them, telling `watched` which rebuilt
    Variable is which of the caller's."""

    def rebound(*args: Any, **kwargs: Any) -> Any:
        slots = [value for value in (*args, *kwargs.values()) if type(value) is _Slot]
        if not slots:
            _frames.stack.append(None)
            try:
                return counted(*args, **kwargs)
            finally:
                _frames.stack.pop()
        layout = slots[0].layout
        variable_values: list[Any] = []
        plain: list[Any] = []
        for slot in sorted(slots, key=_place):
            own = layout.split[slot.place][0]
            variable_values.extend(slot.values[:own])
            plain.extend(slot.values[own:])
        tree_util: Any = jax.tree_util
        fresh = [
            tree_util.tree_unflatten(shape, [value])
            for shape, value in zip(layout.variables, variable_values, strict=True)
        ]
        leaves = [fresh[kind] if kind >= 0 else plain[-1 - kind] for kind in layout.kinds]
        objects = tree_util.tree_unflatten(layout.treedef, leaves)
        bound = list(args)
        kwargs = dict(kwargs)
        for place, value in zip(layout.places, objects, strict=True):
            if type(place) is int:
                bound[place] = value
            else:
                kwargs[cast(str, place)] = value
        _frames.stack.append({id(variable): index for index, variable in enumerate(fresh)})
        try:
            return counted(*bound, **kwargs)
        finally:
            _frames.stack.pop()

    for name in (
        "__signature__",
        "__name__",
        "__qualname__",
        "__wrapped__",
        "__module__",
        "__doc__",
    ):
        try:
            setattr(rebound, name, getattr(counted, name))
        except AttributeError:
            pass
    return rebound
