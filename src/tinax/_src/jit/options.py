"""Every keyword option of `bounded_jit` and `batched_jit`, declared once.

One row per option: its name, its default (the classes' field default and the
factories' keyword default, compared by identity), the function that checks it,
what it is given to (`jax.jit`, `jax.vmap`, or neither: tinax's own), whether
`jax.jit` checks it itself when it wraps, the classes that take it, and whether
`jax.jit` is given it as its checker returns it. The rows are in the order the
checks run, which is the order in which a user who gets several options wrong hears
of them (``function`` is checked before all of them).

Derived from the rows: the factories' options dicts (`given`), the page's default
``()`` for the argnames (`page_defaults`), the shortcut for objects that leave every
`jax.jit` and model option at its default (`all_defaults`), the options that
make the `jax.jit` object be built at wrap time (`CHECKED_BY_JAX`), and the check
and the passing on of every option `jax.jit` is given as checked (`as_checked`). The
factories and the classes spell the options out (for the type checker and the page,
in the page's order: `SIGNATURES`); ``tests/test_jit_options.py`` holds them, each
row's checker and the order of the checks to these rows.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple, cast

from tinax._src.buckets import declared
from tinax._src.core import statics, validation
from tinax._src.jit import jax_options
from tinax._src.models import nonarrays
from tinax._src.models.nnx import checks as nnx_checks

Api = Literal["BoundedJit", "BatchedJit"]
Kind = Literal["budget", "jax.vmap", "jax.jit", "model"]

REQUIRED: object = inspect.Parameter.empty
"""The default of an option without one (``max_traces``)."""

BOTH: tuple[Api, ...] = ("BoundedJit", "BatchedJit")
BATCHED: tuple[Api, ...] = ("BatchedJit",)


class Option(NamedTuple):
    """One keyword option of the classes and factories.

    Attributes:
        name: The keyword.
        default: The default object (the classes' and the factories' own, told apart
            by identity from a value the user passes).
        check: The function that checks it, or ``None`` where JAX's own checks do.
        kind: What it is given to: ``"jax.jit"``, ``"jax.vmap"``, the budget
            (``"budget"``: the count, its mesh and its policy), or the call's
            convention (``"model"``: how a model object reaches `jax.jit`).
        checked_by_jax: `jax.jit` checks it when it wraps: an object given it builds
            its `jax.jit` object at wrap time, so that JAX's errors are wrap-time errors.
        classes: The classes (and their factories) that take it.
        as_checked: `jax.jit` is given it as ``check(api, name, value)`` returns it, where that
            is not ``default``: the parse runs its checker in the row's place
            (`jax_options.parse`, `as_checked`), and nothing else is written for it.
    """

    name: str
    default: object
    check: Callable[..., object] | None
    kind: Kind
    checked_by_jax: bool = False
    classes: tuple[Api, ...] = BOTH
    as_checked: bool = False


# In the order of the checks (after `function`'s). A jax.jit option is passed on only
# where given; a model option changes how the call reaches jax.jit.
OPTIONS: tuple[Option, ...] = (
    Option("axis_size", None, validation.check_axis_size, "jax.vmap", classes=BATCHED),
    Option("max_traces", REQUIRED, validation.check_max_traces, "budget"),
    Option("mesh", None, validation.check_mesh, "budget"),
    Option("on_exceed", None, validation.check_on_exceed, "budget"),
    Option("buckets", None, declared.check, "budget"),
    Option("axis_name", None, validation.check_vmap_options, "jax.vmap", classes=BATCHED),
    Option("spmd_axis_name", None, validation.check_vmap_options, "jax.vmap", classes=BATCHED),
    Option("sum_match", False, validation.check_vmap_options, "jax.vmap", classes=BATCHED),
    Option("propagate_updates", None, nnx_checks.check_propagate_updates, "model"),
    Option("static_argnames", statics.NO_NAMES, validation.check_argnames, "jax.jit"),
    Option("donate_argnames", statics.NO_NAMES, validation.check_argnames, "jax.jit"),
    Option("static_argnums", None, jax_options.check_argnums, "jax.jit"),
    Option("donate_argnums", None, jax_options.check_argnums, "jax.jit"),
    # Given to jax.jit as checked (where not the default): the row and its checker are all.
    Option("keep_unused", False, statics.check_bool, "jax.jit", as_checked=True),
    Option("inline", False, jax_options.check_inline, "jax.jit", as_checked=True),
    Option(
        "device", None, jax_options.check_device, "jax.jit", checked_by_jax=True, as_checked=True
    ),
    Option(
        "backend", None, jax_options.check_backend, "jax.jit", checked_by_jax=True, as_checked=True
    ),
    Option(
        "compiler_options", None, jax_options.check_compiler_options, "jax.jit", as_checked=True
    ),
    # Counted against the signature here; its trees checked by jax.jit when it wraps.
    Option("in_shardings", statics.UNSPECIFIED, None, "jax.jit", checked_by_jax=True),
    Option("out_shardings", statics.UNSPECIFIED, None, "jax.jit", checked_by_jax=True),
    Option("static_nonarrays", False, nonarrays.check, "model"),
    # jax.vmap's own checks, when the class builds it.
    Option("in_axes", 0, None, "jax.vmap", classes=BATCHED),
    Option("out_axes", 0, None, "jax.vmap", classes=BATCHED),
)

BY_NAME: Mapping[str, Option] = {option.name: option for option in OPTIONS}

# The keywords of each factory (and the fields of each class, after ``function``), in
# the page's order: the published page's parameters first, then tinax's extensions.
SIGNATURES: Mapping[Api, tuple[str, ...]] = {
    "BoundedJit": (
        "max_traces",
        "static_argnames",
        "donate_argnames",
        "mesh",
        "on_exceed",
        "static_argnums",
        "donate_argnums",
        "in_shardings",
        "out_shardings",
        "keep_unused",
        "device",
        "backend",
        "inline",
        "compiler_options",
        "static_nonarrays",
        "propagate_updates",
        "buckets",
    ),
    "BatchedJit": (
        "in_axes",
        "out_axes",
        "axis_size",
        "max_traces",
        "mesh",
        "on_exceed",
        "axis_name",
        "spmd_axis_name",
        "sum_match",
        "static_argnums",
        "static_argnames",
        "donate_argnums",
        "donate_argnames",
        "in_shardings",
        "out_shardings",
        "keep_unused",
        "device",
        "backend",
        "inline",
        "compiler_options",
        "static_nonarrays",
        "propagate_updates",
        "buckets",
    ),
}

# The options `jax.jit` is given, and the model options: both classes take each, and an
# object that leaves all of them at their defaults skips their parse (`all_defaults`).
PARSED: tuple[str, ...] = tuple(o.name for o in OPTIONS if o.kind in ("jax.jit", "model"))

# The options whose values jax.jit checks itself when it wraps (sharding trees, device and
# backend, and its warnings for them): an object given one builds its jax.jit at wrap time.
CHECKED_BY_JAX: frozenset[str] = frozenset(o.name for o in OPTIONS if o.checked_by_jax)

_PARSED_DEFAULTS: tuple[object, ...] = tuple(BY_NAME[name].default for name in PARSED)


def _identity_chain(names: tuple[str, ...], defaults: tuple[object, ...]) -> Any:
    """``values[name] is default and ...`` over ``names``, written out once, as attrs writes
    its ``__init__``: a wrap reads each option once, with no loop (about 1 us of a wrap
    less than ``all(map(operator.is_, ...))``)."""
    namespace = {f"_{index}": default for index, default in enumerate(defaults)}
    tests = " and ".join(f"values[{name!r}] is _{index}" for index, name in enumerate(names))
    exec(f"def all_defaults(values):\n    return {tests}\n", namespace)
    return namespace["all_defaults"]


# Whether every `jax.jit` and model option in ``values`` (an object's fields) is its
# default object: then there is nothing to check (about 9 us of a wrap saved).
all_defaults: Callable[[Mapping[str, object]], bool] = _identity_chain(PARSED, _PARSED_DEFAULTS)


def _checked_in_turn(rows: tuple[Option, ...], order: tuple[str, ...]) -> Any:
    """``as_checked(api, values)``: runs the checker of each row on its value where it is
    not the row's default object, in the rows' order, and returns the values that are not
    their defaults, in ``order`` (what `jax.jit` is given them in). Written out once, as
    `_identity_chain`: no loop on a wrap."""
    namespace: dict[str, object] = {}
    lines = ["def as_checked(api, values):"]
    for index, row in enumerate(rows):
        namespace[f"_check{index}"], namespace[f"_default{index}"] = row.check, row.default
        lines.append(f"    value{index} = values[{row.name!r}]")
        lines.append(f"    if value{index} is not _default{index}:  # the default is valid")
        lines.append(f"        value{index} = _check{index}(api, {row.name!r}, value{index})")
    lines.append("    checked = {}")
    for name in order:
        index = next(index for index, row in enumerate(rows) if row.name == name)
        lines.append(f"    if value{index} is not _default{index}:")
        lines.append(f"        checked[{name!r}] = value{index}")
    lines.append("    return checked")
    exec("\n".join(lines), namespace)
    return namespace["as_checked"]


# The options jax.jit is given as their checker returns them (`Option.as_checked`): each
# checked in its row's place, and passed on in the factories' order (jax.jit's own) where
# not its default (`jax_options.parse`).
_AS_CHECKED_ROWS = tuple(o for o in OPTIONS if o.as_checked)
as_checked: jax_options.AsChecked = _checked_in_turn(
    _AS_CHECKED_ROWS,
    tuple(name for name in SIGNATURES["BoundedJit"] if BY_NAME[name].as_checked),
)


def given(api: Api, values: Mapping[str, Any]) -> dict[str, Any]:
    """The options of a factory's call (its ``locals()``), to build its class with
    (the decorator form: the function comes later)."""
    return {name: values[name] for name in SIGNATURES[api]}


def page_defaults(factory: Callable[..., Any]) -> None:
    """Gives ``factory``'s argnames options the page's default ``()`` as an object of
    its own (`statics.NO_NAMES`), so that a ``()`` the user passes is told apart:
    next to argnums, `jax.jit` infers names from numbers only when none were given."""
    defaults: dict[str, Any] = cast("Any", factory).__kwdefaults__
    for name in defaults:
        if BY_NAME[name].default is statics.NO_NAMES:
            defaults[name] = statics.NO_NAMES


class _Decorate:
    """The default of a factory's ``function``: no function yet, so the factory returns
    a decorator (``@bounded_jit(max_traces=1)``), as ``jax.jit(**options)`` does."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DECORATE"


DECORATE: Any = _Decorate()
