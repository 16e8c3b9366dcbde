"""What a difference between two traces is (`Difference`), its kinds, and the usual fix
for each kind (`HINTS`)."""

from __future__ import annotations

import numbers

import attrs

from tinax._src.diagnosis import edge_hints

_SAME_ARGUMENTS = (
    "pass the same arguments on every call (to JAX, a default passed explicitly is a new argument)"
)
HINTS = {
    "mesh": "the ambient mesh is part of JAX's cache key: call under one mesh, "
    "or bind one with mesh=",
    "config": "a JAX config option in the trace cache key changed: set it once, around every call",
    "shape": "every new shape is a new trace: pad or bucket inputs to a few fixed shapes "
    "(declare them with buckets= and pad with tinax.jit.pad_to_bucket; pad or drop a last, "
    "partial batch)",
    "dtype": "cast inputs to one dtype before the call",
    "weak type": "pass the scalar the same way on every call: always a Python number, "
    "or always an array of one dtype (jnp.float32(lr), not jnp.asarray(lr))",
    "sharding": "give inputs one sharding before the call (jax.device_put or jax.sharding.reshard)",
    "type": "pass inputs of one abstract type (memory space, varying manual axes)",
    "static value": "every new value of a static argument is a new trace: keep it fixed, "
    "or, where the function only computes with it (no if, no shape), do not mark it static "
    "and pass it as an array",
    "static equality": "JAX finds static arguments by ==: define __eq__ (and __hash__) "
    "by value (e.g. @dataclass(frozen=True)), or pass the same object on every call",
    "static field": "a pytree node's static (metadata) field is part of the tree structure: "
    "keep it fixed, or, where the function only computes with it (no if, no shape), make it "
    "an array data field",
    "tree structure": "keep the tree structure fixed between calls "
    "(same keys, same lengths, None in the same places)",
    "passing": "pass each argument the same way on every call, positionally or by keyword: "
    "JAX keys its cache on how each argument was passed, not only on its value",
    "key": edge_hints.KEY_FIX,
    "new argument": _SAME_ARGUMENTS,
    "missing argument": _SAME_ARGUMENTS,
}

REBUILT_CALLABLE = (
    "a function is equal only to itself and this one is new: build it (the optax "
    "transformation, the lambda) once, outside the step, and pass that same object on every call"
)
STATIC_HASH = (
    "JAX (0.11 and later) finds static arguments by hash, then ==: define __hash__ "
    "to agree with __eq__ (equal values hash alike; @dataclass(frozen=True) does both)"
)
NOT_SELF_EQUAL = (
    "NaN is never equal to itself, so every new NaN is a new trace: mark a missing value "
    "with None or a flag, or pass the number as an array (jnp.asarray) to trace it"
)
STATIC_LEAF = (
    "with static_nonarrays=True each new non-array value is a new trace: keep functions and "
    "configs fixed, or pass a number the function only computes with as an array (jnp.asarray)"
)
MODE_FLAG = (
    "a bool read by a Python if cannot be traced (TracerBoolConversionError): allow a trace "
    "per mode (max_traces=2, twice what one mode needs), or wrap the function once per mode"
)
_PER_VALUE = "allow a trace per value (max_traces at least the count of values)"
_NOT_A_NUMBER = {  # the fix for a value no array stands for: a string, a function, a config
    "static value": "every new value of a static argument is a new trace: keep it fixed, "
    f"or {_PER_VALUE}",
    "static field": "a pytree node's static (metadata) field is part of the tree structure: "
    f"keep it fixed, or {_PER_VALUE}",
    "static leaf": "with static_nonarrays=True each new non-array value is a new trace: keep "
    f"functions and configs fixed, or {_PER_VALUE}",
}


def _flag(value: object) -> bool:
    return isinstance(value, bool) or value is None


def _number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Number)


def static_fix(kind: str, old: object, new: object, *, leaf: bool = False) -> str | None:
    """The fix for a static value (argument, field or ``static_nonarrays`` leaf) that
    changed from ``old`` to ``new``; ``None`` where the usual fix for ``kind`` is true.

    Only a number can become an array the function computes with. A bool (or
    ``None`` against a bool) is taken for a mode flag: equinox's ``inference``,
    flax's ``use_running_average`` and ``deterministic`` are read by a Python
    ``if``, which a traced bool fails. Anything else gets a trace per value.
    """
    if _flag(old) and _flag(new) and (isinstance(old, bool) or isinstance(new, bool)):
        return MODE_FLAG
    if _number(old) and _number(new):
        return STATIC_LEAF if leaf else None
    return _NOT_A_NUMBER.get("static leaf" if leaf else kind)


MAX_DEPTH = 12  # how deep static values and tree nodes are searched for the difference


@attrs.frozen
class Difference:
    """One difference between an earlier trace and a new call.

    Attributes:
        path: The argument, leaf or field that changed, e.g. ``batch['x']`` or
            ``config.activation``, or ``ambient mesh`` / ``jax config <option>``.
        before: Its value in the earlier trace (abstract value, static value
            or tree node), as text.
        after: Its value in the new call, as text.
        kinds: What changed, e.g. ``("shape",)`` or ``("dtype", "weak type")``;
            one of ``shape``, ``dtype``, ``weak type``, ``sharding``, ``type``,
            ``static value``, ``static equality``, ``static field``,
            ``tree structure``, ``passing``, ``new argument``,
            ``missing argument``, ``mesh``, ``config``, ``key`` (a typed PRNG key
            against raw key data, or another PRNG implementation).
        detail: The parenthesized description in the printed line.
        fix: A fix specific to this difference, where there is one (else the
            usual fix for its kind, `hint`, applies).
        cause: ``(before, after, detail)`` of a change that can have one cause
            for many leaves (the same dtype cast, the same weak-type flip, the
            same move onto a mesh), which the report groups; else ``None``.
    """

    path: str
    before: str
    after: str
    kinds: tuple[str, ...]
    detail: str
    fix: str | None = attrs.field(default=None, kw_only=True)
    cause: tuple[str, ...] | None = attrs.field(default=None, kw_only=True, repr=False)

    @property
    def hint(self) -> str:
        """The fix for this difference: its own, else the usual one for its first kind."""
        return self.fix or HINTS[self.kinds[0]]

    def __str__(self) -> str:
        if self.before == ABSENT:
            return f"{self.path}: added ({self.after})"
        if self.after == ABSENT:
            return f"{self.path}: removed ({self.before})"
        return f"{self.path}: {self.before} -> {self.after} ({self.detail})"


ABSENT = "(absent)"
