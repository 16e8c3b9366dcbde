"""The ledger behind a trace budget: count, lock, signature history and diff.

Everything here runs at trace time only. The per-call hot path never enters
this module: JAX's compilation cache answers a repeated call before the counted
function below is reached.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ParamSpec, TypeVar

import attrs
import jax
from jax.core import Tracer

from tinax._src import private
from tinax._src.errors import TraceBudgetError

P = ParamSpec("P")
R = TypeVar("R")

_STATIC_REPR_LIMIT = 60
_MAX_LISTED_DIFFERENCES = 12


# --- what one trace looked like ------------------------------------------------------------


@attrs.frozen
class Leaf:
    """One leaf of a traced call: an array's abstract value or a static value.

    Attributes:
        argument: Name of the parameter the leaf belongs to.
        path: The leaf as a user would write it, e.g. ``params['dense']['w']``.
        kind: ``"array"`` for a traced array, ``"static"`` for a static argument.
        text: What JAX keys the trace on, e.g. ``f32[8,3]``, ``weak-typed f32[]``
            or, for a static argument, its (truncated) ``repr``.
        shape: Array shape (``None`` for static values).
        dtype: Array dtype name (``None`` for static values).
        weak_type: Whether the array is weakly typed (a Python scalar).
        sharding: Partition spec of the array's sharding where JAX knows it in
            the type (explicit sharding), else ``None``.
    """

    argument: str
    path: str
    kind: str
    text: str
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    weak_type: bool = False
    sharding: str | None = None


@attrs.frozen
class TracedSignature:
    """The abstract signature of one trace: the key JAX's trace cache used.

    Attributes:
        number: 1-based trace number within the object (0 for a refused call).
        structures: ``(argument, tree structure)`` per argument, in call order.
        leaves: Every leaf of every argument.
        mesh: The ambient abstract mesh during the trace.
    """

    number: int
    structures: tuple[tuple[str, str], ...]
    leaves: tuple[Leaf, ...]
    mesh: str

    def __str__(self) -> str:
        leaves = ", ".join(f"{leaf.path}: {leaf.text}" for leaf in self.leaves)
        text = f"#{self.number}: {leaves or '(no arguments)'}"
        if self.mesh != _NO_MESH:
            text += f" under {self.mesh}"
        return text


class TraceHistory(tuple[TracedSignature, ...]):
    """The traced signatures of an object, oldest first; prints as a table."""

    __slots__ = ()

    def __str__(self) -> str:
        if not self:
            return "no traces yet"
        return "\n".join(str(signature) for signature in self)


_NO_MESH = str(jax.sharding.AbstractMesh((), ()))


def _short_dtype(name: str) -> str:
    for long, short in (("bfloat", "bf"), ("float", "f"), ("uint", "u"), ("int", "i")):
        if name.startswith(long):
            return short + name[len(long) :]
    return name.replace("complex", "c")


def _static_text(value: object) -> str:
    try:
        text = repr(value)
    except Exception:
        text = object.__repr__(value)
    if len(text) > _STATIC_REPR_LIMIT:
        text = text[: _STATIC_REPR_LIMIT - 3] + "..."
    return text


def _array_leaf(argument: str, path: str, aval: Any) -> Leaf:
    shape = tuple(int(d) for d in aval.shape)
    dtype = _short_dtype(str(aval.dtype))
    sharding = getattr(aval, "sharding", None)
    spec = None
    if sharding is not None and not sharding.mesh.empty:
        spec = str(sharding.spec)
    text = aval.str_short(short_dtypes=True)
    if aval.weak_type:
        text = "weak-typed " + text
    return Leaf(argument, path, "array", text, shape, dtype, bool(aval.weak_type), spec)


def _named_arguments(
    signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> Iterator[tuple[str, Any]]:
    """Pairs each argument with its parameter name, however it was passed."""
    if signature is not None:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            pass
        else:
            for name, value in bound.arguments.items():
                kind = signature.parameters[name].kind
                if kind is inspect.Parameter.VAR_KEYWORD:
                    yield from value.items()
                else:
                    yield name, value
            return
    for index, value in enumerate(args):
        yield f"args[{index}]", value
    yield from kwargs.items()


def record_signature(
    number: int,
    signature: inspect.Signature | None,
    static_argnames: tuple[str, ...],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> TracedSignature:
    """Records the abstract signature of a call being traced. O(number of leaves)."""
    structures: list[tuple[str, str]] = []
    leaves: list[Leaf] = []
    for name, value in _named_arguments(signature, args, kwargs):
        if name in static_argnames:
            structures.append((name, "static"))
            leaves.append(Leaf(name, name, "static", _static_text(value)))
            continue
        tree_util: Any = jax.tree_util
        flat: list[tuple[Any, Any]]
        flat, treedef = tree_util.tree_flatten_with_path(value)
        structure = str(treedef)
        if structure.startswith("PyTreeDef(") and structure.endswith(")"):
            structure = structure[len("PyTreeDef(") : -1]
        structures.append((name, structure))
        for key_path, leaf in flat:
            path = name + tree_util.keystr(key_path)
            if isinstance(leaf, Tracer):
                leaves.append(_array_leaf(name, path, leaf.aval))
            else:  # a static leaf inside a traced argument: keyed by value
                leaves.append(Leaf(name, path, "static", _static_text(leaf)))
    mesh = str(jax.sharding.get_abstract_mesh())
    return TracedSignature(number, tuple(structures), tuple(leaves), mesh)


# --- how two traces differ -----------------------------------------------------------------

_HINTS = {
    "shape": "new shapes retrace; pad or bucket inputs to a few fixed shapes",
    "dtype": "cast inputs to one dtype before the call",
    "weak type": "pass the scalar consistently as an array or consistently as a Python number",
    "sharding": "place inputs with one sharding (jax.device_put) before the call",
    "static value": "each new value of a static argument retraces; "
    "keep it fixed, or do not mark it static",
    "tree structure": "keep the tree structure fixed between calls (same keys, lengths, Nones)",
    "new argument": "pass the same arguments on every call",
    "missing argument": "pass the same arguments on every call",
    "mesh": "the ambient mesh is part of JAX's cache key; call under one mesh",
}


@attrs.frozen
class Difference:
    """One difference between an earlier trace and a new call.

    Attributes:
        path: The argument or leaf that changed, e.g. ``batch['x']``.
        before: Its abstract value in the earlier trace.
        after: Its abstract value in the new call.
        kinds: What changed, e.g. ``("shape",)`` or ``("dtype", "weak type")``.
    """

    path: str
    before: str
    after: str
    kinds: tuple[str, ...]

    @property
    def hint(self) -> str:
        """The usual fix for this kind of difference."""
        return _HINTS[self.kinds[0]]

    def __str__(self) -> str:
        kind = ", ".join(self.kinds)
        return f"{self.path}: {self.before} -> {self.after} ({kind}: {self.hint})"


def _leaf_kinds(old: Leaf, new: Leaf) -> tuple[str, ...]:
    if old.kind != new.kind:
        return ("static value",) if "static" in (old.kind, new.kind) else ("tree structure",)
    if old.kind == "static":
        return ("static value",) if old.text != new.text else ()
    kinds: list[str] = []
    if old.shape != new.shape:
        kinds.append("shape")
    if old.dtype != new.dtype:
        kinds.append("dtype")
    if old.weak_type != new.weak_type:
        kinds.append("weak type")
    if old.sharding != new.sharding:
        kinds.append("sharding")
    return tuple(kinds)


def differences(old: TracedSignature, new: TracedSignature) -> tuple[Difference, ...]:
    """What differs between two traced signatures, argument by argument."""
    found: list[Difference] = []
    if old.mesh != new.mesh:
        found.append(Difference("(ambient mesh)", old.mesh, new.mesh, ("mesh",)))
    old_structures = dict(old.structures)
    new_structures = dict(new.structures)
    old_leaves = {leaf.path: leaf for leaf in old.leaves}
    for name, structure in new.structures:
        if name not in old_structures:
            found.append(Difference(name, "(absent)", _argument_text(new, name), ("new argument",)))
        elif old_structures[name] != structure:
            if "static" in (structure, old_structures[name]):
                kinds = ("static value",)
            else:
                kinds = ("tree structure",)
            found.append(Difference(name, old_structures[name], structure, kinds))
        else:
            for leaf in new.leaves:
                if leaf.argument != name:
                    continue
                before = old_leaves[leaf.path]
                kinds = _leaf_kinds(before, leaf)
                if kinds:
                    found.append(Difference(leaf.path, before.text, leaf.text, kinds))
    for name, _ in old.structures:
        if name not in new_structures:
            found.append(
                Difference(name, _argument_text(old, name), "(absent)", ("missing argument",))
            )
    return tuple(found)


def _argument_text(signature: TracedSignature, name: str) -> str:
    texts = [leaf.text for leaf in signature.leaves if leaf.argument == name]
    return texts[0] if len(texts) == 1 else dict(signature.structures)[name]


def closest(
    history: tuple[TracedSignature, ...], new: TracedSignature
) -> tuple[TracedSignature | None, tuple[Difference, ...]]:
    """The earlier trace with the fewest differences (the latest on ties)."""
    best: TracedSignature | None = None
    best_differences: tuple[Difference, ...] = ()
    for old in history:
        found = differences(old, new)
        if best is None or len(found) <= len(best_differences):
            best, best_differences = old, found
    return best, best_differences


# --- the error -----------------------------------------------------------------------------


def function_name(function: Callable[..., Any]) -> str:
    """A readable name for any callable: qualified name, or what it wraps."""
    if isinstance(function, functools.partial):
        return f"partial({function_name(function.func)})"  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    if isinstance(name, str):
        return name
    return f"{type(function).__qualname__} instance"


def function_location(function: Callable[..., Any]) -> str | None:
    """``file:line`` of the code behind ``function``, where Python knows it."""
    try:
        return _location(function)
    except Exception:  # an odd callable must not turn the budget error into another error
        return None


def _location(function: Callable[..., Any]) -> str | None:
    seen = 0
    target: Any = function
    while seen < 32:  # unwrap partials, bound methods, decorators and callable instances
        seen += 1
        if isinstance(target, functools.partial):
            target = target.func  # pyright: ignore[reportUnknownMemberType]
        elif inspect.ismethod(target):
            target = target.__func__
        elif hasattr(target, "__wrapped__"):
            target = target.__wrapped__
        elif not hasattr(target, "__code__") and not isinstance(target, type):
            call = getattr(type(target), "__call__", None)  # noqa: B004  # pyright: ignore[reportUnknownArgumentType]
            if call is None or call is target:
                break
            target = call
        else:
            break
    code = getattr(target, "__code__", None)
    if code is None:
        return None
    filename: str = code.co_filename
    try:
        relative = os.path.relpath(filename)
    except ValueError:
        relative = filename
    if not relative.startswith(".."):
        filename = relative
    return f"{filename}:{code.co_firstlineno}"


def budget_error(
    function: Callable[..., Any],
    max_traces: int,
    attempt: int,
    history: tuple[TracedSignature, ...],
    signature: TracedSignature,
) -> TraceBudgetError:
    """Builds the error for a refused trace: headline, location, differences, fix."""
    name = function_name(function)
    location = function_location(function)
    where = f" ({location})" if location else ""
    lines = [
        f"{name}{where} exceeded its trace budget: "
        f"max_traces={max_traces}, this call would be trace {attempt}."
    ]
    best, found = closest(history, signature)
    if best is None:
        lines.append(f"No earlier trace to compare with. This call: {str(signature)[4:]}")
    elif not found:
        lines.append(
            f"Closest earlier trace: #{best.number}, with no difference in the abstract "
            "signature: JAX retraced for a reason it does not show there (a static argument "
            "that prints the same but compares unequal, or cleared JAX caches)."
        )
    else:
        lines.append(f"Closest earlier trace: #{best.number}. Differences:")
        lines.extend(f"  {difference}" for difference in found[:_MAX_LISTED_DIFFERENCES])
        if len(found) > _MAX_LISTED_DIFFERENCES:
            lines.append(f"  ... and {len(found) - _MAX_LISTED_DIFFERENCES} more")
    return TraceBudgetError(
        "\n".join(lines),
        function_name=name,
        location=location,
        max_traces=max_traces,
        signature=signature,
        closest=best,
        differences=found,
    )


# --- the count -----------------------------------------------------------------------------


class Ledger:
    """The mutable part of a budgeted object: count, in-flight traces, history.

    A trace reserves its slot before the body runs and commits it after the
    body returns, all under one lock, so concurrent traces from several threads
    never exceed the budget, and a trace whose body raises gives its slot back.
    """

    __slots__ = ("history", "in_flight", "lock", "used")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.used = 0
        self.in_flight = 0
        self.history: list[TracedSignature] = []


def counted(
    function: Callable[P, R],
    ledger: Ledger,
    max_traces: int,
    signature: inspect.Signature | None,
    static_argnames: tuple[str, ...],
    reported: Callable[..., Any],
) -> Callable[P, R]:
    """Wraps ``function`` so that each run by JAX's tracing is counted in ``ledger``.

    ``reported`` is the user's function, named in the error (``function`` may be
    a `jax.vmap` of it).
    """

    def traced(*args: P.args, **kwargs: P.kwargs) -> R:
        if private.jit_disabled() and not private.tracing_to_jaxpr():
            return function(*args, **kwargs)  # run eagerly: not a trace
        call = _record_or_placeholder(signature, static_argnames, args, kwargs)
        with ledger.lock:
            attempt = ledger.used + ledger.in_flight + 1
            refuse = attempt > max_traces and private.chex_asserts_enabled()
            if not refuse:
                ledger.in_flight += 1
            history = tuple(ledger.history)
        if refuse:
            raise budget_error(reported, max_traces, attempt, history, call)
        try:
            out = function(*args, **kwargs)
        except BaseException:
            with ledger.lock:
                ledger.in_flight -= 1
            raise
        valid = private.valid_output(out)  # else JAX raises next and will trace again
        with ledger.lock:
            ledger.in_flight -= 1
            if not valid:
                return out
            ledger.used += 1
            ledger.history.append(attrs.evolve(call, number=ledger.used))
        return out

    _present_as(traced, reported, signature)
    return traced


def _record_or_placeholder(
    signature: inspect.Signature | None,
    static_argnames: tuple[str, ...],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
) -> TracedSignature:
    """The call's abstract signature; recording must never break the user's trace."""
    try:
        return record_signature(0, signature, static_argnames, args, kwargs)
    except Exception as error:  # an exotic leaf: keep counting, explain less
        leaf = Leaf("(unrecorded)", "(unrecorded)", "static", f"{type(error).__name__}")
        return TracedSignature(0, (("(unrecorded)", "static"),), (leaf,), _NO_MESH)


_ANY_ARGUMENTS = inspect.Signature(
    [
        inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
        inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
    ]
)


def _present_as(
    traced: Callable[..., Any], function: Callable[..., Any], signature: inspect.Signature | None
) -> None:
    """Makes JAX see ``traced`` as ``function``: signature, name, source location.

    Unlike `functools.wraps`, nothing here can fail on an odd callable: the
    signature was computed (guarded) at wrap time, and the rest is optional.
    """
    wrapper: Any = traced
    wrapper.__signature__ = signature if signature is not None else _ANY_ARGUMENTS
    for name in ("__name__", "__qualname__"):
        try:
            value = getattr(function, name)
        except Exception:
            continue
        if isinstance(value, str):
            setattr(wrapper, name, value)
    try:  # JAX unwraps for the source location in its own messages
        inspect.unwrap(function)
    except Exception:
        return
    wrapper.__wrapped__ = function
