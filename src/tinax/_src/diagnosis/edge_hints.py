"""Differences whose usual fix points the wrong way: PRNG keys, Python scalars.

A typed PRNG key and raw key data (``jax.random.PRNGKey``'s ``uint32[2]``)
differ in shape and dtype, but neither padding nor a cast makes them one: the
fix is one key API. Two Python scalars of different types (``1`` and ``1.0``)
differ in dtype, but the user never cast anything: they wrote another literal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tinax._src.diagnosis.record import Leaf

Found = tuple[tuple[str, ...], str, str]  # (kinds, detail, fix) of a Difference

KEY_FIX = (
    "use one key API on every call: typed keys (jax.random.key) everywhere, or raw key "
    "data everywhere (jax.random.key_data(key) where uint32 data is needed)"
)
IMPL_FIX = (
    "make every key with one PRNG implementation: jax.random.key(seed, impl=...) with "
    "the same impl (or the jax_default_prng_impl config) on every call"
)


def _is_key(dtype: str | None) -> bool:
    return dtype is not None and dtype.startswith("key<")


def key_difference(old: Leaf, new: Leaf) -> Found | None:
    """``(kinds, detail, fix)`` for two leaves of which at least one is a typed PRNG
    key, or ``None`` if neither is one."""
    if not (_is_key(old.dtype) or _is_key(new.dtype)):
        return None
    if _is_key(old.dtype) and _is_key(new.dtype):
        if old.dtype != new.dtype:  # threefry against rbg: another implementation
            detail = f"key: PRNG implementation {old.dtype} -> {new.dtype}"
            return ("key",), detail, IMPL_FIX
        return None  # same implementation: shapes and the rest differ as for arrays
    typed, raw = (old, new) if _is_key(old.dtype) else (new, old)
    order = "a typed key -> raw key data" if typed is old else "raw key data -> a typed key"
    detail = f"key: {order} ({typed.text} vs {raw.text})"
    return ("key",), detail, KEY_FIX


_PYTHON = {"b": "bool", "i": "int", "u": "int", "f": "float", "c": "complex"}


def python_scalar(dtype: str | None) -> str:
    """The Python type a weak-typed scalar of this dtype came from."""
    return _PYTHON.get((dtype or "f")[0], "float")


def weak_scalars_difference(old: Leaf, new: Leaf) -> Found | None:
    """``(kinds, detail, fix)`` for two scalars of which at least one is a Python number
    and neither a typed number: literals of two types (``1`` and ``1.0``, ``True``
    and ``1``); ``None`` where that is not the case."""
    if old.dtype == new.dtype or old.shape != new.shape or old.shape != ():
        return None
    if not (old.weak_type or new.weak_type):
        return None
    if not (old.weak_type or old.dtype == "bool") or not (new.weak_type or new.dtype == "bool"):
        return None  # a typed number against a Python scalar: a cast is the fix
    before, after = python_scalar(old.dtype), python_scalar(new.dtype)
    if before == after:
        return None
    detail = (
        f"dtype: {_scalar_text(old)} -> {_scalar_text(new)} (weak types {old.dtype}, {new.dtype})"
        if old.weak_type and new.weak_type
        else f"dtype: {_scalar_text(old)} -> {_scalar_text(new)}"
    )
    if old.weak_type and new.weak_type:
        example = "1.0, not 1" if "float" in (before, after) else "one kind of literal"
        fix = (
            f"a Python {before} and a Python {after} are two weak types: pass one Python type "
            f"on every call ({example}), or an array of one dtype"
        )
    else:
        fix = (
            "a bool is typed bool[] (never weak), a Python number is weak-typed: pass one "
            "type on every call (True/False or 0/1), or an array of one dtype"
        )
    return ("dtype",), detail, fix


def _scalar_text(leaf: Leaf) -> str:
    """A scalar as the user wrote it: a Python number (weak-typed), or a bool, which
    JAX types strongly whether it is Python's ``True`` or an array."""
    if leaf.weak_type:
        return f"a Python {python_scalar(leaf.dtype)}"
    return "a bool (True/False or a bool array)"


def weak_flip(old: Leaf, new: Leaf) -> str:
    """What a weak-type change says: a Python scalar on one side, and on the other a
    typed value, which may be an array or a NumPy scalar (a trace cannot tell)."""
    scalar = python_scalar(old.dtype if old.weak_type else new.dtype)
    typed = new if old.weak_type else old
    value = f"a typed {typed.dtype} value (an array or a NumPy scalar)"
    if old.weak_type:
        return f"a Python {scalar} -> {value}"
    return f"{value} -> a Python {scalar}"
