"""Wrap-time checks shared by `BoundedJit` and `BatchedJit`.

Each ``check_*`` helper takes the API name (for the message), the parameter
name and the value, and returns the normalized value or raises exactly one
`TypeError` or `ValueError` built by `message`. Nothing else may escape, so
every call into user objects (``repr``, iteration, ``inspect.signature``) is
guarded.
"""

from __future__ import annotations

import functools
import inspect
import operator
import types
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Literal, cast

import jax
import numpy as np
from jax.sharding import AbstractMesh, AxisType, Mesh

_REPR_LIMIT = 80


def describe(value: object) -> str:
    """Returns ``repr(value)`` (truncated) and its type, for error messages."""
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not hide the real error
        text = object.__repr__(value)
    if len(text) > _REPR_LIMIT:
        text = text[: _REPR_LIMIT - 3] + "..."
    return f"{text} ({type(value).__qualname__})"


def message(api: str, parameter: str, expected: str, value: object) -> str:
    return f"{api}: {parameter} must be {expected}; got {describe(value)}."


def _integer(api: str, parameter: str, expected: str, value: object) -> int:
    """``value`` as a plain int: Python and NumPy integers, never booleans.

    Types are tested with ``type()``, not ``isinstance``, so that an object
    lying about its ``__class__`` cannot raise from the check itself, and the
    conversion uses ``operator.index``, which for an ``int`` subclass never
    calls the subclass's own ``__int__``/``__index__``.
    """
    kind = type(value)
    if issubclass(kind, bool | np.bool_) or not issubclass(kind, int | np.integer):
        raise TypeError(message(api, parameter, expected, value))
    return operator.index(value)  # type: ignore[arg-type]


def check_int(api: str, parameter: str, expected: str, value: object) -> int:
    """A Python or NumPy integer as a plain int (bool is not accepted)."""
    return _integer(api, parameter, expected, value)


def check_function(api: str, value: object) -> Callable[..., Any]:
    """Checks that ``value`` is callable, and neither a generator function nor a
    `staticmethod`/`classmethod` object (as `jax.jit`)."""
    kind = type(value)
    if kind is types.FunctionType:  # a def or lambda: only its code can make it a generator
        if cast("types.FunctionType", value).__code__.co_flags & inspect.CO_GENERATOR:
            raise TypeError(_generator_message(api, value))
        return cast("Callable[..., Any]", value)
    if issubclass(kind, staticmethod | classmethod):
        decorator = "staticmethod" if issubclass(kind, staticmethod) else "classmethod"
        raise TypeError(
            message(
                api,
                "function",
                f"a callable, not a {decorator} object (wrap the plain function, "
                f"then apply {decorator} to the result)",
                value,
            )
        )
    if not callable(value):
        raise TypeError(message(api, "function", "callable", value))
    try:
        generator = inspect.isgeneratorfunction(value)
    except Exception:  # an odd callable: leave the judgement to JAX
        generator = False
    if generator:
        raise TypeError(_generator_message(api, value))
    return value


def _generator_message(api: str, value: object) -> str:
    return message(
        api, "function", "a callable that returns arrays, not a generator function", value
    )


def check_max_traces(api: str, value: object) -> int:
    """Checks ``max_traces``: a non-negative integer, booleans rejected."""
    if type(value) is int and value >= 0:
        return value
    number = _integer(api, "max_traces", "an int (bool is not accepted)", value)
    if number < 0:
        raise ValueError(message(api, "max_traces", "non-negative", value))
    return number


def check_axis_size(api: str, value: object) -> int | None:
    """Checks ``axis_size``: ``None`` or a positive integer, booleans rejected."""
    if value is None:
        return None
    number = _integer(api, "axis_size", "an int or None (bool is not accepted)", value)
    if number <= 0:
        raise ValueError(message(api, "axis_size", "positive", value))
    return number


ON_EXCEED = ("raise", "warn", "log")
OnExceed = Literal["raise", "warn", "log"]
"""An overrun policy: what a trace over its budget does (see `exceed_policy`)."""


def check_on_exceed(api: str, value: object, parameter: str = "on_exceed") -> str | None:
    """Checks ``on_exceed``: ``None`` (the process default) or one of `ON_EXCEED`."""
    if value is None:
        return None
    expected = "None or one of 'raise', 'warn', 'log'"
    if not issubclass(type(value), str):
        raise TypeError(message(api, parameter, f"{expected} (a str)", value))
    policy = str.__str__(cast("str", value))  # a plain str: no subclass hooks from here on
    if policy not in ON_EXCEED:
        raise ValueError(message(api, parameter, expected, policy))
    return policy


def check_argnames(api: str, parameter: str, value: object) -> tuple[str, ...]:
    """Normalizes an argnames option to a tuple of distinct, non-empty names.

    A single ``str`` is one name, as in `jax.jit`. Otherwise the value must be
    an ordered sequence (tuple, list, ...) of ``str``: sets and one-shot
    iterables are rejected because their order, and so the error a user sees,
    would not be reproducible.
    """
    kind = type(value)
    if issubclass(kind, str):
        entries: tuple[object, ...] = (value,)
    elif issubclass(kind, Sequence) and not issubclass(kind, bytes | bytearray | memoryview):
        try:
            entries = tuple(cast("Sequence[object]", value))
        except Exception:
            raise TypeError(message(api, parameter, "a str or a sequence of str", value)) from None
    else:
        raise TypeError(
            message(api, parameter, "a str or an ordered sequence (tuple, list) of str", value)
        )
    names: list[str] = []
    for index, entry in enumerate(entries):
        if not issubclass(type(entry), str):
            raise TypeError(message(api, f"{parameter}[{index}]", "a str", entry))
        name = str.__str__(cast("str", entry))  # a plain str: no subclass hooks from here on
        if not name:
            raise ValueError(message(api, f"{parameter}[{index}]", "a non-empty str", name))
        if name in names:
            raise ValueError(
                message(api, parameter, f"free of duplicates ({name!r} appears twice)", value)
            )
        names.append(name)
    return tuple(names)


def check_disjoint(api: str, static: tuple[str, ...], donate: tuple[str, ...]) -> None:
    """Checks that no name is both static and donated."""
    overlap = tuple(name for name in static if name in donate)
    if overlap:
        raise ValueError(
            f"{api}: static_argnames and donate_argnames must not overlap; got {overlap!r} in both."
        )


def signature_of(function: Callable[..., Any]) -> inspect.Signature | None:
    """The signature of ``function``, or ``None`` where Python cannot give one."""
    try:
        return inspect.signature(function)
    except Exception:  # builtins and some C callables have none; so may odd objects
        return None


def _plain(function: object) -> bool:
    """A ``def`` or ``lambda`` whose signature nothing overrides (no ``__signature__``
    or ``__wrapped__`` of its own): its signature follows from its code, defaults and
    annotations alone."""
    if type(function) is not types.FunctionType:
        return False
    own = function.__dict__
    return "__signature__" not in own and "__wrapped__" not in own


# The signatures of plain functions, kept while each function lives, with what they were
# read from: a function wrapped again (per test, per hypothesis example, per model) is not
# read again, which is most of a wrap's cost past jax.jit's own (~8 us). Keyed by id, with
# a weak reference that drops the entry when the function dies (a WeakKeyDictionary's
# lookup makes a weak reference each time: 1 us of a wrap).
_SIGNATURES: dict[int, tuple[Any, ...]] = {}


def _forget(key: int, alive: weakref.ref[Any]) -> None:
    entry = _SIGNATURES.get(key)
    if entry is not None and entry[0] is alive:  # not a newer function with the same id
        _SIGNATURES.pop(key, None)


def _remembered(function: types.FunctionType) -> tuple[Any, ...] | None:
    """The entry remembered for ``function``, if nothing it was read from changed."""
    entry = _SIGNATURES.get(id(function))
    if (
        entry is not None
        and entry[0]() is function
        and entry[1] is function.__code__
        and entry[2] is function.__defaults__
        and entry[3] is function.__kwdefaults__
        and entry[4] is function.__annotations__
        and _plain(function)
    ):
        return entry
    return None


def _remember(function: types.FunctionType, signature: inspect.Signature) -> dict[Any, Any]:
    key = id(function)
    alive = weakref.ref(function, functools.partial(_forget, key))
    derived: dict[Any, Any] = {}
    _SIGNATURES[key] = (
        alive,
        function.__code__,
        function.__defaults__,
        function.__kwdefaults__,
        function.__annotations__,
        signature,
        derived,
    )
    return derived


class LazySignature:
    """The signature of a function, computed once, when first needed.

    A plain function's signature is remembered while the function lives and
    reused when it is wrapped again, unless its code, defaults or annotations
    were replaced since. The signature is handed to `jax.jit` (as the counted
    function's ``__signature__``), so that JAX does not compute it a second
    time. A benign race between threads computes it twice, the same.
    """

    __slots__ = ("_derived", "_function", "_known", "_value")

    def __init__(self, function: Callable[..., Any]) -> None:
        self._function = function
        self._known = False
        self._value: inspect.Signature | None = None
        self._derived: dict[Any, Any] | None = None
        if type(function) is types.FunctionType:
            entry = _remembered(function)
            if entry is not None:
                self._value = entry[5]
                self._derived = entry[6]
                self._known = True

    def get(self) -> inspect.Signature | None:
        """The signature, or ``None`` where Python cannot give one."""
        if not self._known:
            function = self._function
            self._value = signature_of(function)
            self._known = True
            if self._value is not None and _plain(function):
                self._derived = _remember(cast("types.FunctionType", function), self._value)
        return self._value

    def derived(self) -> dict[Any, Any] | None:
        """A dictionary kept with the remembered signature, for what follows from the
        signature alone (`jax_options.parse`'s checks of argnums and argnames, by
        option values); ``None`` where the signature is not remembered."""
        self.get()
        return self._derived


def check_accepted_names(
    api: str, parameter: str, names: tuple[str, ...], signature: inspect.Signature | None
) -> None:
    """Checks that ``function`` can take each of ``names`` as a keyword argument.

    Follows `jax.jit`: positional-only and ``*args`` names are never accepted;
    a ``**kwargs`` parameter accepts every other name. Without a signature,
    static names are left to JAX (they can only be keyword arguments), but
    donated names cannot be resolved: `jax.jit` would refuse them on first call.
    """
    if signature is None:
        if names and parameter == "donate_argnames":
            raise ValueError(
                f"{api}: {parameter} needs the signature of function to find the named "
                f"arguments, and Python cannot give one; got {names!r}."
            )
        return
    parameters = signature.parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    keyword_kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    accepted = tuple(name for name, p in parameters.items() if p.kind in keyword_kinds)
    for name in names:
        found = parameters.get(name)
        if found is not None and found.kind is inspect.Parameter.VAR_KEYWORD:
            continue  # f(x, **kwargs) can be called as f(1, kwargs=2)
        if found is not None and found.kind not in keyword_kinds:
            kind = (
                "positional-only"
                if found.kind is inspect.Parameter.POSITIONAL_ONLY
                else "a *args parameter"
            )
            raise ValueError(
                f"{api}: {parameter} must name keyword parameters of function; got {name!r}, "
                f"which is {kind} in {signature}."
            )
        if found is None and not takes_any:
            raise ValueError(
                f"{api}: {parameter} must name parameters of function; got {name!r}, "
                f"but function{signature} accepts only {accepted!r}."
            )


def check_mesh(api: str, value: object) -> Mesh | None:
    """Checks ``mesh``: ``None`` or a non-empty `jax.sharding.Mesh` without Manual axes."""
    if value is None:
        return None
    manual = "jax.set_mesh refuses them; enter Manual axes with jax.shard_map"
    return check_concrete_mesh(api, value, "a jax.sharding.Mesh or None", manual)


def check_concrete_mesh(api: str, value: object, expected: str, manual: str) -> Mesh:
    """Checks that ``value`` is a non-empty `jax.sharding.Mesh` without Manual axes.

    ``expected`` names what the parameter takes; ``manual`` says why a Manual
    axis is refused there.
    """
    if issubclass(type(value), AbstractMesh):
        raise TypeError(
            message(api, "mesh", f"{expected} (an AbstractMesh has no devices to run on)", value)
        )
    if not issubclass(type(value), Mesh):
        raise TypeError(message(api, "mesh", expected, value))
    mesh = cast("Mesh", value)
    if mesh.empty:
        raise ValueError(message(api, "mesh", "non-empty", mesh))
    if AxisType.Manual in mesh.axis_types:
        raise ValueError(message(api, "mesh", f"free of Manual axes ({manual})", mesh))
    return mesh


SpmdAxisName = Hashable | tuple[Hashable, ...]
"""What `jax.vmap`'s ``spmd_axis_name`` takes: a mesh axis name, or a tuple of them."""


def _hashable(api: str, parameter: str, value: object) -> None:
    try:
        hash(value)
    except Exception:
        raise TypeError(
            message(api, parameter, "None or a hashable axis name (a str)", value)
        ) from None


def check_vmap_options(
    api: str, mesh: Mesh | None, axis_name: object, spmd_axis_name: object, sum_match: object
) -> dict[str, Any]:
    """Checks `jax.vmap`'s ``axis_name``, ``spmd_axis_name`` and ``sum_match``; returns
    those given, for `jax.vmap`.

    Axis names must be hashable (JAX keys its axis environment on them); an
    ``spmd_axis_name`` must name axes of ``mesh`` when one is bound (else JAX fails
    on the first call); ``sum_match`` is a bool.
    """
    options: dict[str, Any] = {}
    if axis_name is not None:
        _hashable(api, "axis_name", axis_name)
        options["axis_name"] = axis_name
    if spmd_axis_name is not None:
        _hashable(api, "spmd_axis_name", spmd_axis_name)
        if mesh is not None:
            names: tuple[object, ...] = (
                cast("tuple[object, ...]", spmd_axis_name)
                if type(spmd_axis_name) is tuple
                else (spmd_axis_name,)
            )
            unknown = tuple(name for name in names if name not in mesh.axis_names)
            if unknown:
                raise ValueError(
                    message(
                        api,
                        "spmd_axis_name",
                        f"axis names of mesh {mesh.axis_names!r} ({unknown!r} is not one)",
                        cast("object", spmd_axis_name),
                    )
                )
        options["spmd_axis_name"] = spmd_axis_name
    if not issubclass(type(sum_match), bool | np.bool_):
        raise TypeError(message(api, "sum_match", "a bool", sum_match))
    if sum_match:
        options["sum_match"] = True
    return options


def vmapped(
    api: str,
    function: Callable[..., Any],
    in_axes: Any,
    out_axes: Any,
    axis_size: int | None,
    options: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """``jax.vmap(function, ...)``, whose own errors pass through unchanged.

    The page leaves ``in_axes``/``out_axes`` to `jax.vmap`, whose `TypeError`
    and `ValueError` are specific and clear. Anything else it lets escape (an
    object whose ``repr`` or attribute lookup raises) becomes a `TypeError`.
    """
    try:
        return jax.vmap(
            function, in_axes=in_axes, out_axes=out_axes, axis_size=axis_size, **(options or {})
        )
    except (TypeError, ValueError):
        raise
    except Exception as error:
        try:
            reason = f"{type(error).__name__}: {error}"
        except Exception:
            reason = type(error).__name__
        given = "".join(f", {name}={describe(value)}" for name, value in (options or {}).items())
        names = "".join(f", {name}" for name in (options or {}))
        raise TypeError(
            f"{api}: function, in_axes, out_axes{names} must be accepted by jax.vmap; got "
            f"function={describe(function)}, in_axes={describe(in_axes)}, "
            f"out_axes={describe(out_axes)}{given}, and jax.vmap raised {reason}."
        ) from None
