"""``propagate_updates=True``: the call. Each nnx object among the arguments is
flattened once (`Entry`, kept while its structure is unchanged) and passed as its flat
values; the values the trace assigned are written back after the call, and the caller's
objects the function returns given back as themselves (`Propagating`, and its compiled
stages, `Staged`). The caller's objects are held weakly: an entry goes with the first
of its objects the caller drops (`Propagating._entry`)."""

from __future__ import annotations

import inspect
import operator
import threading
import weakref
from collections.abc import Callable
from typing import Any, cast

import jax

from tinax._src.core import validation
from tinax._src.models.nnx.classes import nnx_kinds
from tinax._src.models.nnx.layout import MAX_DEPTH, Layout, Place, Slot, put_at
from tinax._src.models.nnx.messages import cycle_message
from tinax._src.models.nnx.tracing import NewRef, Returned
from tinax._src.models.nnx.trees import find_cycle

_tree_util: Any = jax.tree_util

_MAX_ENTRIES = 8  # sets of live objects remembered per wrapped function (train and eval, ...)


_PLAIN, _OBJECT, _CONTAINER = 0, 1, 2  # what an argument of a type is (`Propagating._learn`)


class _Revisit(Exception):
    """An nnx object, list or dict reached a second time while `_Entry` flattens: shared
    by two parents, or a cycle (told apart by `find_cycle`)."""


class _Entry:
    """The caller's objects of one call, flattened once: their distinct Variables in
    order, their other leaves, the layout, their nnx objects in the order visited
    (weakly: a returned one is given back by index), and a snapshot of every mutable
    node (each nnx object's attributes, each list and dict, each Variable's metadata)
    to tell, by identity, that nothing in their structure changed since.

    Nothing here refers to the caller's objects themselves (the arguments), only to
    what they hold: an object the caller drops is freed, and its weak reference
    (``refs``, made by `Propagating._entry`) drops the entry with what it holds. An nnx
    object that is not an argument is held by the snapshot of its parent.

    Unless ``shared``, a node reached twice raises `_Revisit` at once: JAX's flatten
    of a cycle would recurse to Python's limit and leave the interpreter's
    recursion depth used up; shared nodes (a tied layer) are flattened again with
    ``shared=True`` once `find_cycle` has found no cycle.
    """

    __slots__ = ("bounds", "layout", "nodes", "plain", "pytrees", "refs", "variables")

    def __init__(
        self,
        places: tuple[Place, ...],
        objects: list[Any],
        kinds: tuple[type, type],
        *,
        shared: bool = False,
    ) -> None:
        pytree_type, variable_type = kinds
        tree_util: Any = jax.tree_util
        nodes: list[tuple[Any, Any]] = []
        pytrees: list[Any] = []
        reached: set[int] = set()

        def visit(node: object) -> bool:
            if isinstance(node, variable_type):
                metadata = object.__getattribute__(node, "_var_metadata")
                nodes.append((metadata, dict(metadata)))
                return True
            key = id(node)
            if isinstance(node, pytree_type):
                attributes = vars(node)
                nodes.append((attributes, dict(attributes)))
                pytrees.append(node)
            elif type(node) is list:
                items = cast("list[Any]", node)
                nodes.append((items, list(items)))
            elif type(node) is dict:
                mapping = cast("dict[Any, Any]", node)
                nodes.append((mapping, dict(mapping)))
            else:
                return False
            if not shared:
                if key in reached:
                    raise _Revisit
                reached.add(key)
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
        self.refs: tuple[weakref.ref[Any], ...] | None = None  # the objects, weakly (`Propagating`)
        self.nodes = nodes
        self.pytrees = tuple(map(weakref.ref, pytrees))  # nnx.Pytree takes weak references
        self.variables = variables
        self.plain = plain
        self.layout = Layout(places, treedef, shapes, tuple(kinds_), tuple(split))
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


def _restore(out: Any, entry: _Entry | None, call: tuple[Any, ...], *, shapes: bool = False) -> Any:
    """``out`` with each `Returned` marker replaced by the caller's own object (a Ref
    from ``call``, the arguments as they reached `jax.jit`), and each `NewRef` by a
    new `jax.Ref` of its value (by the value's shape under ``shapes``: `eval_shape`)."""
    leaves: list[Any] = []
    made: dict[int, Any] = {}

    def back(value: object) -> object:
        if type(value) is NewRef:
            if shapes:
                return value.value
            ref = made.get(value.number)
            if ref is None:
                ref = made[value.number] = cast("Any", jax).new_ref(value.value)
            return ref
        if type(value) is Returned:
            if value.kind == 2:
                if not leaves:
                    leaves.extend(_tree_util.tree_leaves(call))
                return leaves[value.index]
            assert entry is not None
            if value.kind == 0:
                return entry.variables[value.index]
            return entry.pytrees[value.index]()  # alive: an argument of this call, or held by one
        return value

    return _tree_util.tree_map(back, out, is_leaf=_is_returned)


def _is_returned(value: object) -> bool:
    return type(value) is Returned or type(value) is NewRef


def _forgetter(owner: weakref.ref[Propagating], key: tuple[Any, ...]) -> Callable[[Any], None]:
    """The callback of the weak references to the objects of the entry under ``key``:
    when one is freed, the entry goes (if it is still the one under ``key``), with what
    it holds. No lock: the collector may call it in a thread that holds one."""

    def forget(ref: weakref.ref[Any]) -> None:
        propagating = owner()
        if propagating is None:
            return
        entries = propagating._entries  # pyright: ignore[reportPrivateUsage]
        found = entries.get(key)
        if found is not None and found.refs is not None and any(r is ref for r in found.refs):
            entries.pop(key, None)

    return forget


_raw_value = operator.attrgetter("_raw_value")
_set = object.__setattr__


class Propagating:
    """The callable of an object with ``propagate_updates=True``, and its ``lower``,
    ``trace``, ``eval_shape``, ``clear_cache``: each nnx object among the arguments
    (or inside a tuple, list or dict argument) is replaced by its flat values, the
    values the trace assigned are written back after the call, and the caller's
    objects the function returns are given back as themselves."""

    __slots__ = (
        "__weakref__",
        "_entries",
        "_function",
        "_jitted",
        "_kinds",
        "_lock",
        "_signature",
        "_strong",
        "_types",
    )

    def __init__(
        self,
        jitted: Any,
        function: Callable[..., Any],
        signature: validation.LazySignature | None = None,
    ) -> None:
        self._jitted = jitted
        self._function = function  # named in the errors
        self._signature = signature
        self._entries: dict[tuple[Any, ...], _Entry] = {}  # live objects' entries, by ids
        self._strong: tuple[Any, ...] | None = None  # the key of an entry that holds its objects
        self._kinds: tuple[type, type] | None = None
        self._lock = threading.Lock()
        self._types: dict[type[Any], int] = {}  # argument type -> _PLAIN, _OBJECT, _CONTAINER

    def _learn(self, kind: type[Any], kinds: tuple[type, type]) -> int:
        """What arguments of type ``kind`` are: nnx objects, tuples, lists and dicts to
        look into, or neither (by class: nnx's ``isinstance`` hooks are Python code,
        too slow for every call)."""
        if issubclass(kind, kinds):
            found = _OBJECT
        elif kind is tuple or kind is list or kind is dict:
            found = _CONTAINER
        else:
            found = _PLAIN
        if len(self._types) > 256:
            self._types.clear()
        self._types[kind] = found
        return found

    def _scan(
        self,
        container: Any,
        prefix: tuple[Any, ...],
        places: list[Place],
        objects: list[Any],
        kinds: tuple[type, type],
        depth: int,
    ) -> None:
        """Appends the place and the object of each nnx object inside ``container`` (a
        tuple, list or dict at ``prefix``), in the order JAX flattens it."""
        if depth >= MAX_DEPTH:  # a list that holds itself: JAX's to refuse
            return
        if type(container) is not dict:
            self._scan_items(enumerate(container), prefix, places, objects, kinds, depth)
            return
        mapping = cast("dict[Any, Any]", container)
        start = len(places)
        self._scan_items(mapping.items(), prefix, places, objects, kinds, depth)
        if len(places) > start and len(mapping) > 1:  # JAX orders a dict by its keys
            try:
                keys = sorted(mapping)
            except TypeError:  # keys JAX cannot order: its own error follows
                return
            if keys != list(mapping):
                del places[start:], objects[start:]
                items = [(key, mapping[key]) for key in keys]
                self._scan_items(items, prefix, places, objects, kinds, depth)

    def _scan_items(
        self,
        items: Any,
        prefix: tuple[Any, ...],
        places: list[Place],
        objects: list[Any],
        kinds: tuple[type, type],
        depth: int,
    ) -> None:
        nnx_type = self._types.get
        for key, value in items:
            kind = cast("type[Any]", type(value))
            found = nnx_type(kind)
            if found is None:
                found = self._learn(kind, kinds)
            if found == _OBJECT:
                places.append((*prefix, key))
                objects.append(value)
            elif found:
                self._scan(value, (*prefix, key), places, objects, kinds, depth + 1)

    def _bind(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any], _Entry | None]:
        kinds = self._kinds
        if kinds is None:
            kinds = self._kinds = nnx_kinds()
            if kinds is None:
                return args, kwargs, None
        nnx_type = self._types.get
        places: list[Place] = []
        objects: list[Any] = []
        for index, value in enumerate(args):
            kind = cast("type[Any]", type(value))
            found = nnx_type(kind)
            if found is None:
                found = self._learn(kind, kinds)
            if found == _OBJECT:
                places.append(index)
                objects.append(value)
            elif found:
                self._scan(value, (index,), places, objects, kinds, 0)
        if kwargs:
            for name, value in kwargs.items():
                kind = cast("type[Any]", type(value))
                found = nnx_type(kind)
                if found is None:
                    found = self._learn(kind, kinds)
                if found == _OBJECT:
                    places.append(name)
                    objects.append(value)
                elif found:
                    self._scan(value, (name,), places, objects, kinds, 0)
        if not places:
            return args, kwargs, None
        key = (*places, *map(id, objects))
        entry = self._entries.get(key)
        if entry is None or not entry.current():
            entry = self._entry(key, places, objects, kinds)
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
            slot = Slot(layout, index, own)  # each object its own values: its shardings
            if type(place) is int:
                bound[place] = slot  # pyright: ignore[reportArgumentType, reportCallIssue]
            else:
                put_at(bound, kwargs, place, slot)
        return tuple(bound), kwargs, entry

    def _entry(
        self,
        key: tuple[Any, ...],
        places: list[Place],
        objects: list[Any],
        kinds: tuple[type, type],
    ) -> _Entry:
        """The caller's objects flattened, remembered under ``key``; a cycle among them
        is refused before JAX's flatten would recurse without end."""
        try:
            entry = _Entry(tuple(places), objects, kinds)
        except _Revisit:
            named = [
                (self._place_name(place), value)
                for place, value in zip(places, objects, strict=True)
            ]
            cycle = find_cycle(named)
            if cycle is not None:
                raise ValueError(cycle_message(self._function, cycle)) from None
            entry = _Entry(tuple(places), objects, kinds, shared=True)
        try:
            forget = _forgetter(weakref.ref(self), key)
            entry.refs = tuple(weakref.ref(value, forget) for value in objects)
        except TypeError:  # an nnx.Variable passed on its own takes no weak reference
            entry.refs = None
        with self._lock:
            entries = self._entries
            strong = self._strong  # kept only while it is the last set: dropped now
            if strong is not None and strong != key:
                found = entries.get(strong)
                if found is not None and found.refs is None:
                    del entries[strong]
            if len(entries) >= _MAX_ENTRIES:
                entries.clear()
            entries[key] = entry
            self._strong = key if entry.refs is None else None
        return entry

    def _place_name(self, place: Place) -> str:
        """``place`` as the user writes it: ``model``, ``objects[1]``, ``batch['model']``."""
        path = place if type(place) is tuple else (place,)
        top, keys = path[0], path[1:]
        name = top if type(top) is str else f"args[{top}]"
        try:
            signature = self._signature.get() if self._signature is not None else None
        except Exception:
            signature = None
        if type(top) is int and signature is not None:
            positional = [
                parameter.name
                for parameter in signature.parameters.values()
                if parameter.kind
                in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            ]
            if top < len(positional):
                name = positional[top]
        return name + "".join(f"[{key!r}]" for key in keys)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args, kwargs, entry = self._bind(args, kwargs)
        out, updates = self._jitted(*args, **kwargs)
        if entry is not None and updates.indices:
            variables = entry.variables
            for index, value in zip(updates.indices, updates.values, strict=True):
                _set(variables[index], "_raw_value", value)
        if updates.returned:
            out = _restore(out, entry, (args, kwargs))
        return out

    def call_stage(self, stage: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Calls a compiled stage (`Staged`) as the object is called: with the nnx
        objects, writing back."""
        args, kwargs, entry = self._bind(args, kwargs)
        out, updates = stage(*args, **kwargs)
        if entry is not None:
            for index, value in zip(updates.indices, updates.values, strict=True):
                _set(entry.variables[index], "_raw_value", value)
        if updates.returned:
            out = _restore(out, entry, (args, kwargs))
        return out

    def bound(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``method(jitted, *args, **kwargs)`` with the call's nnx objects replaced as
        the `jax.jit` object ``jitted`` (this object's) gets them."""
        args, kwargs, _ = self._bind(args, kwargs)
        return method(self._jitted, *args, **kwargs)

    def lower(self, *args: Any, **kwargs: Any) -> Staged:
        args, kwargs, _ = self._bind(args, kwargs)
        return Staged(self._jitted.lower(*args, **kwargs), self)

    def trace(self, *args: Any, **kwargs: Any) -> Staged:
        args, kwargs, _ = self._bind(args, kwargs)
        return Staged(self._jitted.trace(*args, **kwargs), self)

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        args, kwargs, entry = self._bind(args, kwargs)
        out, updates = self._jitted.eval_shape(*args, **kwargs)
        if updates.returned:
            out = _restore(out, entry, (args, kwargs), shapes=True)
        return out

    def clear_cache(self) -> None:
        self._jitted.clear_cache()


class Staged:
    """``trace``, ``lower`` and ``lower(...).compile()`` (and ``precompile``) of an
    object with ``propagate_updates=True``: JAX's stage, in the caller's terms.

    The compiled stage is called as the object is (``compiled(model, optimizer,
    x)``): the nnx objects are passed, their updates written back, and the caller's
    objects the function returns given back, as ``nnx.jit``'s ``Compiled`` does.
    ``out_info``, ``out_tree`` and ``output_shardings`` describe the function's
    output. Every other attribute is JAX's stage's own, for the call as it reaches
    `jax.jit`: each nnx object as the flat values of its Variables, and the output
    followed by the updates.
    """

    __slots__ = ("_owner", "_stage")

    def __init__(self, stage: Any, owner: Propagating) -> None:
        self._stage = stage
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        if name in Staged.__slots__:  # not set yet (a copy being built)
            raise AttributeError(name)
        return getattr(self._stage, name)

    def lower(self, *args: Any, **kwargs: Any) -> Staged:
        """See `jax.stages.Traced.lower`."""
        return Staged(self._stage.lower(*args, **kwargs), self._owner)

    def compile(self, *args: Any, **kwargs: Any) -> Staged:
        """See `jax.stages.Lowered.compile`."""
        return Staged(self._stage.compile(*args, **kwargs), self._owner)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not callable(self._stage):
            raise TypeError(f"{type(self._stage).__name__} is not callable: compile() it first.")
        return self._owner.call_stage(self._stage, args, kwargs)

    @property
    def out_info(self) -> Any:
        """The function's output, as JAX's ``out_info`` (without the updates)."""
        return self._stage.out_info[0]

    @property
    def out_tree(self) -> Any:
        """The tree structure of the function's output (without the updates)."""
        return self._stage.out_tree.children()[0]

    @property
    def output_shardings(self) -> Any:
        """The shardings of the function's output (without the updates)."""
        return self._stage.output_shardings[0]

    def __repr__(self) -> str:
        return f"{self._stage!r} (propagate_updates=True: called with the nnx objects)"


def jax_stage(stage: Any) -> Any:
    """JAX's own stage: the one a `Staged` holds, else ``stage`` itself."""
    return stage._stage if isinstance(stage, Staged) else stage  # pyright: ignore[reportPrivateUsage]
