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
  every call, as ``nnx.jit`` does. The caller's objects (arguments, or inside
  tuple, list and dict arguments) are flattened once (``nnx.jit_partial``'s
  idea) and kept while their structure is unchanged, a check by identity of
  each node's attributes; a call passes, in each object's place, its
  Variables' raw values as a flat list, writes back only the values the trace
  assigned, and gives back each of the caller's objects the function returns
  as itself. A change of structure inside the trace (a Variable replaced,
  submodules swapped) raises, naming each attribute; a cycle among the objects
  is refused before any flatten (JAX's would recurse to Python's limit).
- ``False``: `jax.jit`'s behaviour (dropped).

flax is never imported here: its classes are read from ``sys.modules`` when a
trace or call needs them (no nnx object can exist before flax is imported).
"""

from __future__ import annotations

import functools
import inspect
import operator
import sys
import threading
import types
from collections.abc import Callable
from typing import Any, cast

import jax
import numpy as np

from tinax._src import private
from tinax._src.core import arrays, validation
from tinax._src.core.statics import NO_STATICS, UNSPECIFIED
from tinax._src.diagnosis import record, report

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


def check_not_bound(api: str, function: object) -> None:
    """Refuses a bound method of an nnx object (``model.__call__``, also inside a
    ``functools.partial``), as ``nnx.jit`` does: it closes over the object, whose
    Variables the first trace would read as constants (a later update ignored) and
    could not assign. Read only while flax.nnx is imported."""
    target = function
    while type(target) is functools.partial:
        target = cast(Any, target).func
    if type(target) is not types.MethodType:
        return
    kinds = _nnx_kinds()
    owner = target.__self__
    if kinds is None or not isinstance(owner, kinds):
        return
    method = f"{type(owner).__name__}.{target.__func__.__name__}"
    factory = "batched_jit" if api == "BatchedJit" else "bounded_jit"
    raise ValueError(
        validation.message(
            api,
            "function",
            f"a function, not a bound method of a flax.nnx object ({method})",
            function,
        )
        + "\nA bound method closes over its object: the first trace would read its Variables as "
        "constants (a later update ignored) and could not assign them; nnx.jit refuses it too."
        + f"\nFix: pass the object as an argument: step = {factory}({method}, ...), called as "
        f"step(model, x),\n  or a function (lambda model, x: model(x)), or decorate the method in "
        f"the class body."
    )


def output_shardings(out_shardings: object) -> tuple[object, object]:
    """``out_shardings`` of the function as given to the `jax.jit` of the call under
    ``propagate_updates=True``, which returns ``(output, updates)``: the user's for
    the output, unspecified for the updates (placed as XLA chooses, as without)."""
    return (out_shardings, UNSPECIFIED)


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
    once, under the first); the tree structure of each argument with the
    Variables as leaves; and a snapshot of every mutable node (each nnx
    object's attributes, each list and dict), to tell by identity that nothing
    was added, removed or replaced (a Variable replaced by a new one, two
    submodules swapped) while the trace ran.
    """

    __slots__ = ("before", "keys", "nodes", "structures", "variables")

    def __init__(self, kinds: tuple[type, type], named: list[tuple[str, Any]]) -> None:
        tree_util: Any = jax.tree_util
        pytree_type, variable_type = kinds
        nodes: list[tuple[Any, Any, Any]] = []

        def visit(value: object) -> bool:
            if isinstance(value, variable_type):
                return True
            _snapshot(value, pytree_type, nodes)
            return False

        self.variables: list[Any] = []
        self.keys: list[tuple[str, tuple[Any, ...]]] = []  # made text only when reported
        self.before: list[tuple[Any, list[Any]]] = []
        self.structures: list[tuple[str, Any, Any, int, int]] = []
        self.nodes = nodes
        seen: set[int] = set()
        for name, value in named:
            if not holds_nnx(value, kinds):  # a plain argument: nothing of nnx to watch
                continue
            first = len(nodes)
            flat, treedef = tree_util.tree_flatten_with_path(value, is_leaf=visit)
            self.structures.append((name, value, treedef, first, len(nodes)))
            for path, leaf in flat:
                if not isinstance(leaf, variable_type) or id(leaf) in seen:
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

    def restructured(self, variable_type: type) -> list[tuple[str, str]]:
        """``(argument, line)`` for each change of structure since: an attribute (or
        list item, dict entry) added, removed or replaced by another object, named by
        its path (``model.counter: replaced by another object``), or an argument whose
        tree structure changed otherwise (a static field of a custom pytree)."""
        tree_util: Any = jax.tree_util

        def is_variable(value: object) -> bool:
            return isinstance(value, variable_type)

        changes: list[tuple[str, str]] = []
        for name, value, treedef, first, last in self.structures:
            edits = [
                (owner, key, what)
                for owner, now, then in self.nodes[first:last]
                for key, what in _edits(now, then)
            ]
            if edits:
                where = _node_paths(value, {id(owner) for owner, _, _ in edits}, variable_type)
                lines = [
                    f"{name}{where[id(owner)]}{_attribute_text(owner, key)}: {what}"
                    for owner, key, what in edits
                    if id(owner) in where  # else detached: the change above it is named
                ]
                changes.extend((name, line) for line in dict.fromkeys(lines))
                continue
            try:
                now = tree_util.tree_structure(value, is_leaf=is_variable)
                same = bool(now == treedef)
            except Exception:
                same = False
            if not same:
                changes.append((name, f"{name}: its tree structure changed (a static field)"))
        return changes


def _snapshot(value: object, pytree_type: type, nodes: list[tuple[Any, Any, Any]]) -> None:
    """Appends ``(node, its mutable contents, a copy of them)`` for an nnx object (its
    attributes), a list or a dict; nothing for other nodes (immutable, or not ours)."""
    node: Any = value
    if isinstance(value, pytree_type):
        attributes: dict[str, Any] = vars(value)
        nodes.append((node, attributes, dict(attributes)))
    elif type(value) is list:
        items = cast(list[Any], value)
        nodes.append((node, items, list(items)))
    elif type(value) is dict:
        mapping = cast(dict[Any, Any], value)
        nodes.append((node, mapping, dict(mapping)))


_INTERNAL = "_pytree__"  # nnx's own bookkeeping attributes (its trace state is replaced)
# An array attribute (an nnx.Pytree's nnx.data array) given a new array: only Variables are
# written back, so it is a change of structure to the write-back.
ARRAY_ASSIGNED = "a new array assigned, not held in a Variable"


def _replaced(old: object, new: object) -> str:
    """What replacing ``old`` by ``new`` is called in a change's line."""
    if isinstance(old, jax.Array | np.ndarray) and isinstance(new, jax.Array | np.ndarray):
        return ARRAY_ASSIGNED
    return "replaced by another object"


def _edits(now: Any, then: Any) -> list[tuple[Any, str]]:
    """What changed in a node's contents since ``then``, by identity: ``(key, what)``."""
    edits: list[tuple[Any, str]] = []
    if type(now) is list:
        items, old = cast(list[Any], now), cast(list[Any], then)
        for index in range(max(len(items), len(old))):
            if index >= len(items):
                edits.append((index, "removed"))
            elif index >= len(old):
                edits.append((index, "added"))
            elif items[index] is not old[index]:
                edits.append((index, "replaced by another object"))
        return edits
    mapping, old_mapping = cast(dict[Any, Any], now), cast(dict[Any, Any], then)
    for key, value in old_mapping.items():
        if type(key) is str and key.startswith(_INTERNAL):
            continue
        if key not in mapping:
            edits.append((key, "removed"))
        elif mapping[key] is not value:
            edits.append((key, _replaced(value, mapping[key])))
    edits.extend(
        (key, "added")
        for key in mapping
        if key not in old_mapping and not (type(key) is str and key.startswith(_INTERNAL))
    )
    return edits


def _attribute_text(owner: object, key: Any) -> str:
    """How the user writes ``key`` of ``owner``: ``.counter``, ``[0]``, ``['a']``."""
    if type(owner) is list:
        return f"[{key}]"
    if type(owner) is dict:
        return f"[{key!r}]"
    if type(key) is str and key.isdigit():  # an nnx.List's items are attributes "0", "1"
        return f"[{key}]"
    return f".{key}"


# --- walking a tree without JAX's recursion ------------------------------------------------


def _children(node: object) -> list[tuple[Any, Any]] | None:
    """The children of a pytree node with their keys, one level down (JAX flattens
    only the node itself), or ``None`` for a leaf."""
    if arrays.array_type(type(node)) or node is None or type(node) in _SCALARS:
        return None
    tree_util: Any = jax.tree_util
    first = [node]

    def is_leaf(value: object) -> bool:
        if first:
            first.pop()
            return False
        return True

    try:
        flat: list[tuple[tuple[Any, ...], Any]] = tree_util.tree_flatten_with_path(
            node, is_leaf=is_leaf
        )[0]
    except Exception:  # a node whose flatten raises: JAX will say so
        return None
    if len(flat) == 1 and not flat[0][0] and flat[0][1] is node:
        return None
    return [(path[0], child) for path, child in flat]


_SCALARS = frozenset({int, float, complex, bool, str, bytes})


def _node_paths(value: object, targets: set[int], stop: type) -> dict[int, str]:
    """The path (text) of each node of ``value`` whose id is in ``targets``, the first
    one found; a ``stop`` instance (a Variable) is not entered. Error paths only."""
    found: dict[int, str] = {}
    if id(value) in targets:
        found[id(value)] = ""
    stack: list[tuple[str, object]] = [("", value)]
    entered: set[int] = set()
    while stack:
        path, node = stack.pop()
        if id(node) in entered or isinstance(node, stop):
            continue
        entered.add(id(node))
        children = _children(node)
        for key, child in reversed(children or []):
            child_path = path + _key_text(key)
            if id(child) in targets and id(child) not in found:
                found[id(child)] = child_path
            stack.append((child_path, child))
    return found


def find_cycle(named: list[tuple[str, Any]]) -> tuple[str, str, str] | None:
    """``(argument, path, path of the node it refers back to)`` for the first cycle in the
    arguments (``model.me`` that is ``model``), walked one level at a time: JAX's own
    flatten of a cycle recurses until Python's limit, and leaves the interpreter's
    recursion depth used up after it. ``None`` if there is none."""
    for name, value in named:
        found = _cycle(name, value)
        if found is not None:
            return (name, *found)
    return None


def _cycle(name: str, value: object) -> tuple[str, str] | None:
    children = _children(value)
    if children is None:
        return None
    done: set[int] = set()  # fully walked, no cycle below: not walked again (a shared node)
    ancestors: dict[int, str] = {id(value): name}
    stack: list[tuple[object, str, Any]] = [(value, name, iter(children))]
    while stack:
        node, path, pending = stack[-1]
        for key, child in pending:
            child_path = path + _key_text(key)
            if id(child) in ancestors:
                return child_path, ancestors[id(child)]
            if id(child) in done:
                continue
            grandchildren = _children(child)
            if grandchildren:
                ancestors[id(child)] = child_path
                stack.append((child, child_path, iter(grandchildren)))
                break
        else:
            stack.pop()
            del ancestors[id(node)]
            done.add(id(node))
    return None


def refuse_cycles(function: Callable[..., Any], named: list[tuple[str, Any]]) -> None:
    """Raises `ValueError` if an argument holds a cycle (`find_cycle`), before any
    flatten of tinax's or JAX's would recurse into it."""
    cycle = find_cycle(named)
    if cycle is not None:
        raise ValueError(cycle_message(function, cycle))


def cycle_message(function: Callable[..., Any], cycle: tuple[str, str, str]) -> str:
    """The error for arguments that hold a cycle (``find_cycle``)."""
    name, path, target = cycle
    return (
        f"{_heading(function)}: the argument {name} holds a cycle: {path} is {target}, which "
        f"holds it.\nJAX flattens arguments as trees, and the flatten of a cycle does not end "
        f"(it would use up Python's recursion limit): this call is refused before it.\n"
        f"Fix: keep the back reference out of the object's attributes (pass it as an argument "
        f"of its own),\n  or split the objects with nnx.split and pass the GraphDef as a static "
        f"argument and the State\n  (nnx.jit in graph mode takes a cycle; jax.jit and "
        f"nnx.jit(graph=False) do not)."
    )


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
    if paths:
        what = "assigns flax.nnx Variables of its arguments and does not return their new values"
    else:
        what = "changes the structure of flax.nnx objects of its arguments and does not return them"
    lines = [
        f"{function_name}: this trace {what}; jax.jit would drop them silently, after every call:"
    ]
    lines.extend(f"  {path}" for path in paths)
    lines.extend(f"  {line} (a change of structure)" for line in restructured)
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
        if paths:
            lines.append(
                "  or wrap with propagate_updates=True: the new values are written back into the "
                "caller's objects after every call, as nnx.jit does"
                + (
                    " (the values of Variables: a change of structure is refused there)."
                    if restructured
                    else "."
                )
            )
        else:
            lines.append(
                "  or make the change outside the function (propagate_updates=True writes back "
                "the values of Variables, and refuses a change of structure)."
            )
    lines.append("  (propagate_updates=False drops them, as jax.jit does.)")
    return "\n".join(lines)


def _structure_message(function_name: str, restructured: list[str]) -> str:
    lines = [
        f"{function_name}: this trace changed the structure of flax.nnx objects of its arguments:"
    ]
    lines.extend(f"  {line}" for line in restructured)
    lines.append(
        "propagate_updates=True writes back the values of the Variables the objects held when "
        "the call began, not a change of structure (nnx.jit's graph mode applies it)."
    )
    lines.append(
        "Fix: make the change outside the function (the next call flattens the objects again; "
        "the same structure reuses the trace),"
    )
    arrays_assigned = [line for line in restructured if line.endswith(": " + ARRAY_ASSIGNED)]
    if arrays_assigned:
        path = arrays_assigned[0].rpartition(": ")[0]
        attribute = path.rpartition(".")[2]
        lines.append(
            f"  or hold the array in a Variable (self.{attribute} = nnx.Variable(...) where the "
            f"object is built, then {path}[...] = value in the step): only the values of "
            "Variables are written back."
        )
    if len(arrays_assigned) < len(restructured):
        lines.append(
            "  or assign the Variable's value in place (model.counter[...] = value) rather than a "
            "new Variable."
        )
    return "\n".join(lines)


# --- the trace-time wrappers --------------------------------------------------------------


class _Frame:
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
        self.stack: list[_Frame | None] = []


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
    among the outputs is a `_Returned` marker, given back as the caller's own;
    a change of structure raises. ``batched``: the function runs per example
    under `jax.vmap`, where a new value cannot be written back into one object:
    ``True`` then acts as ``None``. ``reported`` is the user's function, named
    in the errors.
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
                changed = [i for i, v in enumerate(seen.variables) if id(v) in frame.variables]
            updates = _updates(reported, seen, changed, restructured, frame, out)
            if frame is not None and (frame.nodes or frame.variables):
                out, returned = _mark_returned(out, frame, kinds)
                if returned:
                    updates = Updates(updates.indices, updates.values, returned=True)
            return out, updates
        returned = _output_ids(out)
        lost = [
            seen.path(index)
            for index in changed
            if not all(id(leaf) in returned for leaf in _state(seen.variables[index])[1])
        ]
        values = {name: value for name, value, *_ in seen.structures}
        structure_lost = [
            line for argument, line in restructured if not _returned_object(values[argument], out)
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


def _mark_returned(out: Any, frame: _Frame, kinds: tuple[type, type]) -> tuple[Any, bool]:
    """``out`` with each of the trace's rebuilt objects (an argument's Module, one of
    its submodules, a Variable) replaced by a `_Returned` marker, and whether there
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
            return _Returned(0, variables[id(value)])
        return _Returned(1, nodes[id(value)])

    return tree_util.tree_map(marker, out, is_leaf=ours), True


def _updates(
    reported: Callable[..., Any],
    seen: _Watched,
    changed: list[int],
    restructured: list[tuple[str, str]],
    frame: _Frame | None,
    out: object,
) -> Updates:
    """The assigned values by index in the caller's flat list, for the write-back."""
    if restructured:
        lines = [line for _, line in restructured]
        raise ValueError(_structure_message(_heading(reported), lines))
    indices: list[int] = []
    values: list[Any] = []
    unreachable: list[int] = []
    for index in changed:
        variable = seen.variables[index]
        slot = None if frame is None else frame.variables.get(id(variable))
        if slot is None:
            unreachable.append(index)
            continue
        metadata, _ = _state(variable)
        if metadata != seen.before[index][0]:
            line = f"{seen.path(index)}: its metadata changed"
            raise ValueError(_structure_message(_heading(reported), [line]))
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
                + "\nWith propagate_updates=True, pass each nnx object as an argument, or "
                f"inside tuple, list and dict arguments (nested up to {_MAX_DEPTH} levels): only "
                "those are written back (not one inside another pytree node)."
            )
    return Updates(tuple(indices), tuple(values))


class Updates:
    """The new raw values of the Variables a trace assigned, by index in the caller's
    flat list of Variables, and whether the output holds `_Returned` markers (a
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


class _Returned:
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


def _flatten_returned(marker: _Returned) -> tuple[tuple[()], tuple[int, int]]:
    return (), (marker.kind, marker.index)


def _unflatten_returned(aux: tuple[int, int], _: Any) -> _Returned:
    return _Returned(*aux)


_tree_util.register_pytree_node(_Returned, _flatten_returned, _unflatten_returned)


# --- propagate_updates=True: the call -----------------------------------------------------

_MAX_ENTRIES = 8  # sets of objects remembered per wrapped function (train and eval, ...)
_MAX_DEPTH = 32  # tuples, lists and dicts looked into for nnx objects, nested

Place = int | str | tuple[Any, ...]
"""Where an nnx object is in a call: an argument's index or keyword, or a path
``(index or keyword, key, ...)`` into tuples, lists and dicts."""

_PLAIN, _OBJECT, _CONTAINER = 0, 1, 2  # what an argument of a type is (`Propagating._learn`)


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


class _Revisit(Exception):
    """An nnx object, list or dict reached a second time while `_Entry` flattens: shared
    by two parents, or a cycle (told apart by `find_cycle`)."""


class _Entry:
    """The caller's objects of one call, flattened once: their distinct Variables in
    order, their other leaves, the layout, their nnx objects in the order visited
    (a returned one is given back by index), and a snapshot of every mutable node
    (each nnx object's attributes, each list and dict, each Variable's metadata)
    to tell, by identity, that nothing in their structure changed since.

    Unless ``shared``, a node reached twice raises `_Revisit` at once: JAX's flatten
    of a cycle would recurse to Python's limit and leave the interpreter's
    recursion depth used up; shared nodes (a tied layer) are flattened again with
    ``shared=True`` once `find_cycle` has found no cycle.
    """

    __slots__ = ("bounds", "layout", "nodes", "objects", "plain", "pytrees", "variables")

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
                items = cast(list[Any], node)
                nodes.append((items, list(items)))
            elif type(node) is dict:
                mapping = cast(dict[Any, Any], node)
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
        self.objects = objects  # held: their ids key the cache
        self.nodes = nodes
        self.pytrees = pytrees
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


def _put(root: Any, keys: tuple[Any, ...], value: object) -> Any:
    """``root`` with the item at ``keys`` (through tuples, lists and dicts) replaced by
    ``value``: the containers on the way are copies, the rest is shared."""
    if not keys:
        return value
    key = keys[0]
    child = _put(root[key], keys[1:], value)
    if type(root) is tuple:
        items = cast(tuple[Any, ...], root)
        return (*items[:key], child, *items[key + 1 :])
    copy: Any = list(cast(list[Any], root)) if type(root) is list else dict(root)
    copy[key] = child
    return copy


def _put_at(bound: list[Any], kwargs: dict[str, Any], place: Place, value: object) -> None:
    """Puts ``value`` at ``place`` of a call (``bound``, ``kwargs``, changed in place)."""
    if type(place) is int:
        bound[place] = value
    elif type(place) is str:
        kwargs[place] = value
    else:
        path = cast(tuple[Any, ...], place)
        top, keys = path[0], path[1:]
        if type(top) is int:
            bound[top] = _put(bound[top], keys, value)
        else:
            kwargs[top] = _put(kwargs[top], keys, value)


def _get_at(args: tuple[Any, ...], kwargs: dict[str, Any], place: Place) -> Any:
    """The value at ``place`` of a call."""
    if type(place) is int:
        return args[place]
    if type(place) is str:
        return kwargs[place]
    path = cast(tuple[Any, ...], place)
    value = args[path[0]] if type(path[0]) is int else kwargs[path[0]]
    for key in path[1:]:
        value = value[key]
    return value


def _restore(out: Any, entry: _Entry | None, call: tuple[Any, ...], *, shapes: bool = False) -> Any:
    """``out`` with each `_Returned` marker replaced by the caller's own object (a Ref
    from ``call``, the arguments as they reached `jax.jit`), and each `_NewRef` by a
    new `jax.Ref` of its value (by the value's shape under ``shapes``: `eval_shape`)."""
    leaves: list[Any] = []
    made: dict[int, Any] = {}

    def back(value: object) -> object:
        if type(value) is _NewRef:
            if shapes:
                return value.value
            ref = made.get(value.number)
            if ref is None:
                ref = made[value.number] = cast(Any, jax).new_ref(value.value)
            return ref
        if type(value) is _Returned:
            if value.kind == 2:
                if not leaves:
                    leaves.extend(_tree_util.tree_leaves(call))
                return leaves[value.index]
            assert entry is not None
            if value.kind == 0:
                return entry.variables[value.index]
            return entry.pytrees[value.index]
        return value

    return _tree_util.tree_map(back, out, is_leaf=_is_returned)


def _is_returned(value: object) -> bool:
    return type(value) is _Returned or type(value) is _NewRef


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
        self._entries: dict[tuple[Any, ...], _Entry] = {}
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
        if depth >= _MAX_DEPTH:  # a list that holds itself: JAX's to refuse
            return
        if type(container) is not dict:
            self._scan_items(enumerate(container), prefix, places, objects, kinds, depth)
            return
        mapping = cast(dict[Any, Any], container)
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
            kinds = self._kinds = _nnx_kinds()
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
            slot = _Slot(layout, index, own)  # each object its own values: its shardings
            if type(place) is int:
                bound[place] = slot  # pyright: ignore[reportArgumentType, reportCallIssue]
            else:
                _put_at(bound, kwargs, place, slot)
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
        with self._lock:
            if len(self._entries) >= _MAX_ENTRIES:
                self._entries.clear()
            self._entries[key] = entry
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


def _first_slot(values: Any, depth: int) -> _Slot | None:
    """The first `_Slot` among ``values`` (at ``depth``), looking into tuples, lists and
    dicts as deep as `Propagating._scan` puts one."""
    if depth >= _MAX_DEPTH:
        return None
    for value in values:
        kind: type[Any] = type(cast(object, value))
        if kind is _Slot:
            return cast(_Slot, value)
        if kind is tuple or kind is list:
            found = _first_slot(value, depth + 1)
        elif kind is dict:
            found = _first_slot(cast(dict[Any, Any], value).values(), depth + 1)
        else:
            continue
        if found is not None:
            return found
    return None


def rebinding(counted: Callable[..., Any]) -> Callable[..., Any]:
    """The function JAX traces under ``propagate_updates=True``: rebuilds the nnx
    objects from the flat values of a call (a Variable reached twice is one
    object again) and runs ``counted`` on them, telling `watched` which rebuilt
    Variable and object is which of the caller's."""

    def rebound(*args: Any, **kwargs: Any) -> Any:
        first = _first_slot((*args, *kwargs.values()), -1)  # arguments at depth 0, as _scan
        if first is None:
            _frames.stack.append(None)
            try:
                return _returned_refs(counted(*args, **kwargs), (args, kwargs))
            finally:
                _frames.stack.pop()
        layout = first.layout
        slots = [cast(_Slot, _get_at(args, kwargs, place)) for place in layout.places]
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
            _put_at(bound, kwargs, place, value)
        frame = _Frame(
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
    (``call``, as `jax.jit` passed them) by a `_Returned` marker, for the caller's own
    Ref; a Ref made inside the trace by a `_NewRef` holding its value, for a new Ref
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
            return _Returned(2, at)
        number = made.setdefault(id(value), len(made))
        return _NewRef(number, cast(Any, value)[...])

    out = _tree_util.tree_map(marker, out)
    return out, Updates(updates.indices, updates.values, returned=True)


class _NewRef:
    """Stands in the output for a `jax.Ref` the trace made and returns: its value (a
    leaf), and its number among the Refs made (the same Ref returned twice is one)."""

    __slots__ = ("number", "value")

    def __init__(self, number: int, value: Any) -> None:
        self.number = number
        self.value = value

    def __repr__(self) -> str:
        return f"<a new Ref #{self.number}: {self.value!r}>"


def _flatten_new_ref(marker: _NewRef) -> tuple[tuple[Any], int]:
    return (marker.value,), marker.number


def _unflatten_new_ref(number: int, values: Any) -> _NewRef:
    return _NewRef(number, next(iter(values)))


_tree_util.register_pytree_node(_NewRef, _flatten_new_ref, _unflatten_new_ref)


def _pytrees(objects: Any) -> list[Any]:
    """The nnx objects of the rebuilt ``objects``, in the order `_Entry` visits the
    caller's."""
    kinds = _nnx_kinds()
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
