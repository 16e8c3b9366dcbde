"""Calls JAX rejects: the error a call would raise whatever the budget says.

A call that cannot succeed (an argument missing or extra, a batch whose sizes
disagree, an unhashable static value, a leaf that is not an array) must raise
the error JAX raises for it, with the budget spent or not: a budget error in
its place would send the user after a retrace that never was.

The check runs the object's own pipeline (the `jax.vmap` of a `BatchedJit`,
the function's signature) around a stand-in for the function that binds the
arguments and stops: JAX's checks run in JAX's order, and raise JAX's
exceptions; the user's function never runs. It costs a walk of the arguments,
and runs only where a budget would refuse or warn, and in ``explain``.

Two of JAX's errors are told in tinax's words, on JAX's error path only: a leaf
`jax.jit` cannot trace (`HintedLeaf`, the object `jax.jit` is given: JAX's
slow path formats it into its message, and that is where tinax speaks), and an
unhashable static argument in ``explain`` and the forwarded methods
(`unhashable_static`).
"""

from __future__ import annotations

import functools
import re
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from tinax._src import private
from tinax._src.core.validation import LazySignature
from tinax._src.diagnosis.record import value_text

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class _Fits(Exception):
    """Raised by the stand-in when the arguments bind: everything before the body passed."""


def _plain(function: Callable[..., Any]) -> bool:
    """A ``def`` or ``lambda`` whose signature nothing overrides: calling it with
    arguments that do not bind raises Python's own `TypeError` before its body runs."""
    if type(function) is not types.FunctionType:
        return False
    own = function.__dict__
    return "__signature__" not in own and "__wrapped__" not in own


def stand_in(
    function: Callable[..., Any], signature: LazySignature, *, placements: bool = False
) -> Callable[..., Any]:
    """A callable that binds its arguments as ``function`` would, then raises `_Fits`.

    Arguments that do not bind raise the `TypeError` calling ``function`` raises:
    Python's own for a plain function (its body never starts), else
    `inspect.Signature.bind`'s. With ``placements`` (the stand-in that ``explain``
    jits and traces), arguments that bind but are placed against the jit's
    ``in_shardings``, or on devices that disagree, raise JAX's `ValueError`
    (`raise_if_misplaced`); a call checks its placements in its own trace.
    """

    def check(*args: Any, **kwargs: Any) -> Any:
        known = signature.get()
        if known is not None:
            try:
                known.bind(*args, **kwargs)
            except TypeError:
                if _plain(function):
                    function(*args, **kwargs)  # raises before the body: arguments do not bind
                raise
        if placements:
            raise_if_misplaced(sys._getframe(1), lowering_only=False)  # pyright: ignore[reportPrivateUsage]
        raise _Fits

    wrapper: Any = check
    try:
        wrapper.__name__ = function.__name__
        wrapper.__qualname__ = function.__qualname__
    except Exception:
        pass
    # JAX names the arguments in its errors from the signature (built on first need only).
    known = signature.get()
    if known is not None:
        wrapper.__signature__ = known
    return check


def raise_if_misplaced(frame: types.FrameType | None, *, lowering_only: bool) -> None:
    """Inside a trace `jax.jit` makes: raises JAX's `ValueError` for arguments placed
    against the jit's ``in_shardings`` or on devices that disagree, which JAX would
    raise after the trace (`private.misplaced`); returns if they fit.

    Raised before the function's body, such a call is no trace: JAX caches nothing
    for it, and a later call of its abstract signature, placed to fit, traces
    and counts. ``lowering_only``: only where the trace is a call's or
    ``lower``'s (a trace made by ``trace`` or ``eval_shape`` fits anywhere).
    """
    error = private.misplaced(frame, lowering_only=lowering_only)
    if error is not None:
        raise error


def check_in_trace(traced_stand_in: Callable[..., Any], args: Any, kwargs: Any) -> None:
    """Inside a trace: raises the error the call would raise before the function's body
    (binding, `jax.vmap`'s axis checks) or after the trace (a deleted array: JAX
    checks the call's arrays once traced); returns if the call would succeed."""
    try:
        traced_stand_in(*args, **kwargs)
    except _Fits:
        pass
    _raise_if_deleted()


def _raise_if_deleted() -> None:
    """Raises JAX's `RuntimeError` for a deleted (donated) array among the arguments of
    the `jax.jit` call being traced, read from that call's frame; a trace made by
    ``lower``/``trace``/``eval_shape`` has none to read, and is let through."""
    found = private.jit_call(sys._getframe(1))  # pyright: ignore[reportPrivateUsage]
    if found is None:
        return
    tree_util: Any = jax.tree_util
    call = (found.args, found.kwargs)
    for leaf in tree_util.tree_leaves(call):
        try:
            gone = isinstance(leaf, jax.Array) and leaf.is_deleted()
        except Exception:
            gone = False
        if gone:
            shape = jax.typeof(leaf).str_short()
            raise RuntimeError(f"Array has been deleted with shape={shape}.")


def rejection(
    jitted_stand_in: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> BaseException | None:
    """Outside a trace (``explain``): the exception the call would raise before the
    function's body, from JAX's own checks (static values hashed, leaves that are not
    arrays, binding, `jax.vmap`'s axis checks), or ``None`` if it would reach it."""
    try:
        jitted_stand_in.eval_shape(*args, **kwargs)
    except _Fits:
        return None
    except Exception as error:
        return error
    return None


def deleted(arguments: Sequence[tuple[str, Any]]) -> str | None:
    """The ``raises`` text of a call with a deleted array among ``(name, value)``
    arguments (donated to an earlier call, or deleted), or ``None``: JAX refuses
    it, with a `RuntimeError` where it traces and a `ValueError` where it runs a
    compiled call, so both are named."""
    tree_util: Any = jax.tree_util
    for name, value in arguments:
        for path, leaf in tree_util.tree_flatten_with_path(value)[0]:
            is_deleted = getattr(leaf, "is_deleted", None)
            try:
                gone = isinstance(leaf, jax.Array) and callable(is_deleted) and is_deleted()
            except Exception:
                gone = False
            if gone:
                where = name + tree_util.keystr(path)
                return (
                    f"RuntimeError or ValueError: {where} is a deleted array (donated to an "
                    "earlier call, or deleted); pass a live array"
                )
    return None


def unhashable_static(api: str, arguments: Sequence[tuple[str, Any]]) -> str | None:
    """tinax's words for JAX's `ValueError` about an unhashable static argument, naming
    the first of the static ``(name, value)`` arguments that is not hashable, or
    ``None`` if all are. JAX hashes each static argument (its dispatch, in C++, raises
    before any Python of JAX's or tinax's runs; ``hash`` failing for any reason)."""
    for name, value in arguments:
        try:
            hash(value)
        except Exception:
            return (
                f"{api}: the static argument {name}={value_text(value, 80)} "
                f"({type(value).__qualname__}) must be hashable: jax.jit keys its cache on "
                "static arguments (type, hash and ==) and refuses the call (Non-hashable "
                "static arguments are not supported). Make it hashable (a tuple, not a list; "
                "@dataclass(frozen=True)), or pass it as an array and not as a static argument."
            )
    return None


def describe(error: BaseException, limit: int = 800) -> str:
    """``"TypeError: <message>"`` on one line: the exception as ``explain`` prints it,
    without memory addresses, cut after a whole sentence or clause when longer than
    ``limit`` (long enough for JAX's messages to keep their cause: a sharding's
    repr comes before "the dimension size is 60")."""
    try:
        text = _ADDRESS.sub("", " ".join(str(error).split()))
    except Exception:
        text = ""
    if len(text) > limit:
        cut = max(text.rfind(". ", 0, limit), text.rfind("; ", 0, limit))
        text = text[: cut + 1] + " ..." if cut > 0 else text[: limit - 4] + " ..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


# --- a leaf jax.jit cannot trace, on the call itself -----------------------------------------

LeafHint = Callable[[tuple[Any, ...], dict[str, Any]], "str | None"]


class HintedLeaf(functools.partial[Any]):
    """What `jax.jit` is given in place of the function it compiles: the function itself
    (a `functools.partial` with no arguments, called in C: no Python frame, and only at
    trace time), whose text in JAX's message for a leaf it cannot trace is tinax's error.

    A call whose argument holds a leaf that is not an array (an equinox module's
    activation) is refused by `jax.jit` before any trace, with a hint to use
    ``static_argnums``, which cannot hold a module with arrays. A cached call runs
    no tinax code, so there is no frame to catch the error in; but JAX's slow path
    builds that message with ``f"Error interpreting argument to {fun} ..."``,
    which formats this object (`private.rejected_leaf_call`). There, and only
    there, the hint (`jit.call_errors.leaf_error`) names the leaf and the fix, and
    the `TypeError` it raises replaces JAX's, its inner error not chained. Anywhere
    else, and when the hint has no words (``None``), this formats and prints as
    the function does, and JAX's own message stands.
    """

    __slots__ = ("_hint",)
    _hint: LeafHint

    def __format__(self, format_spec: str) -> str:
        if not format_spec:
            call = private.rejected_leaf_call(sys._getframe(1))  # pyright: ignore[reportPrivateUsage]
            if call is not None:
                text = self._hint(*call)
                if text is not None:
                    raise TypeError(text) from None  # JAX's own, inner error is not shown
        return format(self.func, format_spec)

    def __repr__(self) -> str:
        return repr(self.func)


_COPIED = (
    "__signature__",
    "__name__",
    "__qualname__",
    "__module__",
    "__doc__",
    "__annotations__",
    "__wrapped__",
)


def hinted(function: Callable[..., Any], hint: LeafHint) -> HintedLeaf:
    """``function`` as `HintedLeaf`, with the attributes JAX reads from it (its signature
    and names) copied: JAX sees what it would see of ``function``."""
    wrapper = HintedLeaf(function)
    wrapper._hint = hint  # pyright: ignore[reportPrivateUsage]
    for name in _COPIED:
        try:
            setattr(wrapper, name, getattr(function, name))
        except AttributeError:
            pass
    return wrapper
