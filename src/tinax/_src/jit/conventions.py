"""How a call reaches `jax.jit`: one protocol, one small class per calling convention.

`Plain`: the user's arguments reach `jax.jit` as they are (`jax.jit`'s own behaviour).
`NonArrays` (``static_nonarrays=True``, `models/nonarrays`): the call is split into
its array leaves and one static key, as ``eqx.filter_jit`` splits it. `WriteBack`
(``propagate_updates=True`` on a `BoundedJit`, `models/nnx`): `jax.jit` returns the
nnx objects' updates with the output, and they are written back into the caller's
objects. `plan.parse` chooses the convention; building and the object's methods
compose it, and never ask which one it is. Every method runs at wrap time, at a
trace, or off the cached path (``explain``, ``lower``...): a cached call is the
callable `Convention.caller` returned, the `jax.jit` object itself for `Plain`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from tinax._src.budget import rejections
from tinax._src.core import validation
from tinax._src.jit import batching
from tinax._src.jit.jax_options import NO_STATICS, Statics
from tinax._src.models import nonarrays
from tinax._src.models.nnx import checks as nnx_checks
from tinax._src.models.nnx import propagate as nnx_propagate
from tinax._src.models.nnx import tracing as nnx_tracing

R = TypeVar("R")

Arguments = tuple[tuple[Any, ...], dict[str, Any]]
Unhashable = Callable[[tuple[Any, ...], dict[str, Any]], str | None]
AtJax = Callable[[Any, tuple[Any, ...], dict[str, Any]], R]


class Convention(Protocol):
    """What a calling convention decides, from the wrap to the call."""

    def jit_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The options `jax.jit` is given, from the user's (checked)."""
        ...

    def traced(self, traced: Callable[..., Any], jit_kwargs: dict[str, Any]) -> Callable[..., Any]:
        """What the counted function runs: the function JAX traces, made to return
        what `jax.jit` can give back."""
        ...

    def compiled(
        self, counted: Callable[..., Any], names: tuple[str, str], hint: Unhashable
    ) -> Callable[..., Any]:
        """What `jax.jit` is given: the counted function, taking what the convention
        passes it. ``hint`` words a call refused for one of its leaves."""
        ...

    def jitted(
        self, jitted: Any, function: Callable[..., Any], signature: validation.LazySignature
    ) -> Any:
        """The object's `jax.jit` object (``_jitted``), from JAX's."""
        ...

    def caller(self, call: Callable[..., Any], unhashable: Unhashable) -> Callable[..., Any]:
        """The object's call, from the `jax.jit` object under the mesh."""
        ...

    def batch(
        self,
        function: Callable[..., Any],
        statics: Statics,
        in_axes: Any,
        out_axes: Any,
        axis_size: int | None,
        vmap_options: dict[str, Any],
    ) -> Callable[..., Any] | None:
        """``function`` batched at trace time (a `BatchedJit`'s), or ``None`` where the
        `jax.vmap` of the whole call does."""
        ...

    def jax_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Arguments:
        """A call's arguments as its `jax.jit` object takes them."""
        ...

    def user_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Arguments | None:
        """A call's arguments as the user passed them, from those `jax.jit` got (a
        compile's, which `budget/compile_guard` records), or ``None`` where they are not
        read back."""
        ...

    def output(self, out: Any) -> Any:
        """What ``eval_shape`` gives back, from its `jax.jit` object's."""
        ...

    def at_jax(
        self, jitted: Any, method: AtJax[R], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> R:
        """``method(jax_jitted, jax_args, jax_kwargs)`` on JAX's own `jax.jit` object and a
        call's arguments (from `jax_arguments`) as JAX gets them."""
        ...

    def jax_stage(self, stage: Any) -> Any:
        """JAX's own stage (``Traced``) of one the object's ``trace`` returned."""
        ...

    def leaf_message(self, api: str, path: str, value: object) -> str | None:
        """tinax's message for a leaf (not an array) that `jax.jit` refuses, or ``None``."""
        ...

    def stand_in(self, built: Callable[..., Any], names: tuple[str, str]) -> Callable[..., Any]:
        """The stand-in for the function (``explain``'s), taking what `compiled` takes."""
        ...


class Plain:
    """The user's arguments reach `jax.jit` as they are: its own behaviour, and a cached
    call is the `jax.jit` object itself (under the mesh, if bound)."""

    __slots__ = ()

    def jit_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return kwargs

    def traced(self, traced: Callable[..., Any], jit_kwargs: dict[str, Any]) -> Callable[..., Any]:
        return traced

    def compiled(
        self, counted: Callable[..., Any], names: tuple[str, str], hint: Unhashable
    ) -> Callable[..., Any]:
        return rejections.hinted(counted, hint)  # JAX's slow path says static_nonarrays

    def jitted(
        self, jitted: Any, function: Callable[..., Any], signature: validation.LazySignature
    ) -> Any:
        return jitted

    def caller(self, call: Callable[..., Any], unhashable: Unhashable) -> Callable[..., Any]:
        return call

    def batch(
        self,
        function: Callable[..., Any],
        statics: Statics,
        in_axes: Any,
        out_axes: Any,
        axis_size: int | None,
        vmap_options: dict[str, Any],
    ) -> Callable[..., Any] | None:
        if statics == NO_STATICS:  # the jax.vmap of the whole call
            return None
        # static arguments are not batched
        return batching.dynamic(function, statics, in_axes, out_axes, axis_size, vmap_options)

    def jax_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Arguments:
        return args, kwargs

    def user_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Arguments | None:
        return args, kwargs

    def output(self, out: Any) -> Any:
        return out

    def at_jax(
        self, jitted: Any, method: AtJax[R], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> R:
        return method(jitted, args, kwargs)

    def jax_stage(self, stage: Any) -> Any:
        return stage

    def leaf_message(self, api: str, path: str, value: object) -> str | None:
        return nonarrays.refused_leaf_message(api, path, value)

    def stand_in(self, built: Callable[..., Any], names: tuple[str, str]) -> Callable[..., Any]:
        return built


PLAIN = Plain()


class NonArrays(Plain):
    """``static_nonarrays=True``: every leaf that is not an array is static. The call
    reaches `jax.jit` as its array leaves and one static key (the donated arguments'
    leaves apart, ``donated``), and its output comes back whole (`models/nonarrays`)."""

    __slots__ = ("donated",)

    def __init__(self, donated: Statics | None) -> None:
        self.donated = donated

    def jit_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return nonarrays.jit_kwargs(kwargs, self.donated)

    def traced(self, traced: Callable[..., Any], jit_kwargs: dict[str, Any]) -> Callable[..., Any]:
        # Its output split, unless out_shardings is a tree for it.
        split_output = nonarrays.splits_output(jit_kwargs)
        return (nonarrays.returning_parts if split_output else nonarrays.returning_marked)(traced)

    def compiled(
        self, counted: Callable[..., Any], names: tuple[str, str], hint: Unhashable
    ) -> Callable[..., Any]:
        return nonarrays.joined(counted, *names, self.donated)

    def caller(self, call: Callable[..., Any], unhashable: Unhashable) -> Callable[..., Any]:
        return nonarrays.caller(call, unhashable, self.donated)

    def batch(
        self,
        function: Callable[..., Any],
        statics: Statics,
        in_axes: Any,
        out_axes: Any,
        axis_size: int | None,
        vmap_options: dict[str, Any],
    ) -> Callable[..., Any] | None:
        # Leaves that are not arrays are not batched.
        return nonarrays.vmapped(function, in_axes, out_axes, axis_size, vmap_options)

    def jax_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Arguments:
        return nonarrays.split_call(args, kwargs, self.donated)

    def user_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Arguments | None:
        return None  # array leaves and a static key: not read back

    def output(self, out: Any) -> Any:
        return nonarrays.whole(out)

    def leaf_message(self, api: str, path: str, value: object) -> str | None:
        if nonarrays.hashable(value):  # a static leaf JAX takes
            return None
        return nonarrays.unhashable_message(api, path, value)

    def stand_in(self, built: Callable[..., Any], names: tuple[str, str]) -> Callable[..., Any]:
        return nonarrays.joined(built, *names, self.donated)


class WriteBack(Plain):
    """``propagate_updates=True`` (a `BoundedJit`): `jax.jit` traces the function with the
    nnx objects' Variables rebound and returns ``(output, updates)``; the object's
    `jax.jit` object (`models/nnx/propagate.Propagating`) takes the caller's objects and
    writes their updates back after every call."""

    __slots__ = ()

    def jit_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if "out_shardings" not in kwargs:
            return kwargs
        # Given for the function's output: the updates are placed as JAX infers.
        return {**kwargs, "out_shardings": nnx_checks.output_shardings(kwargs["out_shardings"])}

    def compiled(
        self, counted: Callable[..., Any], names: tuple[str, str], hint: Unhashable
    ) -> Callable[..., Any]:
        return nnx_tracing.rebinding(counted)

    def jitted(
        self, jitted: Any, function: Callable[..., Any], signature: validation.LazySignature
    ) -> Any:
        return nnx_propagate.Propagating(jitted, function, signature)

    def at_jax(
        self, jitted: Any, method: AtJax[R], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> R:
        def inner(jax_jitted: Any, *jax_args: Any, **jax_kwargs: Any) -> R:
            return method(jax_jitted, jax_args, jax_kwargs)

        return jitted.bound(inner, *args, **kwargs)

    def jax_stage(self, stage: Any) -> Any:
        return nnx_propagate.jax_stage(stage)


WRITE_BACK = WriteBack()
