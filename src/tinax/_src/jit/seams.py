"""The seams of a budgeted object (`objects.handle.Seams`): what warm start does to its
call, through the handle, never by reaching into the object.

While warm traces wait, the object's call is warm start's (`gate`): the property
``__call__`` reads ``_call`` from the instance ``__dict__``, so the call is swapped
there, and back (`ungate`) to the `jax.jit` object itself, so that a cached call
costs what it costs without warm start. ``_warm_check`` is what ``lower``,
``trace``, ``precompile`` and ``eval_shape`` run first (``_checked_warm``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tinax._src.objects.handle import Handle


class ObjectSeams:
    """`objects.handle.Seams` for `BoundedJit` and `BatchedJit`: one for every object
    (it keeps nothing; each method is given the object's handle)."""

    __slots__ = ()

    def gate(
        self,
        handle: Handle,
        call: Callable[..., Any],
        check: Callable[[tuple[Any, ...], dict[str, Any]], None],
    ) -> Callable[..., Any] | None:
        owner: Any = handle.public()  # its own class's object: jit/ reads its state
        if owner is None:
            return None
        original: Callable[..., Any] = owner._call
        own = owner.__dict__  # the call read above was built now, in this thread, if not yet
        own["_call"] = call
        own["_warm_check"] = check
        return original

    def gated(self, handle: Handle, call: Callable[..., Any]) -> bool:
        """Whether the object is alive and its call is still ``call`` (``!=``: a bound
        method is made anew at each read)."""
        owner = handle.public()
        return owner is not None and not owner.__dict__.get("_call") != call

    def ungate(self, handle: Handle, original: Callable[..., Any]) -> None:
        owner = handle.public()
        if owner is None:
            return
        own = owner.__dict__
        own["_call"] = original
        own.pop("_warm_check", None)

    def reused(self, handle: Handle, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
        return _owner(handle)._reused(args, kwargs)  # pyright: ignore[reportPrivateUsage]

    def fresh_stage(self, handle: Handle, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return _owner(handle)._fresh_stage(args, kwargs)  # pyright: ignore[reportPrivateUsage]

    def forget_trace(
        self,
        handle: Handle,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        jaxpr: Any,
        number: int,
    ) -> None:
        _owner(handle)._forget_trace(args, kwargs, jaxpr, number)  # pyright: ignore[reportPrivateUsage]

    def precompiled(
        self, handle: Handle, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any], Any, Any]:
        return _owner(handle)._precompiled(args, kwargs)  # pyright: ignore[reportPrivateUsage]


def _owner(handle: Handle) -> Any:
    """The public object of ``handle``; `ReferenceError` if it is gone."""
    owner = handle.public()
    if owner is None:
        raise ReferenceError(f"the {handle.api} object is gone")
    return owner


SEAMS = ObjectSeams()
