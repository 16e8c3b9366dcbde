"""The function JAX traces, under each mode of ``propagate_updates``: `watched` (the
body, watched for lost updates or returning its updates) and `rebinding` (the nnx
objects rebuilt from a call's flat values), and what a trace returns to the call
(`Updates`, `Returned` and `NewRef` markers)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, cast

import jax

from tinax._src import private
from tinax._src.core import validation
from tinax._src.core.statics import NO_STATICS
from tinax._src.diagnosis import record
from tinax._src.models.nnx.classes import nnx_kinds
from tinax._src.models.nnx.layout import MAX_DEPTH, Slot, first_slot, get_at, put_at
from tinax._src.models.nnx.messages import heading, lost_message, structure_message
from tinax._src.models.nnx.watch import Watched, output_ids, variable_state


class Frame:
    """The trace in progress under ``propagate_updates=True``: each rebuilt Variable's
    id -> its index in the caller's flat list of Variables, and each rebuilt nnx
    object's id -> its index in the caller's objects, in the order `_Entry` visits
    them (a returned one is given back as the caller's own)."""

    __slots__ = ("nodes", "variables")

    def __init__(self, variables: dict[int, int], nodes: dict[int, int]) -> None:
        self.variables = variables
        self.nodes = nodes


class _Frames(threading.local):
    """Per thread, the frames of the traces in progress under ``propagate_updates=True``
    (a stack: a traced function may call another wrapped one)."""

    def __init__(self) -> None:
        self.stack: list[Frame | None] = []


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
    the outputs, or an argument's structure changed and it is not returned.
    ``True``: returns ``(out, Updates)``, the new value of each assigned
    Variable (of every Variable with ``write_all``: donated buffers must be
    replaced), for `Propagating` to write back; each of the caller's objects
    among the outputs is a `Returned` marker, given back as the caller's own;
    a change of structure raises. ``batched``: the function runs per example
    under `jax.vmap`, where a new value cannot be written back into one object:
    ``True`` then acts as ``None``. ``reported`` is the user's function, named
    in the errors.
    """
    if mode is False:
        return function
    propagate = mode is True and not batched

    def run(*args: Any, **kwargs: Any) -> Any:
        kinds = nnx_kinds()
        if not (propagate or batched) and eager():
            kinds = None  # jax.disable_jit: the caller's own objects, assigned for real
        seen: Watched | None = None
        if kinds is not None:
            try:
                named = record.named_arguments(signature.get(), NO_STATICS, args, kwargs)
                seen = Watched(kinds, [(name, value) for name, _, value, *_ in named])
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
                changed = [i for i, v in enumerate(seen.variables) if id(v) in frame.variables]
            updates = _updates(reported, seen, changed, restructured, frame, out)
            if frame is not None and (frame.nodes or frame.variables):
                out, returned = _mark_returned(out, frame, kinds)
                if returned:
                    updates = Updates(updates.indices, updates.values, returned=True)
            return out, updates
        returned = output_ids(out)
        lost = [
            seen.path(index)
            for index in changed
            if not all(id(leaf) in returned for leaf in variable_state(seen.variables[index])[1])
        ]
        values = {name: value for name, value, *_ in seen.structures}
        structure_lost = [
            line for argument, line in restructured if not _returned_object(values[argument], out)
        ]
        if lost or structure_lost:
            raise ValueError(lost_message(heading(reported), lost, structure_lost, batched=batched))
        return out

    try:
        cast("Any", run).__wrapped__ = function
    except Exception:
        pass
    return run


def eager() -> bool:
    """Whether a call runs the function on the caller's own objects: `jax.disable_jit`,
    outside any trace (``.lower`` still traces there)."""
    return private.jit_disabled() and not private.tracing_to_jaxpr()


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


def _mark_returned(out: Any, frame: Frame, kinds: tuple[type, type]) -> tuple[Any, bool]:
    """``out`` with each of the trace's rebuilt objects (an argument's Module, one of
    its submodules, a Variable) replaced by a `Returned` marker, and whether there
    was one: after the call, the caller's own object takes its place, as under
    ``nnx.jit`` (a copy would part from the caller's object, which is written back)."""
    pytree_type, variable_type = kinds
    variables, nodes = frame.variables, frame.nodes

    def ours(value: object) -> bool:
        if id(value) in variables:
            return isinstance(value, variable_type)
        return id(value) in nodes and isinstance(value, pytree_type)

    tree_util: Any = jax.tree_util
    if not any(ours(leaf) for leaf in tree_util.tree_leaves(out, is_leaf=ours)):
        return out, False

    def marker(value: object) -> object:
        if not ours(value):
            return value
        if id(value) in variables:
            return Returned(0, variables[id(value)])
        return Returned(1, nodes[id(value)])

    return tree_util.tree_map(marker, out, is_leaf=ours), True


def _updates(
    reported: Callable[..., Any],
    seen: Watched,
    changed: list[int],
    restructured: list[tuple[str, str]],
    frame: Frame | None,
    out: object,
) -> Updates:
    """The assigned values by index in the caller's flat list, for the write-back."""
    if restructured:
        lines = [line for _, line in restructured]
        raise ValueError(structure_message(heading(reported), lines))
    indices: list[int] = []
    values: list[Any] = []
    unreachable: list[int] = []
    for index in changed:
        variable = seen.variables[index]
        slot = None if frame is None else frame.variables.get(id(variable))
        if slot is None:
            unreachable.append(index)
            continue
        metadata, _ = variable_state(variable)
        if metadata != seen.before[index][0]:
            line = f"{seen.path(index)}: its metadata changed"
            raise ValueError(structure_message(heading(reported), [line]))
        indices.append(slot)
        values.append(object.__getattribute__(variable, "_raw_value"))
    if unreachable:
        returned = output_ids(out)
        lost = [
            seen.path(index)
            for index in unreachable
            if not all(id(leaf) in returned for leaf in variable_state(seen.variables[index])[1])
        ]
        if lost:
            raise ValueError(
                lost_message(heading(reported), lost, [])
                + "\nWith propagate_updates=True, pass each nnx object as an argument, or "
                f"inside tuple, list and dict arguments (nested up to {MAX_DEPTH} levels): only "
                "those are written back (not one inside another pytree node)."
            )
    return Updates(tuple(indices), tuple(values))


class Updates:
    """The new raw values of the Variables a trace assigned, by index in the caller's
    flat list of Variables, and whether the output holds `Returned` markers (a
    pytree: the indices and the flag are static)."""

    __slots__ = ("indices", "returned", "values")

    def __init__(
        self, indices: tuple[int, ...], values: tuple[Any, ...], *, returned: bool = False
    ) -> None:
        self.indices = indices
        self.values = values
        self.returned = returned


def _flatten_updates(updates: Updates) -> tuple[tuple[Any, ...], tuple[tuple[int, ...], bool]]:
    return updates.values, (updates.indices, updates.returned)


def _unflatten_updates(aux: tuple[tuple[int, ...], bool], values: Any) -> Updates:
    return Updates(aux[0], tuple(values), returned=aux[1])


_tree_util: Any = jax.tree_util
_tree_util.register_pytree_node(Updates, _flatten_updates, _unflatten_updates)


class Returned:
    """Stands in the output for one of the caller's objects (``kind`` 0: a Variable,
    by its index in the caller's flat list; 1: an nnx object, by its index in the
    caller's objects as `_Entry` visits them; 2: a `jax.Ref`, by its index among the
    leaves of the call's arguments). A pytree without leaves: the trace returns no
    copy of it (JAX refuses to return a Ref)."""

    __slots__ = ("index", "kind")

    def __init__(self, kind: int, index: int) -> None:
        self.kind = kind
        self.index = index

    def __repr__(self) -> str:
        what = ("Variable", "object", "Ref")[self.kind]
        return f"<the caller's {what} #{self.index}>"


def _flatten_returned(marker: Returned) -> tuple[tuple[()], tuple[int, int]]:
    return (), (marker.kind, marker.index)


def _unflatten_returned(aux: tuple[int, int], _: Any) -> Returned:
    return Returned(*aux)


_tree_util.register_pytree_node(Returned, _flatten_returned, _unflatten_returned)


def rebinding(counted: Callable[..., Any]) -> Callable[..., Any]:
    """The function JAX traces under ``propagate_updates=True``: rebuilds the nnx
    objects from the flat values of a call (a Variable reached twice is one
    object again) and runs ``counted`` on them, telling `watched` which rebuilt
    Variable and object is which of the caller's."""

    def rebound(*args: Any, **kwargs: Any) -> Any:
        first = first_slot((*args, *kwargs.values()), -1)  # arguments at depth 0, as _scan
        if first is None:
            _frames.stack.append(None)
            try:
                return _returned_refs(counted(*args, **kwargs), (args, kwargs))
            finally:
                _frames.stack.pop()
        layout = first.layout
        slots = [cast("Slot", get_at(args, kwargs, place)) for place in layout.places]
        variable_values: list[Any] = []
        plain: list[Any] = []
        for slot in slots:
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
            put_at(bound, kwargs, place, value)
        frame = Frame(
            {id(variable): index for index, variable in enumerate(fresh)},
            {id(node): index for index, node in enumerate(_pytrees(objects))},
        )
        _frames.stack.append(frame)
        try:
            return _returned_refs(counted(*bound, **kwargs), (args, kwargs))
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


def _returned_refs(result: Any, call: tuple[Any, ...]) -> Any:
    """``(out, updates)`` of a trace, with each `jax.Ref` that ``out`` returns (which
    JAX refuses) replaced, as ``nnx.jit`` returns them: a Ref of the call's arguments
    (``call``, as `jax.jit` passed them) by a `Returned` marker, for the caller's own
    Ref; a Ref made inside the trace by a `NewRef` holding its value, for a new Ref
    made after the call (one per Ref, however often it is returned)."""
    ref_type: Any = getattr(jax, "Ref", None)
    out, updates = result
    if ref_type is None:
        return result

    def is_ref(value: object) -> bool:
        return isinstance(value, ref_type)

    if not any(map(is_ref, _tree_util.tree_leaves(out))):
        return result
    index = {id(leaf): at for at, leaf in enumerate(_tree_util.tree_leaves(call)) if is_ref(leaf)}
    made: dict[int, int] = {}

    def marker(value: object) -> object:
        if not is_ref(value):
            return value
        at = index.get(id(value))
        if at is not None:
            return Returned(2, at)
        number = made.setdefault(id(value), len(made))
        return NewRef(number, cast("Any", value)[...])

    out = _tree_util.tree_map(marker, out)
    return out, Updates(updates.indices, updates.values, returned=True)


class NewRef:
    """Stands in the output for a `jax.Ref` the trace made and returns: its value (a
    leaf), and its number among the Refs made (the same Ref returned twice is one)."""

    __slots__ = ("number", "value")

    def __init__(self, number: int, value: Any) -> None:
        self.number = number
        self.value = value

    def __repr__(self) -> str:
        return f"<a new Ref #{self.number}: {self.value!r}>"


def _flatten_new_ref(marker: NewRef) -> tuple[tuple[Any], int]:
    return (marker.value,), marker.number


def _unflatten_new_ref(number: int, values: Any) -> NewRef:
    return NewRef(number, next(iter(values)))


_tree_util.register_pytree_node(NewRef, _flatten_new_ref, _unflatten_new_ref)


def _pytrees(objects: Any) -> list[Any]:
    """The nnx objects of the rebuilt ``objects``, in the order `_Entry` visits the
    caller's."""
    kinds = nnx_kinds()
    if kinds is None:
        return []
    pytree_type, variable_type = kinds
    found: list[Any] = []

    def visit(node: object) -> bool:
        if isinstance(node, variable_type):
            return True
        if isinstance(node, pytree_type):
            found.append(node)
        return False

    tree_util: Any = jax.tree_util
    tree_util.tree_structure(tuple(objects), is_leaf=visit)
    return found
