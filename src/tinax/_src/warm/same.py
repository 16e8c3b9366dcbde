"""Whether two traces of one signature compute the same: warm start's check of a warm trace.

A warm trace is made in a background thread while the program starts; the program
may set what the function reads (a global, an attribute, a closure cell, a static
argument's content) after it. At the first call that would run from it, the function
is traced again (`private.fresh_trace`) and the two JAX stages are compared here:
the closed jaxprs (each equation's primitive, parameters and operands, the avals of
every variable, literals and constants bit for bit, effects), the input and output
tree structures (with their auxiliary data: the non-array outputs that
``static_nonarrays`` returns as they were traced, the write-back of
``propagate_updates``) and the options the stage carries (shardings, donation,
mesh). Anything not known to be equal is a difference: the check errs towards
tracing again, never towards running a stale trace.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping, Sequence
from typing import Any, cast

import jax
import jax.extend.core as jex
import numpy as np

_DEPTH = 64  # nested values compared; deeper: different


def same_stage(warm: Any, fresh: Any) -> bool:
    """Whether two JAX ``Traced`` stages of one function and signature compute the same."""
    try:
        if not same_tree(warm._in_tree, fresh._in_tree) or not same_tree(
            warm.out_tree, fresh.out_tree
        ):
            return False
        if not _same_values(warm._consts, fresh._consts, 0):
            return False
        warm_params: Mapping[str, Any] = warm._params
        fresh_params: Mapping[str, Any] = fresh._params
        if set(warm_params) != set(fresh_params):
            return False
        for name, value in warm_params.items():
            if name == "name":  # the function's name: the fresh trace's is a partial's
                continue
            if not _same(value, fresh_params[name], 0):
                return False
        return True
    except Exception:  # something not comparable: not known to be equal
        return False


def same_tree(a: Any, b: Any) -> bool:
    """Tree structures equal as JAX compares them, and their auxiliary data strictly so
    (`_same`: ``1``, ``True`` and ``1.0`` differ)."""
    if not a == b:
        return False
    return _same_node(a, b, 0)


def _same_node(a: Any, b: Any, depth: int) -> bool:
    if depth > _DEPTH:
        return False
    if a.num_nodes != b.num_nodes or a.num_leaves != b.num_leaves:
        return False
    data_a, data_b = a.node_data(), b.node_data()
    if (data_a is None) != (data_b is None):
        return False
    if data_a is not None and (
        data_a[0] is not data_b[0] or not _same(data_a[1], data_b[1], depth)
    ):
        return False
    children_a, children_b = a.children(), b.children()
    return len(children_a) == len(children_b) and all(
        _same_node(x, y, depth + 1) for x, y in zip(children_a, children_b, strict=True)
    )


def _same_closed(a: jex.ClosedJaxpr, b: jex.ClosedJaxpr, depth: int) -> bool:
    return _same_values(a.consts, b.consts, depth) and _same_jaxpr(a.jaxpr, b.jaxpr, depth)


def _same_jaxpr(a: jex.Jaxpr, b: jex.Jaxpr, depth: int) -> bool:
    if depth > _DEPTH:
        return False
    if (
        len(a.constvars) != len(b.constvars)
        or len(a.invars) != len(b.invars)
        or len(a.outvars) != len(b.outvars)
        or len(a.eqns) != len(b.eqns)
        or a.effects != b.effects
    ):
        return False
    names: dict[int, Any] = {}  # id of a's variable -> b's
    for x, y in zip((*a.constvars, *a.invars), (*b.constvars, *b.invars), strict=True):
        if not _bind(x, y, names):
            return False
    for x, y in zip(a.eqns, b.eqns, strict=True):
        if (
            x.primitive is not y.primitive
            or x.effects != y.effects
            or len(x.outvars) != len(y.outvars)
            or not _same_atoms(x.invars, y.invars, names, depth)
            or not _same(x.params, y.params, depth + 1)
        ):
            return False
        for out_x, out_y in zip(x.outvars, y.outvars, strict=True):
            if not _bind(out_x, out_y, names):
                return False
    return _same_atoms(a.outvars, b.outvars, names, depth)


def _bind(x: Any, y: Any, names: dict[int, Any]) -> bool:
    if type(x) is not type(y) or x.aval != y.aval:
        return False
    names[id(x)] = y
    return True


def _same_atoms(a: Sequence[Any], b: Sequence[Any], names: dict[int, Any], depth: int) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if type(x) is not type(y):
            return False
        if isinstance(x, jex.Literal):
            if x.aval != y.aval or not _same(x.val, y.val, depth):
                return False
        elif names.get(id(x)) is not y:
            return False
    return True


def _same_values(a: Sequence[Any], b: Sequence[Any], depth: int) -> bool:
    return len(a) == len(b) and all(_same(x, y, depth) for x, y in zip(a, b, strict=True))


def _same(a: Any, b: Any, depth: int) -> bool:
    """Whether two values (a parameter, a constant, auxiliary data) are the same: the
    same object, or of one type and equal, arrays and numbers bit for bit."""
    if _shared_buffer(a, b):
        return False
    if a is b:
        return True
    if depth > _DEPTH or type(a) is not type(b):
        return False
    if isinstance(a, jex.ClosedJaxpr):
        return _same_closed(a, b, depth + 1)
    if isinstance(a, jex.Jaxpr):
        return _same_jaxpr(a, b, depth + 1)
    if isinstance(a, (np.ndarray, np.generic, jax.Array, float, complex)):
        return _same_array(a, b)
    if isinstance(a, (tuple, list)):
        return _same_values(cast("Sequence[Any]", a), b, depth + 1)  # a named tuple: its fields
    if isinstance(a, dict):
        mapping = cast("dict[Any, Any]", a)
        return list(mapping) == list(b) and all(_same(mapping[k], b[k], depth + 1) for k in mapping)
    if type(a).__name__ == "WrappedFun" and hasattr(a, "debug_info"):
        # A derivative rule's lazy trace (custom_jvp's jvp_jaxpr_fun, custom_vjp's
        # forward and backward): made anew by each trace, run when the jaxpr is
        # differentiated, with the values the trace gave the rule
        return a.debug_info == b.debug_info and _same_wrapped(a, b, depth)
    if type(a).__name__ in ("Unhashable", "Hashable") and hasattr(a, "val"):
        return _same(a.val, b.val, depth + 1)  # JAX's box of a value: the value
    if isinstance(a, types.FunctionType):  # a function made in the trace: its code and cells
        return _same_function(a, b, depth)
    if isinstance(a, types.MethodType):  # a bound method: its function and its object
        return a.__func__ is b.__func__ and _same(a.__self__, b.__self__, depth + 1)
    if type(a) is object:  # a bare sentinel (a memo's): holds nothing
        return True
    if type(a).__name__.endswith("Trace") and type(a).__module__.startswith("jax."):
        return True  # the trace a lazy rule's thunk belongs to: each trace's own
    if type(a).__name__ in _STORES and hasattr(a, "__slots__"):
        # JAX's output store of a lazy rule's trace (custom_vjp's ``out_trees``, filled
        # when the forward rule is traced): what it holds, empty only as empty
        return _same(_stored(a), _stored(b), depth + 1)
    if isinstance(a, (str, bytes, int, bool, type(None))):
        return a == b
    if dataclasses.is_dataclass(a):  # JAX's (a callback's wrapper): field by field
        return all(
            _same(getattr(a, field.name), getattr(b, field.name), depth + 1)
            for field in dataclasses.fields(a)
        )
    try:
        return bool(a == b)  # an object of its own: its equality, if it has one
    except Exception:
        return False


_STORES = ("Store", "EqualStore")  # jax._src.linear_util's
_EMPTY = object()


def _stored(store: Any) -> Any:
    """What a ``linear_util`` store holds (an ``EqualStore`` wraps a ``Store``), or
    `_EMPTY` (reading ``val`` of an empty one raises)."""
    inner = getattr(store, "_store", store)
    return inner.val if inner else _EMPTY


def _same_wrapped(a: Any, b: Any, depth: int) -> bool:
    """Two ``linear_util.WrappedFun``: the same function (`_same`: its code and cells,
    where JAX's thunk around the user's rule holds the rule, its trace and its memo)
    with the same values bound by each transformation (a ``nondiff_argnums``
    argument, an output store) and parameters."""
    if len(a.transforms) != len(b.transforms) or not _same(a.params, b.params, depth + 1):
        return False
    for (step_a, bound_a), (step_b, bound_b) in zip(a.transforms, b.transforms, strict=True):
        if step_a is not step_b or not _same(bound_a, bound_b, depth + 1):
            return False
    return _same(a.f, b.f, depth + 1)


def _shared_buffer(a: Any, b: Any) -> bool:
    """Whether both traces hold one buffer of the program's that can change in place:
    what the warm trace's executable holds is its content when lowered, not known now."""
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        return False
    x, y = cast("np.ndarray[Any, Any]", a), cast("np.ndarray[Any, Any]", b)
    return _mutable(x) and (x is y or bool(np.may_share_memory(x, y)))


def _mutable(array: np.ndarray[Any, Any]) -> bool:
    """Whether the content of ``array`` can change in place: it, or an array it views,
    is writeable, or it views a buffer that is not ``bytes``."""
    value: Any = array
    while isinstance(value, np.ndarray):
        if cast("np.ndarray[Any, Any]", value).flags.writeable:
            return True
        value = cast("np.ndarray[Any, Any]", value).base
    return value is not None and not isinstance(value, bytes)


def _same_array(a: Any, b: Any) -> bool:
    x, y = np.asarray(a), np.asarray(b)
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def _same_function(a: types.FunctionType, b: types.FunctionType, depth: int) -> bool:
    if a.__code__ is not b.__code__ or a.__globals__ is not b.__globals__:
        return False
    if not _same(a.__defaults__, b.__defaults__, depth + 1) or not _same(
        a.__kwdefaults__, b.__kwdefaults__, depth + 1
    ):
        return False
    cells_a, cells_b = a.__closure__ or (), b.__closure__ or ()
    return len(cells_a) == len(cells_b) and all(
        _same(x.cell_contents, y.cell_contents, depth + 1)
        for x, y in zip(cells_a, cells_b, strict=True)
    )
