"""An object's options, checked once and in order, as one frozen record: its `Plan`.

As JAX's ``PjitInfo``: `parse` runs every check of `options.OPTIONS` in the declared
order (the first error is the one a user sees), and returns what building the object
needs: the function and its signature, the budget and its policy, the mesh, which
arguments are static, the options `jax.jit` is given, what `jax.vmap` is given, and
the fields the object shows, normalized. Nothing here builds or traces.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from jax.sharding import Mesh

from tinax._src.core import validation
from tinax._src.jit import jax_options, options
from tinax._src.models import nonarrays
from tinax._src.models.nnx import checks as nnx_checks


class Vmap(NamedTuple):
    """What `jax.vmap` is given (a `BatchedJit`'s): its axes, its size and its other
    options, checked (``in_axes``/``out_axes`` by `jax.vmap` itself, at the build)."""

    in_axes: Any
    out_axes: Any
    axis_size: int | None
    options: dict[str, Any]


class Plan(NamedTuple):
    """What an object is built from: every option checked and normalized.

    Attributes:
        api: The class's name, which starts every message.
        function: The wrapped callable, checked.
        signature: Its signature, read when first needed.
        max_traces: The budget.
        mesh: The mesh entered around every call, or ``None``.
        on_exceed: The overrun policy, or ``None`` for the process default.
        statics: Which arguments are static, as `jax.jit` decides it on each call
            (``nonarrays``: every leaf that is not an array).
        jit_kwargs: The options `jax.jit` is given (only those the user gave).
        static_nonarrays: The call reaches `jax.jit` split (`models/nonarrays`).
        propagate_updates: ``propagate_updates``, checked.
        write_back: What the counted function watches for lost nnx updates at the
            level of the whole call (``propagate_updates``; ``False`` for a
            `BatchedJit`, which watches each example itself).
        donating: Whether any argument is donated.
        donated: With ``static_nonarrays``, the arguments whose array leaves are
            donated apart, or ``None``.
        vmap: What `jax.vmap` is given, or ``None`` (a `BoundedJit`).
        shown: The normalized values of the fields the object shows.
    """

    api: str
    function: Callable[..., Any]
    signature: validation.LazySignature
    max_traces: int
    mesh: Mesh | None
    on_exceed: str | None
    statics: jax_options.Statics
    jit_kwargs: dict[str, Any]
    static_nonarrays: bool
    propagate_updates: bool | None
    write_back: bool | None
    donating: bool
    donated: jax_options.Statics | None
    vmap: Vmap | None
    shown: dict[str, Any]


# What an object whose jax.jit and model options are all at their defaults passes on
# (shared by every such object): jax.jit with no option, which raises nothing of its own.
_NO_KWARGS: dict[str, Any] = {}


def parse(api: options.Api, values: Mapping[str, Any]) -> Plan:
    """Checks the options of an object of class ``api`` (its fields, ``values``) in
    the declared order, and returns its `Plan`."""
    function = validation.check_function(api, values["function"])
    batched = api == "BatchedJit"
    axis_size = validation.check_axis_size(api, values["axis_size"]) if batched else None
    max_traces = validation.check_max_traces(api, values["max_traces"])
    signature = validation.LazySignature(function)
    mesh = validation.check_mesh(api, values["mesh"])
    on_exceed = validation.check_on_exceed(api, values["on_exceed"])
    shown: dict[str, Any] = {"max_traces": max_traces, "on_exceed": on_exceed}
    vmap = None
    if batched:
        vmap_options = validation.check_vmap_options(
            api, mesh, values["axis_name"], values["spmd_axis_name"], values["sum_match"]
        )
        vmap = Vmap(values["in_axes"], values["out_axes"], axis_size, vmap_options)
        shown["axis_size"] = axis_size
        shown["sum_match"] = bool(values["sum_match"])
    nnx_checks.check_not_bound(api, function)
    if options.all_defaults(values):  # most objects: nothing to check, nothing passed on
        shown["static_argnames"] = ()
        shown["donate_argnames"] = ()
        return Plan(
            api,
            function,
            signature,
            max_traces,
            mesh,
            on_exceed,
            jax_options.NO_STATICS,
            _NO_KWARGS,
            False,
            None,
            False if batched else None,
            False,
            None,
            vmap,
            shown,
        )
    propagate = nnx_checks.check_propagate_updates(api, values["propagate_updates"])
    parsed = jax_options.parse(api, signature, values, mesh)
    static_nonarrays = nonarrays.check(
        api, values["static_nonarrays"], parsed, values["in_shardings"]
    )
    nnx_checks.check_with_nonarrays(api, propagate, static_nonarrays)
    shown.update(
        static_argnames=parsed.static_argnames,
        donate_argnames=parsed.donate_argnames,
        static_argnums=parsed.static_argnums,
        donate_argnums=parsed.donate_argnums,
        keep_unused=bool(values["keep_unused"]),
        inline=parsed.inline,
        static_nonarrays=static_nonarrays,
        propagate_updates=propagate,
    )
    statics = parsed.statics
    kwargs = parsed.jit_kwargs
    donating = bool(parsed.donate_argnums or parsed.donate_argnames)
    donated = None
    if static_nonarrays:  # the call reaches jax.jit as (array leaves, static key)
        statics = statics._replace(nonarrays=True)
        if parsed.donated.argnums or parsed.donated.argnames:  # the donated leaves apart
            donated = parsed.donated
        kwargs = nonarrays.jit_kwargs(kwargs, donated)
    # A BoundedJit writes nnx updates back itself: its jax.jit returns (output, updates),
    # and out_shardings is given for the output.
    write_back = False if batched else propagate
    if write_back and "out_shardings" in kwargs:
        kwargs = {**kwargs, "out_shardings": nnx_checks.output_shardings(kwargs["out_shardings"])}
    return Plan(
        api,
        function,
        signature,
        max_traces,
        mesh,
        on_exceed,
        statics,
        kwargs,
        static_nonarrays,
        propagate,
        write_back,
        donating and not batched,
        donated,
        vmap,
        shown,
    )
