"""`jax.jit`'s options, validated once at wrap time into what reaches `jax.jit`.

The page's signature names two of them (``static_argnames``,
``donate_argnames``); tinax takes every option `jax.jit` takes, with its
names, defaults and meaning. Each is checked here, where `jax.jit` would
accept it silently or fail on some later call, and passed on to `jax.jit` only
when the user gave it: passing a default explicitly can change what JAX does
(an explicit ``static_argnames=()`` stops JAX inferring names from
``static_argnums``) and what a wrap costs.
"""

from __future__ import annotations

import enum
import inspect
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, cast

import attrs
import jax
import numpy as np
from jax.sharding import Mesh

from tinax._src.core.statics import NO_NAMES, NO_STATICS, UNSPECIFIED, Statics
from tinax._src.core.validation import (
    LazySignature,
    check_accepted_names,
    check_argnames,
    check_disjoint,
    describe,
    message,
)

Device: TypeAlias = Any
"""A `jax.Device` (jaxlib's class, whose type pyright cannot see)."""

_DEVICE_TYPE: type[Any] = cast("Any", jax).Device


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


@attrs.frozen
class Parsed:
    """The options, normalized: the fields an object shows and what `jax.jit` gets."""

    static_argnames: tuple[str, ...]
    donate_argnames: tuple[str, ...]
    static_argnums: tuple[int, ...] | None
    donate_argnums: tuple[int, ...] | None
    statics: Statics
    jit_kwargs: dict[str, Any]
    inline: bool | enum.Enum
    donated: Statics = NO_STATICS
    """The donated arguments as `jax.jit` decides it on each call (names inferred from
    numbers and numbers from names, as `statics`)."""


def check_argnums(api: str, parameter: str, value: object) -> tuple[int, ...] | None:
    """``None``, or an int or an ordered sequence of distinct ints (booleans rejected)."""
    if value is None:
        return None
    kind = type(value)
    if kind is tuple:  # the usual form, (1,) or (0, 2): checked at once
        given = cast("tuple[object, ...]", value)
        if all(type(entry) is int for entry in given) and len(set(given)) == len(given):
            return cast("tuple[int, ...]", given)
    elif kind is int:
        return (cast("int", value),)
    expected = "None, an int or an ordered sequence (tuple, list) of int (bool is not accepted)"
    entries: tuple[object, ...]
    if issubclass(kind, int | np.integer) and not issubclass(kind, bool | np.bool_):
        entries = (value,)
    elif issubclass(kind, Sequence) and not issubclass(kind, str | bytes | bytearray | memoryview):
        try:
            entries = tuple(cast("Sequence[object]", value))
        except Exception:
            raise TypeError(message(api, parameter, expected, value)) from None
    else:
        raise TypeError(message(api, parameter, expected, value))
    numbers: list[int] = []
    for index, entry in enumerate(entries):
        entry_kind = type(entry)
        if issubclass(entry_kind, bool | np.bool_) or not issubclass(entry_kind, int | np.integer):
            raise TypeError(
                message(api, f"{parameter}[{index}]", "an int (bool is not accepted)", entry)
            )
        number = operator.index(cast("Any", entry))
        if number in numbers:
            raise ValueError(
                message(api, parameter, f"free of duplicates ({number} appears twice)", value)
            )
        numbers.append(number)
    return tuple(numbers)


# jaxlib's C++ `pjit` takes the static positions as C ints; outside this range `jax.jit`
# raises its binding's own "incompatible function arguments" TypeError.
_C_INT = 2**31


def _check_c_int_positions(api: str, numbers: tuple[int, ...], value: object) -> None:
    """Checks that each static position fits the C int that jaxlib keeps it in."""
    if any(not -_C_INT <= number < _C_INT for number in numbers):
        raise ValueError(
            message(api, "static_argnums", "positions between -2**31 and 2**31 - 1", value)
        )


# `jax.Inline` (jax 0.11 and later): how far `jax.jit` inlines the function; ``None``
# where this JAX has it not (its ``inline`` takes a bool only).
INLINE_MODES: Any = getattr(jax, "Inline", None)


def check_inline(api: str, parameter: str, value: object) -> bool | enum.Enum:
    """A bool, as `check_bool`, or a `jax.Inline` member where the running JAX has it."""
    if INLINE_MODES is not None and issubclass(type(value), INLINE_MODES):  # type(): no __class__
        return cast("enum.Enum", value)
    if not issubclass(type(value), bool | np.bool_):
        expected = (
            "a bool or a jax.Inline"
            if INLINE_MODES is not None
            else f"a bool (jax {jax.__version__} has no jax.Inline; jax 0.11 added it)"
        )
        raise TypeError(message(api, parameter, expected, value))
    return bool(cast("Any", value))


def check_device(api: str, parameter: str, value: object) -> Any:
    """``None`` or a `jax.Device` (`jax.jit` takes a string and fails on first call)."""
    if value is not None and not issubclass(type(value), _DEVICE_TYPE):
        raise TypeError(message(api, parameter, "a jax.Device or None", value))
    return value


def check_backend(api: str, parameter: str, value: object) -> str | None:
    """``None`` or the name of a backend JAX can run on here."""
    if value is None:
        return None
    if not issubclass(type(value), str):
        raise TypeError(message(api, parameter, "a str (a platform name such as 'cpu')", value))
    name = str.__str__(cast("str", value))
    try:
        cast("Any", jax).devices(name)
    except Exception as error:  # RuntimeError: unknown, or failed to initialize
        raise ValueError(
            message(api, parameter, f"a backend JAX can run on here ({error})", name)
        ) from None
    return name


def check_compiler_options(api: str, parameter: str, value: object) -> dict[str, Any] | None:
    """``None`` or a mapping from option names (``str``) to values."""
    if value is None:
        return None
    if not issubclass(type(value), Mapping):
        raise TypeError(message(api, parameter, "a dict of str to values, or None", value))
    try:
        items = tuple(cast("Mapping[object, object]", value).items())
    except Exception:
        raise TypeError(
            message(api, parameter, "a dict of str to values, or None", value)
        ) from None
    options: dict[str, Any] = {}
    for key, item in items:
        if not issubclass(type(key), str):
            raise TypeError(message(api, f"{parameter} key", "a str", key))
        name = str.__str__(cast("str", key))
        try:  # jax.jit keys its cache on the options
            hash(item)
        except Exception:
            raise TypeError(
                message(api, f"{parameter}[{name!r}]", "hashable (a str, bool, int)", item)
            ) from None
        options[name] = item
    return options


def _positional(signature: inspect.Signature) -> tuple[tuple[inspect.Parameter, ...], bool]:
    """The positional parameters of ``signature``, and whether it takes ``*args``."""
    parameters = signature.parameters.values()
    star = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    return tuple(p for p in parameters if p.kind in _POSITIONAL), star


_Positional = tuple[tuple[inspect.Parameter, ...], bool]


def _check_range(
    api: str,
    parameter: str,
    numbers: tuple[int, ...],
    signature: inspect.Signature,
    shape: _Positional,
) -> None:
    """As `jax.jit`: every number names a positional parameter (any, with ``*args``)."""
    positional, star = shape
    if star:
        return
    count = len(positional)
    for number in numbers:
        if not -count <= number < count:
            raise ValueError(
                f"{api}: {parameter} must index positional parameters of function "
                f"(0 to {count - 1}, or -{count} to -1 from the end); got {number} in "
                f"{numbers!r}, and function{signature} takes {count} positional "
                f"argument{'s' if count != 1 else ''}."
            )


def _infer(
    signature: inspect.Signature | None,
    numbers: tuple[int, ...] | None,
    names: tuple[str, ...] | None,
) -> Statics:
    """`jax.jit`'s ``infer_argnums_and_argnames``: the missing half from the other."""
    if numbers is None and names is None:
        return NO_STATICS
    if signature is None or (numbers is not None and names is not None):
        return Statics(numbers or (), names or ())
    parameters = tuple(signature.parameters.items())
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    if numbers is None:
        assert names is not None
        found = tuple(i for i, (k, p) in enumerate(parameters) if p.kind == kind and k in names)
        return Statics(found, names)
    inferred = tuple(k for i, (k, p) in enumerate(parameters) if p.kind == kind and i in numbers)
    return Statics(numbers, inferred)


def _parameters(shape: _Positional | None, statics: Statics) -> set[object]:
    """The parameters a spec makes static or donated: names, else positions in ``*args``."""
    chosen: set[object] = set(statics.argnames)
    if shape is None:
        chosen.update(statics.argnums)
        return chosen
    positional, star = shape
    count = len(positional)
    for number in statics.argnums:
        index = number + count if number < 0 and not star else number
        if 0 <= index < count:
            chosen.add(positional[index].name)
        else:
            chosen.add(number)
    return chosen


def _check_in_shardings(api: str, value: object, shape: _Positional, statics: Statics) -> None:
    """A tuple (or list) of shardings has one entry per positional argument that is
    not static, as `jax.jit` will require on every call."""
    if type(value) not in (tuple, list):  # a PartitionSpec is a tuple subclass: one sharding
        return
    positional, star = shape
    if star:
        return
    count = len(positional)
    dynamic = [p for i, p in enumerate(positional) if not statics.positional(i, count)]
    required = sum(1 for p in dynamic if p.default is inspect.Parameter.empty)
    given = len(cast("Sequence[object]", value))
    if not required <= given <= len(dynamic):
        names = ", ".join(p.name for p in dynamic) or "none"
        wanted = str(len(dynamic)) if required == len(dynamic) else f"{required} to {len(dynamic)}"
        raise ValueError(
            f"{api}: in_shardings must have one entry per positional argument that is not "
            f"static ({wanted}: {names}); got {given} in {describe(value)}."
        )


AsChecked = Callable[[str, Mapping[str, Any]], dict[str, Any]]
"""``as_checked(api, values)``: checks the options `jax.jit` is given as their checker
(``check(api, name, value)``) returns them, and returns those not at their defaults
(`options.as_checked`)."""


def parse(
    api: str,
    signature: LazySignature,
    values: Mapping[str, Any],
    mesh: Mesh | None,
    as_checked: AsChecked,
) -> Parsed:
    """Validates every `jax.jit` option in ``values`` (an object's fields, by name) and
    returns what the object keeps and passes on.

    ``signature`` is computed only when an option needs it (argnames or argnums
    to check, an ``in_shardings`` tuple to count). The options `as_checked` checks are
    checked after the argnames and argnums, and given to `jax.jit` as their checker
    returns them, where that is not their default.
    """
    static_argnames, donate_argnames = values["static_argnames"], values["donate_argnames"]
    # jax.jit's own default for the names is None: given (by code that forwards jax.jit's
    # options), it means what leaving them out means, so JAX still infers them from argnums.
    if static_argnames is None:
        static_argnames = NO_NAMES
    if donate_argnames is None:
        donate_argnames = NO_NAMES
    static_argnums, donate_argnums = values["static_argnums"], values["donate_argnums"]
    in_shardings, out_shardings = values["in_shardings"], values["out_shardings"]
    static = (
        ()
        if static_argnames is NO_NAMES
        else check_argnames(api, "static_argnames", static_argnames)
    )
    donate = (
        ()
        if donate_argnames is NO_NAMES
        else check_argnames(api, "donate_argnames", donate_argnames)
    )
    if static and donate:
        check_disjoint(api, static, donate)
    static_nums = check_argnums(api, "static_argnums", static_argnums)
    if static_nums is not None:
        _check_c_int_positions(api, static_nums, static_argnums)
    donate_nums = check_argnums(api, "donate_argnums", donate_argnums)
    checked = as_checked(api, values)
    if mesh is not None and ("device" in checked or "backend" in checked):
        which = "device" if "device" in checked else "backend"
        raise ValueError(
            message(
                api,
                which,
                "None when mesh is given (jax.jit refuses a device or backend under a mesh; "
                "place the inputs on the mesh instead)",
                checked[which],
            )
        )
    # What jax.jit gets for the names: None where the user left the page's default
    # (so JAX infers names from argnums), or gave () with no argnums (the same meaning,
    # and an explicit () makes jax.jit resolve names at wrap time: ~7 us per object).
    static_given = static_argnames is not NO_NAMES and (static or static_nums is not None)
    donate_given = donate_argnames is not NO_NAMES and (donate or donate_nums is not None)
    static_for_jax = static if static_given else None
    donate_for_jax = donate if donate_given else None
    known: inspect.Signature | None = None
    needs_signature = static or donate or static_nums or donate_nums
    if needs_signature or type(in_shardings) in (tuple, list):
        known = signature.get()
    # What follows from the signature and the numbers and names alone (all plain tuples of
    # str and int by now): checked once per function and values while it lives.
    key = (static, donate, static_nums, donate_nums, static_for_jax, donate_for_jax)
    derived = None if known is None else signature.derived()
    found = None if derived is None else derived.get(key)
    if found is None:
        found = _by_signature(api, known, key)
        if derived is not None:
            derived[key] = found
    shape, statics, donated = found
    if shape is not None and in_shardings is not UNSPECIFIED:
        _check_in_shardings(api, in_shardings, shape, statics)
    kwargs: dict[str, Any] = {}
    if static_nums is not None:
        kwargs["static_argnums"] = static_nums
    if static_for_jax is not None:
        kwargs["static_argnames"] = static_for_jax
    if donate_nums is not None:
        kwargs["donate_argnums"] = donate_nums
    if donate_for_jax is not None:
        kwargs["donate_argnames"] = donate_for_jax
    if in_shardings is not UNSPECIFIED:
        kwargs["in_shardings"] = in_shardings
    if out_shardings is not UNSPECIFIED:
        kwargs["out_shardings"] = out_shardings
    if checked:
        kwargs.update(checked)
    inlined = checked.get("inline", False)
    return Parsed(static, donate, static_nums, donate_nums, statics, kwargs, inlined, donated)


_Names = tuple[str, ...]
_Numbers = tuple[int, ...] | None


def _by_signature(
    api: str,
    known: inspect.Signature | None,
    key: tuple[_Names, _Names, _Numbers, _Numbers, _Names | None, _Names | None],
) -> tuple[_Positional | None, Statics, Statics]:
    """Checks the argnames and argnums against the signature (names it accepts, numbers
    in range, nothing both static and donated); returns the positional parameters, the
    statics and the donated arguments, the names inferred from numbers and the numbers
    from names."""
    static, donate, static_nums, donate_nums, static_for_jax, donate_for_jax = key
    if static or donate:
        check_accepted_names(api, "static_argnames", static, known)
        check_accepted_names(api, "donate_argnames", donate, known)
    shape = None if known is None else _positional(known)
    if known is not None and shape is not None:
        if static_nums:
            _check_range(api, "static_argnums", static_nums, known, shape)
        if donate_nums:
            _check_range(api, "donate_argnums", donate_nums, known, shape)
    statics = _infer(known, static_nums, static_for_jax)
    donated = _infer(known, donate_nums, donate_for_jax)
    both: set[object] = set()
    if statics != NO_STATICS and donated != NO_STATICS:
        both = _parameters(shape, statics) & _parameters(shape, donated)
    if both:
        shown = tuple(sorted(str(name) for name in both))
        raise ValueError(
            f"{api}: static and donated arguments must not overlap; got {shown!r} in both "
            f"(static_argnums={static_nums!r}, static_argnames={static!r}, "
            f"donate_argnums={donate_nums!r}, donate_argnames={donate!r})."
        )
    return shape, statics, donated


def jit(api: str, function: Any, kwargs: dict[str, Any], jit: Any) -> Any:
    """``jit(function, **kwargs)``, where ``jit`` is ``jax.jit`` as the object found it
    when built. Its own `TypeError`/`ValueError` (a malformed sharding) escape as the
    same type, prefixed with ``api`` as tinax's messages are; anything else it lets
    escape (an odd object in a sharding tree) is a `TypeError`."""
    if not kwargs:
        return jit(function)
    try:
        return jit(function, **kwargs)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{api}: {error}") from None
    except Exception as error:
        try:
            reason = f"{type(error).__name__}: {error}"
        except Exception:
            reason = type(error).__name__
        shown = ", ".join(f"{key}={describe(value)}" for key, value in kwargs.items())
        raise TypeError(
            f"{api}: jax.jit must accept the options; got {shown}, and it raised {reason}."
        ) from None
